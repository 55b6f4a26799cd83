"""Difficulty per family on the display scale, with the bound rule, saturation point, frontier score, discrimination.

Difficulty is the midpoint crossing b_j: the capability at which the curve
c + (1 - c) inv_logit(beta (phi - b)) is halfway between the floor and a perfect score.
It is mapped to display units per draw (the same affine map as the capability scores).

Bound rule (config `difficulty.evaluated_range_percentiles`, default [5, 95]): the range
evaluated on a family is the low-high percentile of the posterior-mean display capability
of the states observed on it. When the posterior median of the difficulty lies
- above the high percentile, the family is flagged ">=" (shown "≳ x", x = the difficulty's
  lower interval end): nothing evaluated on it comes close to half-solving it;
- below the low percentile, it is flagged "<=" ("≲ x", x = the upper interval end):
  everything evaluated is past its midpoint;
either way the data bracket the crossing from one side only.

Saturation point (config `difficulty.saturation_share` s): the capability at which the curve
reaches the share s of its headroom, c + s (1 - c), i.e. b + logit(s) / beta (bounded families).
Frontier expected score: the expected score (zero process included) of the current frontier
state, the rank-eligible state with the highest posterior mean display capability.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy.special import logit

from atlas_assets.outputs.cell_model import moments
from atlas_assets.outputs.draws import PosteriorDraws, summarize

AT_LEAST, AT_MOST = "≳", "≲"


def bound_rule_text(cfg: Mapping[str, Any]) -> str:
    lo, hi = cfg["difficulty"]["evaluated_range_percentiles"]
    return (f"bound when the posterior median difficulty lies outside the {lo:g}th-{hi:g}th percentile of the "
            "posterior-mean display capability of the states evaluated on the family")


def frontier_state(draws: PosteriorDraws, eligible: np.ndarray) -> int:
    """Stan position of the rank-eligible state with the highest posterior mean display capability."""
    mean = draws.display(draws.phi).mean(axis=0)
    mean = np.where(np.asarray(eligible, dtype=bool), mean, -np.inf)
    return int(np.argmax(mean))


def difficulty_bounds(draws: PosteriorDraws, families: pd.DataFrame, observations: pd.DataFrame,
                      states: pd.DataFrame, eligible: np.ndarray, cfg: Mapping[str, Any]) -> pd.DataFrame:
    """One row per family (position order)."""
    interval = float(cfg["draws"]["interval"])
    lo_pct, hi_pct = (float(x) for x in cfg["difficulty"]["evaluated_range_percentiles"])
    share = float(cfg["difficulty"]["saturation_share"])
    b_disp = draws.display(draws.b)
    cap_mean = draws.display(draws.phi).mean(axis=0)          # (S,) posterior-mean display capability
    front = frontier_state(draws, eligible)
    front_label = f"{states['model'].iloc[front]}|{states['reasoning_state'].iloc[front]}"
    rows = []
    for j, fam in families.reset_index(drop=True).iterrows():
        obs = observations[observations["family_pos"] == j]
        evaluated = np.unique(obs["state_pos"].to_numpy(dtype=int))
        cap = cap_mean[evaluated]
        ev_lo, ev_hi = np.percentile(cap, [lo_pct, hi_pct])
        b = summarize(b_disp[:, j], interval)
        bound = AT_LEAST if b["median"] > ev_hi else AT_MOST if b["median"] < ev_lo else None
        beta = summarize(draws.beta[:, j], interval)
        beta_disp = summarize(draws.beta[:, j] / draws.scale, interval)
        lik = draws.family(j, families)
        c = float(fam["floor"])
        if lik.kind == "rating":
            past_mid = (obs["u"] >= 0).mean()
            sat = {k: np.nan for k in ("mean", "median", "lower", "upper")}
        else:
            past_mid = (obs["u"] >= c + (1 - c) / 2).mean()
            sat = summarize(draws.display(draws.b[:, j] + logit(share) / draws.beta[:, j]), interval)
        expected, _ = moments(draws.eta([front], j), lik)
        fx = summarize(expected[:, 0], interval)
        if bound == AT_LEAST:
            shown = f"{AT_LEAST} {b['lower']:.0f}"
        elif bound == AT_MOST:
            shown = f"{AT_MOST} {b['upper']:.0f}"
        else:
            shown = f"{b['median']:.0f} [{b['lower']:.0f}, {b['upper']:.0f}]"
        rows.append({
            "family": fam["family"], "kind": lik.kind, "floor": c,
            "n_observations": int(len(obs)), "n_states_evaluated": int(len(evaluated)),
            "difficulty_mean": b["mean"], "difficulty_median": b["median"],
            "difficulty_lower": b["lower"], "difficulty_upper": b["upper"],
            "evaluated_low": float(ev_lo), "evaluated_high": float(ev_hi),
            "evaluated_min": float(cap.min()), "evaluated_max": float(cap.max()),
            "bound": bound, "difficulty_display": shown,
            "p_above_evaluated_range": float((b_disp[:, j] > ev_hi).mean()),
            "p_below_evaluated_range": float((b_disp[:, j] < ev_lo).mean()),
            "share_observed_past_midpoint": float(past_mid),
            "saturation_share": share,
            "saturation_mean": sat["mean"], "saturation_lower": sat["lower"], "saturation_upper": sat["upper"],
            "frontier_state": front_label,
            "frontier_expected_mean": fx["mean"], "frontier_expected_lower": fx["lower"],
            "frontier_expected_upper": fx["upper"],
            "discrimination_mean": beta["mean"], "discrimination_lower": beta["lower"],
            "discrimination_upper": beta["upper"],
            "discrimination_display_mean": beta_disp["mean"], "discrimination_display_lower": beta_disp["lower"],
            "discrimination_display_upper": beta_disp["upper"],
            "interval": interval,
        })
    out = pd.DataFrame(rows)
    out["bound_rule"] = bound_rule_text(cfg)
    return out
