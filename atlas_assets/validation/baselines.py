"""The simple baselines every held-out cell is also predicted by, from the same training cells as the refit.

- family_mean: the family's average training score; its predictive ensemble is the family's
  own training scores (the spread a user sees on that leaderboard).
- model_offset: seed 003's "average standardised score": each state's mean z-score over its
  training families, mapped back onto the family by its training mean and sd (a straight
  line); the ensemble adds that family's training residuals of the same rule, resampled.
  Bounded predictions are clipped to [0, 1].
Both are NaN for a cell whose family (or, for model_offset, state) has no training cell.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

STATE = ["model", "reasoning_state"]


def _family_stats(train: pd.DataFrame) -> pd.DataFrame:
    stats = train.groupby("family")["u"].agg(mean="mean", sd="std", n="size")
    stats["sd"] = stats["sd"].fillna(0.0).where(stats["sd"] > 1e-9, np.nan)
    return stats


def standardized_offsets(train: pd.DataFrame) -> pd.Series:
    """Mean z-score per state (index model, reasoning_state) over its training families."""
    stats = _family_stats(train)
    z = (train["u"] - train["family"].map(stats["mean"])) / train["family"].map(stats["sd"])
    return z.groupby([train["model"], train["reasoning_state"]]).mean().dropna()


def _clip(values: np.ndarray, bounded: np.ndarray) -> np.ndarray:
    return np.where(bounded, np.clip(values, 0.0, 1.0), values)


def family_mean_ensemble(train: pd.DataFrame, heldout: pd.DataFrame, rng: np.random.Generator,
                         size: int) -> np.ndarray:
    """(size, cells): draws of each held-out cell's family's training scores."""
    out = np.full((size, len(heldout)), np.nan)
    scores = {family: rows["u"].to_numpy(float) for family, rows in train.groupby("family")}
    for i, family in enumerate(heldout["family"]):
        if family in scores:
            out[:, i] = rng.choice(scores[family], size=size, replace=True)
    return out


def model_offset_ensemble(train: pd.DataFrame, heldout: pd.DataFrame, rng: np.random.Generator,
                          size: int) -> np.ndarray:
    """(size, cells): family mean + sd x the state's mean z-score, plus a resampled training residual."""
    stats = _family_stats(train)
    offsets = standardized_offsets(train)
    fit_train = train["family"].map(stats["mean"]) + train["family"].map(stats["sd"]).fillna(0) * pd.Series(
        [offsets.get((m, r), np.nan) for m, r in zip(train["model"], train["reasoning_state"])], index=train.index)
    residuals = (train["u"] - fit_train).groupby(train["family"]).apply(lambda r: r.dropna().to_numpy(float))
    out = np.full((size, len(heldout)), np.nan)
    for i, (model, state, family, kind) in enumerate(heldout[["model", "reasoning_state", "family", "kind"]]
                                                    .itertuples(index=False)):
        if family not in stats.index or (model, state) not in offsets.index:
            continue
        sd = stats.at[family, "sd"]
        point = stats.at[family, "mean"] + (0.0 if np.isnan(sd) else sd * offsets[(model, state)])
        res = residuals.get(family)
        noise = rng.choice(res, size=size) if res is not None and len(res) else np.zeros(size)
        out[:, i] = _clip(point + noise, np.full(size, kind == "bounded"))
    return out


def mean_standardized_capability(train: pd.DataFrame) -> pd.Series:
    """The whole-family baseline's ranking: each state's mean standardised score over the kept families."""
    return standardized_offsets(train)
