"""What would state X score on family Y? Predictive summaries of every unobserved cell, p-values of observed ones.

Rows: every rank-eligible state x family cell that is NOT observed (predicted from the
posterior: one predictive draw per posterior draw from `cell_model.predictive`, with the
family's median item count for countable families, the zero process where it applies),
plus every observed cell (its posterior predictive draws are the fit's own `u_rep`) with
its posterior predictive p-value, mid-p form: P(u_rep > u) + 1/2 P(u_rep = u).
Summaries: mean, median and the central intervals of config `cell_predictions.intervals`
(50% and 90%), on the unit scale u and on the family's own score scale (`score_*`: the
declared range of the family's benchmarks when they share one, reflected back for
lower-is-better benchmarks; otherwise the unit share of the declared range; ratings stay on
their standardised scale). This is the machinery the validation studies use for held-out cells.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd

from atlas_assets.outputs.cell_model import predictive
from atlas_assets.outputs.draws import PosteriorDraws, observation_items, typical_items


def interval_columns(intervals) -> list[tuple[float, str, str]]:
    return [(float(x), f"lower_{round(100 * float(x))}", f"upper_{round(100 * float(x))}") for x in sorted(intervals)]


def mid_p_value(rep: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Per column: P(rep > observed) + 1/2 P(rep == observed) over the draws (rows)."""
    observed = np.asarray(observed, dtype=float)[None, :]
    # a count share K / n and the stored score differ in the last bits: "equal" within a tolerance, and
    # "greater" only beyond it, so no draw counts twice (a p-value above 1 otherwise)
    equal = np.isclose(rep, observed, rtol=0, atol=1e-9)
    return ((rep > observed) & ~equal).mean(axis=0) + 0.5 * equal.mean(axis=0)


def family_score_scales(families: pd.DataFrame, registry: pd.DataFrame | None) -> pd.DataFrame:
    """Per family: the declared range and direction shared by its registry benchmarks (primary or component,
    bounded), else none (the unit share is reported)."""
    out = families[["family", "kind"]].copy()
    out["range_min"], out["range_max"], out["direction"], out["unit"] = np.nan, np.nan, None, None
    if registry is None or registry.empty:
        return out
    reg = registry[registry["role"].isin(["primary", "component"]) & (registry["kind"] == "bounded")]
    for i, fam in out.iterrows():
        rows = reg[reg["family"] == fam["family"]][["range_min", "range_max", "direction", "unit"]].drop_duplicates()
        if fam["kind"] == "bounded" and len(rows) == 1 and rows.notna().all(axis=None):
            r = rows.iloc[0]
            out.loc[i, ["range_min", "range_max", "direction", "unit"]] = [float(r.range_min), float(r.range_max),
                                                                           r.direction, r.unit]
    return out


def _to_score(values: dict[str, np.ndarray], scale_row: pd.Series | None, pairs, kind: str) -> tuple[dict, str]:
    if scale_row is None or not np.isfinite(scale_row["range_min"]):
        label = "standardised rating" if kind == "rating" else "share of the declared range (0-1)"
        return dict(values), label
    lo, hi = float(scale_row["range_min"]), float(scale_row["range_max"])
    lower_is_better = scale_row["direction"] == "lower"
    f = (lambda u: hi - u * (hi - lo)) if lower_is_better else (lambda u: lo + u * (hi - lo))
    out = {k: f(v) for k, v in values.items()}
    if lower_is_better:  # reflected: interval ends swap
        for _, lo_name, hi_name in pairs:
            out[lo_name], out[hi_name] = out[hi_name], out[lo_name]
    return out, f"declared range [{lo:g}, {hi:g}] {scale_row['unit']}" + (" (lower is better)" if lower_is_better else "")


