"""Is capability one number? The residual-correlation test of seed 003.

Residual of an observed cell in draw d: u - E_d[u] (the score minus its expected value under
that draw, zero process included). For every pair of families sharing at least
`min_shared_states` states (config `dimensionality`), the Pearson correlation of the two
families' residuals over the shared states; the statistic T is the mean of the squared
correlations over those pairs. Its reference distribution: the same T computed on
posterior-predictive replicate tables (u_rep_d - E_d[u], one replicate per draw, evenly
spaced draws, at least `min_replicates`), where one capability explains everything by
construction. Reported: the posterior mean of T on the data, the mean of T on the replicates,
their ratio, and the tail probability P(T_rep >= T_data) over draws (a discrepancy
posterior-predictive p-value); per pair the mean correlation, its square and its own tail
probability; the `top_pairs` most correlated pairs.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd

from atlas_assets.outputs.draws import thin_index


def shared_pairs(observations: pd.DataFrame, families: pd.DataFrame, min_shared: int) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
    """(family a, family b, observation rows of a, of b aligned by state) for pairs sharing >= min_shared states."""
    by_family = {int(j): dict(zip(g["state_pos"].to_numpy(dtype=int), g.index.to_numpy()))
                 for j, g in observations.reset_index(drop=True).groupby("family_pos")}
    out = []
    js = sorted(by_family)
    for ia, a in enumerate(js):
        for b in js[ia + 1:]:
            shared = sorted(set(by_family[a]) & set(by_family[b]))
            if len(shared) >= min_shared:
                out.append((a, b, np.array([by_family[a][s] for s in shared]), np.array([by_family[b][s] for s in shared])))
    return out


def row_correlation(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson correlation per row of two (D, n) arrays; NaN where a row has no variance."""
    x = x - x.mean(axis=1, keepdims=True)
    y = y - y.mean(axis=1, keepdims=True)
    den = np.sqrt((x ** 2).sum(axis=1) * (y ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (x * y).sum(axis=1) / np.where(den > 0, den, 1.0), np.nan)


def dimensionality_test(u: np.ndarray, mu: np.ndarray, u_rep: np.ndarray, observations: pd.DataFrame,
                        families: pd.DataFrame, cfg: Mapping[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary: one row, pairs: one row per family pair sharing enough states, most correlated first).

    `u` (N,) observed scores, `mu` (D, N) expected scores, `u_rep` (D, N) replicate scores, in
    observation order; the first `replicates` evenly spaced draws are used."""
    dcfg = cfg["dimensionality"]
    keep = thin_index(mu.shape[0], int(dcfg["replicates"]))
    mu, u_rep = np.asarray(mu, dtype=float)[keep], np.asarray(u_rep, dtype=float)[keep]
    real = np.asarray(u, dtype=float)[None, :] - mu
    rep = u_rep - mu
    plug = np.asarray(u, dtype=float) - mu.mean(axis=0)
    pairs = shared_pairs(observations, families, int(dcfg["min_shared_states"]))
    names = families["family"].to_numpy()
    D = len(keep)
    r_real = np.full((D, len(pairs)), np.nan)
    r_rep = np.full((D, len(pairs)), np.nan)
    r_plug = np.full(len(pairs), np.nan)
    rows = []
    for i, (a, b, ia, ib) in enumerate(pairs):
        r_real[:, i] = row_correlation(real[:, ia], real[:, ib])
        r_rep[:, i] = row_correlation(rep[:, ia], rep[:, ib])
        r_plug[i] = row_correlation(plug[None, ia], plug[None, ib])[0]
        rows.append({"family_a": names[a], "family_b": names[b], "n_shared_states": int(len(ia))})
    with np.errstate(invalid="ignore"):
        t_real = np.nanmean(r_real ** 2, axis=1) if pairs else np.full(D, np.nan)
        t_rep = np.nanmean(r_rep ** 2, axis=1) if pairs else np.full(D, np.nan)
    pair_table = pd.DataFrame(rows, columns=["family_a", "family_b", "n_shared_states"])
    if pairs:
        pair_table["r_mean"] = np.nanmean(r_real, axis=0)
        pair_table["r_plugin"] = r_plug
        pair_table["r2_data"] = np.nanmean(r_real ** 2, axis=0)
        pair_table["r2_replicate_mean"] = np.nanmean(r_rep ** 2, axis=0)
        pair_table["p_replicate_at_least"] = np.nanmean(r_rep ** 2 >= r_real ** 2, axis=0)
        pair_table = pair_table.sort_values("r2_data", ascending=False, kind="mergesort").reset_index(drop=True)
    top = pair_table.head(int(dcfg["top_pairs"]))
    valid = np.isfinite(t_real) & np.isfinite(t_rep)
    summary = pd.DataFrame([{
        "n_pairs": len(pairs), "min_shared_states": int(dcfg["min_shared_states"]),
        "n_replicates": int(D),
        "statistic": float(np.nanmean(t_real)) if pairs else float("nan"),
        "statistic_plugin": float(np.nanmean(r_plug ** 2)) if pairs else float("nan"),
        "replicate_mean": float(np.nanmean(t_rep)) if pairs else float("nan"),
        "replicate_q95": float(np.nanquantile(t_rep, 0.95)) if pairs else float("nan"),
        "tail_probability": float((t_rep[valid] >= t_real[valid]).mean()) if valid.any() else float("nan"),
        "top_pairs": "; ".join(f"{r.family_a} & {r.family_b} (r={r.r_mean:+.2f})" for r in top.itertuples()),
        "rule": (f"mean squared residual correlation over family pairs sharing >= {int(dcfg['min_shared_states'])} "
                 "states vs posterior-predictive replicates; tail probability = P(T_replicate >= T_data)"),
    }])
    summary["ratio"] = summary["statistic"] / summary["replicate_mean"]
    return summary, pair_table
