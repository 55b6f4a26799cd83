"""Scores of predictive ensembles on held-out cells, per cell and per study.

Every method (the model and each baseline) hands over an ensemble: predictive draws per
held-out cell, (draws, cells). From it: mean, median, central intervals, and the CRPS of
the ensemble against the observed score (scoringrules' `crps_ensemble`, the "qd"
estimator — chosen over properscoring because it is maintained and vectorised over
cells). Study metrics are computed over bounded families' cells (the 0-1 scale, "points"
= 100 x unit); a rating family's standardised scores are kept per cell but not mixed
into those errors.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import scoringrules
from scipy.stats import spearmanr


def interval_names(x: float) -> tuple[str, str]:
    return f"lower_{round(100 * x)}", f"upper_{round(100 * x)}"


def cell_scores(u: np.ndarray, ensemble: np.ndarray, intervals: Sequence[float]) -> pd.DataFrame:
    """Per held-out cell: pred_mean, pred_median, pred_sd, the interval ends, crps. `ensemble` is (draws, cells);
    a column with no finite draw (a cell the method cannot predict) gives NaN everywhere."""
    u = np.asarray(u, dtype=float)
    ens = np.asarray(ensemble, dtype=float)
    ok = np.isfinite(ens).all(axis=0)
    out = {"pred_mean": np.full(len(u), np.nan), "pred_median": np.full(len(u), np.nan), "pred_sd": np.full(len(u), np.nan)}
    for x in intervals:
        for name in interval_names(x):
            out[name] = np.full(len(u), np.nan)
    out["crps"] = np.full(len(u), np.nan)
    if ok.any():
        e = ens[:, ok]
        out["pred_mean"][ok] = e.mean(axis=0)
        out["pred_median"][ok] = np.median(e, axis=0)
        out["pred_sd"][ok] = e.std(axis=0)
        for x in intervals:
            lo, hi = interval_names(x)
            out[lo][ok], out[hi][ok] = np.quantile(e, [(1 - x) / 2, (1 + x) / 2], axis=0)
        out["crps"][ok] = np.asarray(scoringrules.crps_ensemble(u[ok], e.T))
    return pd.DataFrame(out)


def study_metrics(cells: pd.DataFrame, intervals: Sequence[float]) -> dict:
    """One method's metrics over scored bounded cells of a study: n, RMSE/MAE (unit and points), CRPS,
    Spearman between predicted mean and observed score, the coverage of each central interval, and the mean and sd
    of the cells' z-scores (observed - predicted mean) / predictive sd (sd near 1: the spread matches the misses;
    above 1: the intervals are too narrow), over cells with a positive predictive sd."""
    rows = cells[(cells["kind"] == "bounded") & cells["pred_mean"].notna()]
    err = rows["pred_mean"].to_numpy(float) - rows["u"].to_numpy(float)
    out = {"n_cells": int(len(rows))}
    if len(rows) == 0:
        return out
    out["rmse"] = float(np.sqrt(np.mean(err ** 2)))
    out["mae"] = float(np.mean(np.abs(err)))
    out["rmse_points"], out["mae_points"] = 100 * out["rmse"], 100 * out["mae"]
    out["crps"] = float(rows["crps"].mean())
    out["spearman"] = float(spearmanr(rows["pred_mean"], rows["u"]).statistic) if len(rows) > 2 else np.nan
    for x in intervals:
        lo, hi = interval_names(x)
        out[f"coverage_{round(100 * x)}"] = float(((rows["u"] >= rows[lo]) & (rows["u"] <= rows[hi])).mean())
    if "pred_sd" in rows:
        spread = rows["pred_sd"].to_numpy(float)
        z = -err[spread > 0] / spread[spread > 0]
        out["z_mean"] = float(z.mean()) if len(z) else np.nan
        out["z_sd"] = float(z.std(ddof=1)) if len(z) > 1 else np.nan
    return out


def family_skill(cells: pd.DataFrame, method: str, reference: str = "family_mean", min_cells: int = 5) -> pd.DataFrame:
    """Per family: held-out skill of `method` against `reference` = 1 - CRPS_method / CRPS_reference, over the
    cells both scored (seed 003: 0 = no better than the family's average score, 0.5 = half its error)."""
    both = cells[cells["method"].isin([method, reference])].pivot_table(
        index=["fold", "model", "reasoning_state", "family"], columns="method", values="crps")
    both = both.dropna()
    if both.empty:
        return pd.DataFrame(columns=["family", "n_cells", f"crps_{method}", f"crps_{reference}", "skill"])
    per = both.groupby(level="family").agg(["mean", "size"])
    out = pd.DataFrame({
        "family": per.index,
        "n_cells": per[(method, "size")].to_numpy(int),
        f"crps_{method}": per[(method, "mean")].to_numpy(),
        f"crps_{reference}": per[(reference, "mean")].to_numpy(),
    })
    out["skill"] = 1 - out[f"crps_{method}"] / out[f"crps_{reference}"]
    return out[out["n_cells"] >= min_cells].reset_index(drop=True)


def rank_agreement(predicted: np.ndarray, observed: np.ndarray) -> dict:
    """Leaderboard agreement on one held-out family: Spearman rho, and RMSE/MAE after standardising both
    vectors within the shared panel (000 section 8: an unseen family has no fitted scale of its own)."""
    p, o = np.asarray(predicted, float), np.asarray(observed, float)
    z = lambda v: (v - v.mean()) / v.std() if v.std() > 0 else np.zeros_like(v)  # noqa: E731
    d = z(p) - z(o)
    return {"n_models": int(len(p)), "spearman": float(spearmanr(p, o).statistic) if len(p) > 2 else np.nan,
            "rmse_std": float(np.sqrt(np.mean(d ** 2))), "mae_std": float(np.mean(np.abs(d)))}