def family_cell_frame(rep_obs: np.ndarray, rep_new: np.ndarray, u_obs: np.ndarray, seen: np.ndarray, todo: np.ndarray,
                      items_seen: np.ndarray, items_new: np.ndarray, family: str, family_pos: int,
                      scale_row: pd.Series | None, pairs, kind: str) -> pd.DataFrame:
    """One family's rows: the observed cells (`seen` states, replicates `rep_obs`, scores `u_obs`) with their
    mid-p value, then the predicted ones (`todo`, replicates `rep_new`); summaries on the unit and score scales."""
    rep = np.concatenate([rep_obs, rep_new], axis=1)
    values = {"mean": rep.mean(axis=0), "median": np.median(rep, axis=0)}
    for x, lo_name, hi_name in pairs:
        values[lo_name], values[hi_name] = np.quantile(rep, [(1 - x) / 2, (1 + x) / 2], axis=0)
    unobserved = np.full(len(todo), np.nan)
    score, label = _to_score({**values, "observed": np.concatenate([u_obs, unobserved])}, scale_row, pairs, kind)
    return pd.DataFrame({
        "state_pos": np.concatenate([seen, todo]).astype(int),
        "family": family, "family_pos": family_pos,
        "observed": np.concatenate([np.ones(len(seen), bool), np.zeros(len(todo), bool)]),
        "u_observed": np.concatenate([u_obs, unobserved]),
        "n_items": np.concatenate([items_seen, items_new]),
        **{f"pred_{k}" if k in ("mean", "median") else k: v for k, v in values.items()},
        "ppp": np.concatenate([mid_p_value(rep_obs, u_obs), unobserved]),
        **{f"score_{k}": v for k, v in score.items()},
        "score_scale": label,
    })


def cell_predictions(draws: PosteriorDraws, families: pd.DataFrame, observations: pd.DataFrame,
                     states: pd.DataFrame, eligible: np.ndarray, cfg: Mapping[str, Any],
                     scales: pd.DataFrame | None = None) -> pd.DataFrame:
    pairs = interval_columns(cfg["cell_predictions"]["intervals"])
    rng = np.random.default_rng(int(cfg["draws"]["seed"]))
    eligible = np.asarray(eligible, dtype=bool)
    typical = typical_items(observations, len(families))
    obs_items = observation_items(observations)
    scale_by_family = {} if scales is None else {r["family"]: r for _, r in scales.iterrows()}
    fam_pos = observations["family_pos"].to_numpy()
    frames = []
    for j, fam in families.reset_index(drop=True).iterrows():
        lik = draws.family(j, families)
        rows_j = np.flatnonzero(fam_pos == j)
        seen = observations["state_pos"].to_numpy(dtype=int)[rows_j]
        todo = np.setdiff1d(np.flatnonzero(eligible), seen)
        # observed cells: the fit's own replicates (or fresh ones when the fit carries none)
        if draws.u_rep is not None:
            rep_obs = draws.u_rep[:, rows_j]
        else:
            rep_obs = predictive(rng, draws.eta(seen, j), lik, obs_items[rows_j])
        items_new = np.full(len(todo), typical[j])
        rep_new = predictive(rng, draws.eta(todo, j), lik, items_new) if len(todo) else np.empty((draws.n_draws, 0))
        u_obs = observations["u"].to_numpy(dtype=float)[rows_j]
        frames.append(family_cell_frame(rep_obs, rep_new, u_obs, seen, todo, obs_items[rows_j], items_new, fam["family"],
                                        j, scale_by_family.get(fam["family"]), pairs, lik.kind))
    out = pd.concat(frames, ignore_index=True)
    st = states.reset_index(drop=True)
    out.insert(0, "model", st["model"].to_numpy()[out["state_pos"]])
    out.insert(1, "reasoning_state", st["reasoning_state"].to_numpy()[out["state_pos"]])
    out["eligible"] = eligible[out["state_pos"]]
    out["verification_class"] = observed_verification(out, observations)
    return out.sort_values(["family_pos", "state_pos"], kind="mergesort").reset_index(drop=True)


def observed_verification(cells: pd.DataFrame, observations: pd.DataFrame) -> np.ndarray:
    """Per cell, the verification class (seed 002) of the observation behind an observed cell (the strongest
    class among its reports, as stage 3 kept it); None for a predicted cell or where the data carry no class."""
    out = np.full(len(cells), None, dtype=object)
    if "verification_class" not in observations:
        return out
    by_cell = dict(zip(zip(observations["state_pos"].astype(int), observations["family_pos"].astype(int)),
                       observations["verification_class"]))
    observed = cells["observed"].to_numpy(dtype=bool)
    keys = zip(cells["state_pos"].to_numpy(dtype=int)[observed], cells["family_pos"].to_numpy(dtype=int)[observed])
    out[observed] = [by_cell.get(k) for k in keys]
    return out
