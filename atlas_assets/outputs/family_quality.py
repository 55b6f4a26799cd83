"""Measured benchmark quality per family (seed 002), beside the model-based reliability grade (seed 003).

Four properties, each published with the numbers it was computed from:

- headroom: 100 x (1 - median of the top `top_headroom` live scores), in points of the declared range;
  weight = headroom / headroom_full_points, clipped to [headroom_floor, 1]. A frontier at 98% is saturated.
- discrimination: standard deviation (ddof 1) of the top `top_discrimination` live scores, in points;
  weight = sd / discrimination_full_points, clipped to [discrimination_floor, 1]. Does it separate the frontier?
- contamination resistance: the registry's class of the family's primary benchmark (live / private / static)
  and its configured weight.
- size: the declared item count of the primary benchmark; weight from `size_weights` (below 50 items 0.7,
  below 150 0.85, else 1). No declared count: no weight (nothing invented).

quality = the product of the four weights, published only when all four exist (`quality_missing` says which
did not). Headroom and discrimination need a ceiling and a points scale: rating families (Elo, standardised
in the fit) get neither.

The live pool: the fit's modeled observations that are recent by the one dating rule the active panel shares
(outputs/result_dates.py, outputs/sql/result_dates.sql: dated by the newest evaluation date of its raw rows, else
by its model's release date; recent = within outputs.yaml `result_dates.window_days` of the snapshot date, the
newest result date in the fit's data); undated results are not live; each model enters once, with its best live
state's score. Fewer than `min_live_models` live models (outputs.yaml `family_quality`): headroom and
discrimination are not measured for that family.

Agreement with the reliability grade: Spearman's rank correlation between each weight (and quality) and the
posterior-mean reliability over the families that have both, with its p-value, and a cross-tab of grade by
quality band.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

GRADE_ORDER = ("A", "B", "C", "D", "ungraded")


def live_pool(dated: pd.DataFrame) -> tuple[pd.DataFrame, pd.Timestamp, pd.Timestamp]:
    """(one row per family x model: its best live score, snapshot date, window start). `dated`: the result_dates
    macro's rows (outputs/result_dates.py), which say what is recent; nothing is re-dated here."""
    snapshot, start = pd.Timestamp(dated["as_of"].iloc[0]), pd.Timestamp(dated["window_start"].iloc[0])
    live = dated[dated["recent"].astype(bool)]
    best = live.sort_values("u", ascending=False, kind="mergesort").drop_duplicates(["family", "model"])
    return best.reset_index(drop=True), snapshot, start


def _clip(value: float, floor: float) -> float:
    return float(min(1.0, max(floor, value))) if np.isfinite(value) else float("nan")


def size_weight(items: float, steps: list[list[float]]) -> float:
    if not np.isfinite(items):
        return float("nan")
    for limit, weight in steps:
        if items < limit:
            return float(weight)
    return 1.0


def primary_registry(registry: pd.DataFrame) -> pd.DataFrame:
    """family -> its primary benchmark's contamination class, item count and category (first primary by name; a
    family made of components only takes its first component's)."""
    order = {"primary": 0, "component": 1}
    usable = registry[registry["role"].isin(order)].assign(_order=lambda f: f["role"].map(order))
    primary = usable.sort_values(["_order", "benchmark"], kind="mergesort")
    return primary.drop_duplicates("family")[["family", "benchmark", "contamination", "items", "category"]] \
        .rename(columns={"benchmark": "registry_benchmark"})


