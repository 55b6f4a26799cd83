"""Reliability of each family as a measure of capability (seed 003), its grade, and R^2 on the logit scale.

Per family and per posterior draw, over a set of states:

    reliability = Var_s(E[u_s]) / (Var_s(E[u_s]) + mean_s Var(u_s | E[u_s]))

the variance (over the states, population form) of the expected scores, over that plus the
mean noise variance under the fitted likelihood (beta-binomial with the cell's items, beta,
the zero process, Normal for ratings: `cell_model.moments`). Computed twice:
- `reliability_*`: over the states scored on the family (each cell with its own items);
- `reliability_all_*`: over every state in the fit ("if every model had been scored";
  unobserved countable cells use the family's median item count).
Reported as the posterior mean with a central interval (config `draws.interval`).

Grade (config `reliability`): the highest of A/B/C whose threshold (0.85/0.70/0.50) the
reliability reaches with posterior probability >= `probability` (0.9); D otherwise;
ungraded (no grade) when fewer than `min_models` distinct models were scored on the family.

R^2 on the logit scale (seed 000 section 9): 1 - SS_res / SS_tot between the logit of the
observed headroom share s = (u - c) / (1 - c) (countable: (k + 1/2) / (n + 1) first), clipped to
[clip, 1 - clip], and the posterior-mean linear predictor beta (phi - b); ratings use the
standardised score itself; exact zeros of floor-free families are left out (the zero
process explains them, not the curve).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy.special import logit

from atlas_assets.outputs.cell_model import moments
from atlas_assets.outputs.draws import PosteriorDraws, observation_items, summarize, typical_items

GRADES = ("A", "B", "C")


def reliability_draws(expected: np.ndarray, noise_var: np.ndarray) -> np.ndarray:
    """Per draw: variance over cells of the expected scores / (that + the mean noise variance)."""
    signal = expected.var(axis=1)
    return signal / (signal + noise_var.mean(axis=1))


def grade(p_at_least: Mapping[str, float], probability: float, n_models: int, min_models: int) -> str | None:
    """A/B/C: the best grade whose threshold is reached with probability >= `probability`; D otherwise;
    None (ungraded) below `min_models` models."""
    if n_models < min_models:
        return None
    for g in GRADES:
        if p_at_least[g] >= probability:
            return g
    return "D"


def grade_rule_text(cfg: Mapping[str, Any]) -> str:
    r = cfg["reliability"]
    thresholds = ", ".join(f"{g} >= {r['grades'][g]:g}" for g in GRADES)
    return (f"grade = best of {thresholds} reached with posterior probability >= {r['probability']:g}, else D; "
            f"ungraded below {r['min_models']} models")


def logit_r2(u: np.ndarray, eta_mean: np.ndarray, kind: str, floor: float, correct: np.ndarray,
             items: np.ndarray, clip: float) -> tuple[float, int]:
    """R^2 on the logit scale and the number of cells it used (see module doc)."""
    u = np.asarray(u, dtype=float)
    if kind == "rating":
        y, keep = u, np.ones(len(u), dtype=bool)
    else:
        countable = np.isfinite(correct) & np.isfinite(items)
        share = np.where(countable, (np.nan_to_num(correct) + 0.5) / (np.nan_to_num(items, nan=1.0) + 1), u)
        s = np.clip((share - floor) / (1 - floor), clip, 1 - clip)
        y = logit(s)
        keep = ~((floor == 0) & (u <= 0))
    y, f = y[keep], np.asarray(eta_mean, dtype=float)[keep]
    if len(y) < 2:
        return float("nan"), int(len(y))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0:
        return float("nan"), int(len(y))
    return 1.0 - float(np.sum((y - f) ** 2)) / ss_tot, int(len(y))


def reliability_grades(draws: PosteriorDraws, families: pd.DataFrame, observations: pd.DataFrame,
                       states: pd.DataFrame, cfg: Mapping[str, Any]) -> pd.DataFrame:
    """One row per family (position order)."""
    interval = float(cfg["draws"]["interval"])
    rcfg = cfg["reliability"]
    thresholds = {g: float(rcfg["grades"][g]) for g in GRADES}
    probability, min_models = float(rcfg["probability"]), int(rcfg["min_models"])
    S = draws.phi.shape[1]
    typical = typical_items(observations, len(families))
    obs_items = observation_items(observations)
    cap_mean = draws.phi.mean(axis=0)
    rows = []
    for j, fam in families.reset_index(drop=True).iterrows():
        rows_j = np.flatnonzero(observations["family_pos"].to_numpy() == j)
        obs = observations.iloc[rows_j]
        st = obs["state_pos"].to_numpy(dtype=int)
        lik = draws.family(j, families)
        eta = draws.eta(st, j)
        expected, noise = moments(eta, lik, obs_items[rows_j])
        rel = reliability_draws(expected, noise)
        items_all = np.full(S, typical[j])
        items_all[st] = obs_items[rows_j]
        expected_all, noise_all = moments(draws.eta(np.arange(S), j), lik, items_all)
        rel_all = reliability_draws(expected_all, noise_all)
        n_models = int(states["model"].iloc[st].nunique())
        p_at_least = {g: float((rel >= t).mean()) for g, t in thresholds.items()}
        r2, r2_n = logit_r2(obs["u"].to_numpy(), eta.mean(axis=0), lik.kind, lik.floor,
                            obs["correct"].to_numpy(dtype=float), obs["items"].to_numpy(dtype=float),
                            float(rcfg["logit_clip"]))
        s, s_all = summarize(rel, interval), summarize(rel_all, interval)
        g = grade(p_at_least, probability, n_models, min_models)
        rows.append({
            "family": fam["family"], "kind": lik.kind, "n_observations": int(len(obs)), "n_models": n_models,
            "reliability_mean": s["mean"], "reliability_median": s["median"],
            "reliability_lower": s["lower"], "reliability_upper": s["upper"],
            "reliability_all_mean": s_all["mean"], "reliability_all_lower": s_all["lower"],
            "reliability_all_upper": s_all["upper"],
            **{f"p_at_least_{g_}": p_at_least[g_] for g_ in GRADES},
            "grade": g,
            "grade_status": "graded" if g is not None else f"ungraded: {n_models} models < {min_models}",
            # spread of the scored states' capability relative to every state (why the two reliabilities differ)
            "capability_sd_ratio": float(np.std(cap_mean[st]) / np.std(cap_mean)) if S > 1 else float("nan"),
            "r2_logit": r2, "r2_cells": r2_n, "interval": interval,
        })
    out = pd.DataFrame(rows)
    out["grade_rule"] = grade_rule_text(cfg)
    return out
