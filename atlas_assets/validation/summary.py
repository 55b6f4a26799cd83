"""Study-level tables from the folds: one metrics row per study x method, per-family held-out skill, and the
whole-family leaderboard summary (000 section 8)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from atlas_assets.validation.metrics import family_skill, study_metrics

CELL_STUDIES = ["forward", "forward_strict", "forward_thin", "masked", "masked_state", "forward_active"]


def cell_study_metrics(predictions: pd.DataFrame, intervals: Sequence[float]) -> pd.DataFrame:
    """One row per study x method; where cells carry a `path` (forward_thin: calibrate-in at a measured setting,
    or at a setting without evidence), also one row per `<study>:<path>` x method."""
    rows = []
    for (study, method), cells in predictions.groupby(["study", "method"], sort=False):
        rows.append({"study": study, "method": method, "n_folds": int(cells["fold"].nunique()),
                     **study_metrics(cells, intervals)})
    # the all-history forward study on exactly the cells of the active-panel one (identical splits)
    active = predictions[predictions["study"] == "forward_active"]
    if len(active):
        key = ["model", "reasoning_state", "family"]
        cells_of_active = set(map(tuple, active[key].drop_duplicates().to_numpy()))
        forward = predictions[predictions["study"] == "forward"]
        same = forward[np.array([tuple(k) in cells_of_active for k in forward[key].to_numpy()], dtype=bool)]
        for method, cells in same.groupby("method", sort=False):
            rows.append({"study": "forward:active_cells", "method": method, "n_folds": int(cells["fold"].nunique()),
                         **study_metrics(cells, intervals)})
    if "path" in predictions.columns:
        with_path = predictions[predictions["path"].notna()]
        for (study, path, method), cells in with_path.groupby(["study", "path", "method"], sort=True):
            rows.append({"study": f"{study}:{path}", "method": method, "n_folds": int(cells["fold"].nunique()),
                         **study_metrics(cells, intervals)})
    return pd.DataFrame(rows)


def family_study_metrics(family_ranks: pd.DataFrame) -> pd.DataFrame:
    """Whole-family holdout: mean / median / panel-weighted Spearman, standardised RMSE and MAE per method,
    and the share of held-out families where the model's ranking agrees better than the baseline's."""
    if family_ranks.empty:
        return pd.DataFrame()
    wide = family_ranks.pivot_table(index="family", columns="method", values="spearman")
    wins = (wide["atlas"] > wide["mean_standardized"]).mean() if {"atlas", "mean_standardized"} <= set(wide) else np.nan
    rows = []
    for method, r in family_ranks.groupby("method"):
        w = r["n_models"].to_numpy(float)
        rows.append({"study": "family", "method": method, "n_folds": int(r["fold"].nunique()),
                     "n_cells": int(r["n_models"].sum()), "n_families": int(len(r)),
                     "spearman": float(r["spearman"].mean()), "median_spearman": float(r["spearman"].median()),
                     "weighted_spearman": float(np.nansum(r["spearman"] * w) / w[np.isfinite(r["spearman"])].sum()),
                     "rmse": float(r["rmse_std"].mean()), "mae": float(r["mae_std"].mean()),
                     "win_share": float(wins) if method == "atlas" else float(1 - wins)})
    return pd.DataFrame(rows)


def sensitivity_metrics(sensitivity: pd.DataFrame) -> pd.DataFrame:
    if sensitivity.empty:
        return pd.DataFrame()
    worst = sensitivity.sort_values("max_top20_rank_shift", ascending=False).iloc[0]
    return pd.DataFrame([{"study": "sensitivity", "method": "atlas", "n_folds": int(len(sensitivity)),
                          "max_rank_shift": int(worst["max_top20_rank_shift"]),
                          "max_rank_shift_family": str(worst["dropped_family"])}])


def held_out_skill(predictions: pd.DataFrame, reliability: pd.DataFrame | None, min_cells: int = 5) -> tuple[pd.DataFrame, float]:
    """Per family, from the masked study (every cell held out once): skill of the model against the family
    mean, joined with the production fit's reliability; and the rank correlation of the two (003 reports 0.95)."""
    masked = predictions[predictions["study"] == "masked"]
    skill = family_skill(masked, "atlas", "family_mean", min_cells=min_cells)
    skill.insert(0, "study", "masked")
    rho = np.nan
    if reliability is not None and len(skill):
        skill = skill.merge(reliability[["family", "reliability_mean"]], on="family", how="left")
        both = skill.dropna(subset=["skill", "reliability_mean"])
        if len(both) > 2:
            rho = float(spearmanr(both["skill"], both["reliability_mean"]).statistic)
    elif "reliability_mean" not in skill:
        skill["reliability_mean"] = np.nan
    return skill, rho


def validation_metrics(predictions: pd.DataFrame, family_ranks: pd.DataFrame, sensitivity: pd.DataFrame,
                       cfg: Mapping[str, Any]) -> pd.DataFrame:
    parts = [cell_study_metrics(predictions, [float(x) for x in cfg["intervals"]]) if len(predictions) else pd.DataFrame(),
             family_study_metrics(family_ranks), sensitivity_metrics(sensitivity)]
    return pd.concat([p for p in parts if len(p)], ignore_index=True)
