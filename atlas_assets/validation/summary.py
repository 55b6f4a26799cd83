"""Study-level tables from the folds: one metrics row per study x method, per-family held-out skill, and the
whole-family leaderboard summary (000 section 8)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from atlas_assets.validation.metrics import family_skill, study_metrics

CELL_STUDIES = ["forward", "forward_strict", "forward_thin", "masked", "masked_state", "forward_active"]
# paths reported together as well as apart: calibrate-in at a setting with evidence and at one without
PATH_GROUPS = {"calibrate_in": ("calibrated", "calibrated_unmeasured_setting")}


def _path_rows(frame: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """(study, path, rows) for every path of every study with a `path` column, and each PATH_GROUPS group."""
    if "path" not in frame.columns:
        return []
    with_path = frame[frame["path"].notna()]
    out = [(study, path, rows) for (study, path), rows in with_path.groupby(["study", "path"], sort=True)]
    for group, members in PATH_GROUPS.items():
        inside = with_path[with_path["path"].isin(members)]
        out += [(study, group, rows) for study, rows in inside.groupby("study", sort=True)]
    return out


def cell_study_metrics(predictions: pd.DataFrame, intervals: Sequence[float]) -> pd.DataFrame:
    """One row per study x method; where cells carry a `path` (forward_thin: the refit `fit`, calibrate-in at a
    measured setting `calibrated` or at a setting without evidence `calibrated_unmeasured_setting`, the two
    together `calibrate_in`), also one row per `<study>:<path>` x method."""
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
    for study, path, frame in _path_rows(predictions):
        for method, cells in frame.groupby("method", sort=False):
            rows.append({"study": f"{study}:{path}", "method": method, "n_folds": int(cells["fold"].nunique()),
                         **study_metrics(cells, intervals)})
    return pd.DataFrame(rows)


def cell_shares(metrics: pd.DataFrame, folds: pd.DataFrame, predictions: pd.DataFrame,
                unscored: pd.DataFrame) -> pd.DataFrame:
    """`metrics` with, per cell-study row and per `<study>:<path>` row: heldout_cells (every kind), the share the
    model predicted (share_predicted) and the share every method scored (share_scored). Study rows count from
    validation_folds (n_heldout, n_predicted, n_scored); path rows from the scored cells and the unscored list
    (validation_unscored, every held-out cell not scored with its reason)."""
    out = metrics.copy()
    out["heldout_cells"], out["share_predicted"], out["share_scored"] = np.nan, np.nan, np.nan
    if len(folds):
        held = folds.groupby("study")[[c for c in ("n_heldout", "n_scored", "n_predicted") if c in folds]].sum(min_count=1)
        held = held.reindex(columns=["n_heldout", "n_scored", "n_predicted"])
        held = held[held.index.isin(CELL_STUDIES)]
        denominator = held["n_heldout"].where(held["n_heldout"] > 0)
        out["heldout_cells"] = out["study"].map(held["n_heldout"])
        out["share_scored"] = out["study"].map(held["n_scored"] / denominator)
        out["share_predicted"] = out["study"].map(held["n_predicted"] / denominator)
    atlas = predictions[predictions["method"] == "atlas"] if len(predictions) else predictions
    missed = unscored if unscored is not None and len(unscored) else pd.DataFrame(
        columns=["study", "path", "predicted_by_model"])
    scored_paths = {(s, p): len(r) for s, p, r in _path_rows(atlas)}
    missed_paths = {(s, p): (len(r), int(r["predicted_by_model"].astype(bool).sum())) for s, p, r in _path_rows(missed)}
    for study, path in sorted(set(missed_paths) - set(scored_paths)):
        # a path none of whose cells could be scored still gets its row: no cell disappears from the summary
        out = pd.concat([out, pd.DataFrame([{"study": f"{study}:{path}", "method": "atlas", "n_cells": 0}])],
                        ignore_index=True)
    for study, path in set(scored_paths) | set(missed_paths):
        n_scored = scored_paths.get((study, path), 0)
        n_missed, n_missed_predicted = missed_paths.get((study, path), (0, 0))
        total = n_scored + n_missed
        rows = out["study"] == f"{study}:{path}"
        if total and rows.any():
            out.loc[rows, "heldout_cells"] = total
            out.loc[rows, "share_predicted"] = (n_scored + n_missed_predicted) / total
            out.loc[rows, "share_scored"] = n_scored / total
    return out


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
