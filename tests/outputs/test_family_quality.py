"""Measured family quality on a constructed pool whose headroom, spread and weights are known by hand; the live
window, one entry per model, the thin-pool and rating cases; agreement with reliability; the check's rules."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlas_assets.defs.outputs.quality_checks import family_quality_problems
from atlas_assets.outputs.config import load_outputs_config
from atlas_assets.outputs.family_quality import agreement, family_quality, live_pool
from tests.outputs.dated import dated as result_dates

CFG = load_outputs_config()["family_quality"]


def _rows(family, scores, *, kind="bounded", evaluated="2026-06-01", released="2025-01-01", state="default",
          prefix="m"):
    return [{"model": f"{prefix}{i}", "reasoning_state": state, "family": family, "kind": kind, "u": u,
             "evaluated_on": evaluated, "released_on": released} for i, u in enumerate(scores)]


FRONTIER = [0.95, 0.90, 0.85, 0.80, 0.75, 0.70, 0.65, 0.60]


@pytest.fixture(scope="module")
def world():
    rows = (
        _rows("hard", FRONTIER)
        + _rows("hard", [0.10], state="low")                                       # m0's weaker state: not its best
        + _rows("hard", [0.99], prefix="old", evaluated="2024-01-01")              # outside the 365-day window
        + _rows("hard", [0.98], prefix="undated", evaluated=None, released=None)   # no date: not live
        + _rows("hard", [0.97], prefix="released", evaluated=None, released="2026-05-01")  # dated by release: live
        + _rows("thin", [0.5, 0.4, 0.3])
        + _rows("arena", [1.2, 0.3, -0.4, -1.0, 0.1, 0.8], kind="rating")
        + _rows("nosize", FRONTIER)
    )
    dated = result_dates(rows)
    registry = pd.DataFrame({
        "benchmark": ["hard", "hard_sub", "thin", "arena", "nosize"], "family": ["hard", "hard", "thin", "arena", "nosize"],
        "role": ["primary", "component", "primary", "primary", "primary"],
        "contamination": ["private", "static", "static", "live", "static"], "items": [120, 40, 30, None, None],
        "category": ["math"] * 5})
    grades = pd.DataFrame({"family": ["hard", "thin", "arena", "nosize"], "grade": ["B", None, "D", "A"],
                           "reliability_mean": [0.8, 0.5, 0.4, 0.9], "reliability_lower": [0.7, 0.3, 0.2, 0.85],
                           "reliability_upper": [0.9, 0.7, 0.6, 0.95], "n_models": [12, 3, 6, 8]})
    return dated, family_quality(dated, registry, grades, CFG).set_index("family")


def test_result_dates_and_the_live_window(world):
    dated, _ = world
    pool, snapshot, start = live_pool(dated)
    assert snapshot == pd.Timestamp("2026-06-01") and start == pd.Timestamp("2025-06-01")
    hard = pool[pool["family"] == "hard"].set_index("model")
    assert "old0" not in hard.index and "undated0" not in hard.index and "released0" in hard.index
    assert hard.loc["m0", "u"] == 0.95  # one entry per model: its best live state
    by = dated.set_index(["model", "reasoning_state", "family"])["dated_by"]
    assert (by[("released0", "default", "hard")], by[("undated0", "default", "hard")],
            by[("m0", "low", "hard")]) == ("release", "undated", "evaluated")


def test_headroom_discrimination_and_weights_by_hand(world):
    _, q = world
    hard = q.loc["hard"]
    live = sorted(FRONTIER + [0.97], reverse=True)                 # 9 live models
    assert hard["n_live_models"] == 9 and hard["n_observations"] == 12 and hard["n_undated"] == 1
    assert hard["headroom_points"] == pytest.approx(100 * (1 - np.median(live[:5])))     # 1 - 0.90 -> 10 points
    assert hard["discrimination_points"] == pytest.approx(100 * np.std(live, ddof=1))    # fewer than 15: all of them
    assert hard["headroom_points"] == pytest.approx(10.0) and hard["headroom_weight"] == pytest.approx(10 / 30)
    assert hard["discrimination_weight"] == 1.0                                           # sd > 3 points
    # the primary benchmark's registry entry, not the component's
    assert (hard["contamination"], hard["contamination_weight"], hard["items"], hard["size_weight"]) == \
        ("private", 0.9, 120, 0.85)
    assert hard["quality"] == pytest.approx(10 / 30 * 1.0 * 0.9 * 0.85)
    assert hard["quality_band"] == "low" and hard["grade"] == "B" and hard["top_scores"] == "97.0, 95.0, 90.0, 85.0, 80.0"


def test_what_is_not_measured_says_why(world):
    _, q = world
    assert np.isnan(q.loc["thin", "headroom_points"]) and q.loc["thin", "pool_note"] == "3 live models < 5"
    assert np.isnan(q.loc["thin", "quality"]) and q.loc["thin", "quality_missing"] == "headroom, discrimination"
    assert q.loc["arena", "pool_note"] == "rating family: no ceiling and no points scale"
    assert q.loc["arena", "contamination_weight"] == 1.0 and np.isnan(q.loc["arena", "quality"])
    # a declared size is needed: no item count, no quality (nothing invented)
    assert np.isfinite(q.loc["nosize", "headroom_points"]) and q.loc["nosize", "quality_missing"] == "size"
    assert q.loc["nosize", "quality_band"] == "not measured"


def test_weights_are_clipped_to_their_floors():
    saturated = _rows("sat", [0.995, 0.994, 0.994, 0.993, 0.993, 0.992])
    dated = result_dates(saturated)
    registry = pd.DataFrame({"benchmark": ["sat"], "family": ["sat"], "role": ["primary"], "contamination": ["static"],
                             "items": [1000], "category": ["math"]})
    grades = pd.DataFrame({"family": ["sat"], "grade": ["A"], "reliability_mean": [0.95], "reliability_lower": [0.9],
                           "reliability_upper": [0.97], "n_models": [6]})
    row = family_quality(dated, registry, grades, CFG).iloc[0]
    assert row["headroom_weight"] == CFG["headroom_floor"] and row["discrimination_weight"] == CFG["discrimination_floor"]
    assert row["quality"] == pytest.approx(0.15 * 0.3 * 0.7 * 1.0) and row["quality_band"] == "low"


def test_agreement_rank_correlation_and_crosstab():
    table = pd.DataFrame({"family": list("abcdef"), "quality": [0.1, 0.2, 0.4, 0.5, 0.8, np.nan],
                          "reliability_mean": [0.5, 0.6, 0.7, 0.8, 0.95, 0.9],
                          "headroom_weight": [1.0, 0.8, 0.6, 0.4, 0.2, 0.5],
                          "discrimination_weight": 1.0, "contamination_weight": 0.7, "size_weight": 1.0,
                          "headroom_points": [30, 24, 18, 12, 6, 15], "discrimination_points": 4.0,
                          "grade": ["D", "C", "C", "B", "A", None],
                          "quality_band": ["low", "low", "medium", "medium", "high", "not measured"]})
    agree = agreement(table)
    rho = agree[agree["statistic"] == "spearman_vs_reliability"].set_index("measure")
    assert rho.loc["quality", "value"] == pytest.approx(1.0) and rho.loc["quality", "n_families"] == 5
    assert rho.loc["headroom_weight", "value"] == pytest.approx(-1.0 + 0.1, abs=0.11)  # f's 0.9 breaks perfect order
    assert np.isnan(rho.loc["size_weight", "value"])  # constant: no rank correlation
    cross = agree[agree["statistic"] == "crosstab"].set_index(["grade", "band"])["n_families"]
    assert cross[("C", "low")] == 1 and cross[("C", "medium")] == 1 and cross[("ungraded", "not measured")] == 1
    assert cross.sum() == len(table)


def test_the_check_catches_a_quality_that_is_not_the_product(world):
    _, q = world
    table = q.reset_index().assign(fit="f")
    assert family_quality_problems(table, list(table["family"]), CFG) == []
    broken = table.copy()
    broken.loc[broken["family"] == "hard", "quality"] = 0.9
    assert any("not the product" in p and "hard" in p for p in family_quality_problems(broken, list(table["family"]), CFG))
    measured_thin = table.copy()
    measured_thin.loc[measured_thin["family"] == "thin", "headroom_points"] = 40.0
    assert any("fewer than 5 live models" in p for p in family_quality_problems(measured_thin, list(table["family"]), CFG))
    assert any("rows for" in p for p in family_quality_problems(table, list(table["family"]) + ["extra"], CFG))