def family_quality(dated: pd.DataFrame, registry: pd.DataFrame, grades: pd.DataFrame,
                   cfg: Mapping[str, Any]) -> pd.DataFrame:
    """One row per family of `grades` (the fitted families): the four measures, their inputs and weights, quality,
    and the reliability grade beside them. `dated`: outputs/result_dates.py's rows of the fit's observations."""
    pool, snapshot, start = live_pool(dated)
    reg = primary_registry(registry).set_index("family")
    n_top, n_spread, min_live = int(cfg["top_headroom"]), int(cfg["top_discrimination"]), int(cfg["min_live_models"])
    rows = []
    for g in grades.itertuples():
        family = g.family
        mine = dated[dated["family"] == family]
        scores = np.sort(pool.loc[pool["family"] == family, "u"].to_numpy(dtype=float))[::-1]
        kind = str(mine["kind"].iloc[0]) if len(mine) else str(getattr(g, "kind", ""))
        row: dict[str, Any] = {
            "family": family, "kind": kind, "n_observations": len(mine),
            "n_dated_by_evaluation": int((mine["dated_by"] == "evaluated").sum()),
            "n_dated_by_release": int((mine["dated_by"] == "release").sum()),
            "n_undated": int((mine["dated_by"] == "undated").sum()),
            "n_live_observations": int(mine["recent"].astype(bool).sum()),
            "n_live_models": len(scores), "snapshot_date": snapshot.date(), "live_from": start.date(),
            "newest_result": mine["result_date"].max().date() if mine["result_date"].notna().any() else None,
        }
        headroom = spread = float("nan")
        if kind != "bounded":
            why = f"{kind} family: no ceiling and no points scale"
        elif len(scores) < min_live:
            why = f"{len(scores)} live models < {min_live}"
        else:
            why = None
            top = scores[:n_top]
            headroom = 100.0 * (1.0 - float(np.median(top)))
            spread = 100.0 * float(np.std(scores[:n_spread], ddof=1))
            row["top_scores"] = ", ".join(f"{100 * s:.1f}" for s in top)
        row.update({"pool_note": why, "headroom_points": headroom, "n_top_discrimination": min(len(scores), n_spread),
                    "discrimination_points": spread,
                    "headroom_weight": _clip(headroom / float(cfg["headroom_full_points"]), float(cfg["headroom_floor"])),
                    "discrimination_weight": _clip(spread / float(cfg["discrimination_full_points"]),
                                                   float(cfg["discrimination_floor"]))})
        if family in reg.index:
            r = reg.loc[family]
            contamination, items = r["contamination"], float(r["items"]) if pd.notna(r["items"]) else float("nan")
            row.update({"registry_benchmark": r["registry_benchmark"], "category": r["category"]})
        else:
            contamination, items = None, float("nan")
            row.update({"registry_benchmark": None, "category": None})
        weights = dict(cfg["contamination_weights"])
        row.update({"contamination": contamination,
                    "contamination_weight": float(weights[contamination]) if contamination in weights else float("nan"),
                    "items": items, "size_weight": size_weight(items, cfg["size_weights"])})
        factors = {"headroom": row["headroom_weight"], "discrimination": row["discrimination_weight"],
                   "contamination": row["contamination_weight"], "size": row["size_weight"]}
        missing = [k for k, v in factors.items() if not np.isfinite(v)]
        row["quality"] = float(np.prod(list(factors.values()))) if not missing else float("nan")
        row["quality_missing"] = ", ".join(missing) or None
        row.update({"grade": g.grade if isinstance(g.grade, str) else None,
                    "reliability_mean": float(g.reliability_mean), "reliability_lower": float(g.reliability_lower),
                    "reliability_upper": float(g.reliability_upper), "n_models_fit": int(g.n_models)})
        rows.append(row)
    out = pd.DataFrame(rows)
    bands = cfg["quality_bands"]
    out["quality_band"] = np.where(out["quality"].isna(), "not measured",
                                   np.where(out["quality"] >= bands["high"], "high",
                                            np.where(out["quality"] >= bands["medium"], "medium", "low")))
    out["rule"] = rule_text(cfg, int(dated["window_days"].iloc[0]))
    return out


def rule_text(cfg: Mapping[str, Any], window_days: int) -> str:
    w = cfg["contamination_weights"]
    return (f"live pool: results dated (evaluation, else release date) within {window_days} days of the "
            f"newest result, best state per model, >= {cfg['min_live_models']} models; headroom = 100(1 - median top "
            f"{cfg['top_headroom']}), weight headroom/{cfg['headroom_full_points']:g} in [{cfg['headroom_floor']:g}, 1]; "
            f"discrimination = sd top {cfg['top_discrimination']}, weight sd/{cfg['discrimination_full_points']:g} in "
            f"[{cfg['discrimination_floor']:g}, 1]; contamination live {w['live']:g} / private {w['private']:g} / static "
            f"{w['static']:g}; size " + ", ".join(f"< {int(n)} items {v:g}" for n, v in cfg["size_weights"])
            + ", else 1; quality = product")


def agreement(quality: pd.DataFrame) -> pd.DataFrame:
    """Spearman of each weight and of quality against the reliability mean; a grade x quality-band cross-tab."""
    rows = []
    for measure in ("quality", "headroom_weight", "discrimination_weight", "contamination_weight", "size_weight",
                    "headroom_points", "discrimination_points"):
        both = quality[[measure, "reliability_mean"]].dropna()
        rho, p = (spearmanr(both[measure], both["reliability_mean"]) if len(both) >= 3 and both[measure].nunique() > 1
                  else (float("nan"), float("nan")))
        rows.append({"statistic": "spearman_vs_reliability", "measure": measure, "grade": None, "band": None,
                     "n_families": len(both), "value": float(rho), "p_value": float(p)})
    grades = quality["grade"].fillna("ungraded")
    for grade in GRADE_ORDER:
        for band in ("high", "medium", "low", "not measured"):
            rows.append({"statistic": "crosstab", "measure": "quality_band", "grade": grade, "band": band,
                         "n_families": int(((grades == grade) & (quality["quality_band"] == band)).sum()),
                         "value": float("nan"), "p_value": float("nan")})
    return pd.DataFrame(rows)
