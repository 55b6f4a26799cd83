"""The active panel (outputs/sql/active_panel.sql) on constructed tables, the one dating rule and window it shares
with family_quality's live pool (outputs/sql/result_dates.sql), and the validation folds built on it."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

from atlas_assets.outputs.active_panel import active_panel
from atlas_assets.outputs.config import load_outputs_config
from atlas_assets.outputs.family_quality import family_quality
from atlas_assets.outputs.result_dates import result_dates, window_days
from atlas_assets.validation.splits import fold_keys, make_split
from tests.outputs.dated import observation_tables


# family "fresh": one result dated by its own evaluation 2026-07-01 (the snapshot's newest);
# "old": one result with two raw rows in 2024, dated by the newer; "release_dated": no own date, its model released
# 2026-01-10; "mixed": an old own date on one result and none on another whose model is new (the release dates it);
# "undated": neither date known (never recent, and it does not move the snapshot date)
RESULTS = [
    {"model": "a", "family": "fresh", "released_on": "2025-01-01", "evaluated_on": "2026-07-01", "u": 0.9},
    {"model": "b", "family": "old", "released_on": "2024-01-01", "evaluated_on": ["2024-03-01", "2024-05-01"],
     "u": 0.8},
    {"model": "a", "family": "release_dated", "released_on": "2026-01-10", "evaluated_on": None, "u": 0.7},
    {"model": "c", "family": "mixed", "released_on": "2023-01-01", "evaluated_on": "2023-06-01", "u": 0.6},
    {"model": "b", "family": "mixed", "released_on": "2025-09-01", "evaluated_on": None, "u": 0.5},
    {"model": "d", "family": "undated", "released_on": None, "evaluated_on": None, "u": 0.4},
]


def panel_tables(conn):
    observation_tables(conn, RESULTS)


def test_a_family_is_active_by_its_results_own_dates_else_the_models_release():
    conn = duckdb.connect()
    panel_tables(conn)
    table = active_panel(conn, 365).set_index("family")
    assert str(table.loc["fresh", "as_of"])[:10] == "2026-07-01"  # the data's newest result, not the clock
    assert table["active"].to_dict() == {"fresh": True, "mixed": True, "old": False, "release_dated": True,
                                         "undated": False}
    assert table.loc["undated", "reason"] == "no dated result"
    assert table.loc["old", "last_result_on"] == pd.Timestamp("2024-05-01")
    assert "more than 365 days before 2026-07-01" in table.loc["old", "reason"]
    assert (table.loc["release_dated", "n_dated_by_release"], table.loc["mixed", "n_dated_by_result"]) == (1, 1)
    # a shorter window: the family dated by a 2026-01 release drops out too
    assert active_panel(conn, 120).set_index("family")["active"].to_dict() == {
        "fresh": True, "mixed": False, "old": False, "release_dated": False, "undated": False}


def _both_readers(conn, outputs_cfg):
    """The active panel and family_quality's dating columns per family, both from the configured window."""
    window = window_days(outputs_cfg)
    panel = active_panel(conn, window).set_index("family")
    families = sorted(panel.index)
    registry = pd.DataFrame({"benchmark": families, "family": families, "role": "primary", "contamination": "static",
                             "items": 500, "category": "math"})
    grades = pd.DataFrame({"family": families, "grade": "B", "reliability_mean": 0.8, "reliability_lower": 0.7,
                           "reliability_upper": 0.9, "n_models": 10})
    quality = family_quality(result_dates(conn, window), registry, grades, outputs_cfg["family_quality"])
    return panel, quality.set_index("family"), window


@pytest.mark.parametrize("window", [None, 120])
def test_the_active_panel_and_the_live_pool_date_every_result_alike(window):
    """One dating rule and one window (outputs.yaml result_dates) for both readers: the same newest result per family,
    the same split into evaluation-dated, release-dated and undated results, the same snapshot date and window
    start, and a family is active exactly when its live pool has a result. The shipped window, then another one
    set through the config: both readers move together."""
    conn = duckdb.connect()
    panel_tables(conn)
    cfg = load_outputs_config(overrides={"result_dates": {"window_days": window}} if window else None)
    panel, quality, days = _both_readers(conn, cfg)
    assert days == (window or 365)
    newest = quality["newest_result"].map(lambda d: pd.Timestamp(d) if d is not None else pd.NaT)
    assert newest.equals(panel["last_result_on"].rename("newest_result").astype(newest.dtype)), (newest, panel)
    assert (panel["n_obs"] == quality["n_observations"]).all()
    assert (panel["n_dated_by_result"] == quality["n_dated_by_evaluation"]).all()
    assert (panel["n_dated_by_release"] == quality["n_dated_by_release"]).all()
    assert (panel["n_undated"] == quality["n_undated"]).all() and quality.loc["undated", "n_undated"] == 1
    assert (panel["active"] == (quality["n_live_observations"] > 0)).all()
    # the reference date is the data's newest result (the undated one does not move it), the window counts from it
    as_of = pd.Timestamp("2026-07-01")
    assert set(panel["as_of"]) == {as_of} and set(quality["snapshot_date"]) == {as_of.date()}
    assert set(quality["live_from"]) == {(as_of - pd.Timedelta(days=days)).date()}
    assert set(panel["window_days"]) == {days} and f"within {days} days" in quality["rule"].iloc[0]
    # "mixed" is active through the result its model's 2025-09-01 release dates: inside 365 days, outside 120
    assert panel.loc["mixed", "active"] == (days == 365)


def test_active_folds_drop_inactive_families_and_forward_active_hides_the_forward_cells():
    rng = np.random.default_rng(0)
    models = [f"m{i}" for i in range(20)]
    rows = [(m, "default", f, rng.uniform(), pd.Timestamp("2024-01-01") + pd.Timedelta(days=30 * i))
            for i, m in enumerate(models) for f in ("f1", "f2", "f3", "f4")]
    obs = pd.DataFrame(rows, columns=["model", "reasoning_state", "family", "u", "released_on"])
    cfg = {"seed": 1, "forward": {"newest_share": 0.25, "hide_share": 0.5}, "masked": {"folds": 2},
           "family": {"folds": 2}, "sensitivity": {"families": 1}, "active_panel": {"studies": True}}
    assert fold_keys(cfg)[-2:] == ["active_panel", "forward_active"]
    with pytest.raises(ValueError, match="need the active families"):
        make_split("active_panel", obs, cfg, [("m0", "default")])
    cfg["active_panel"]["families"] = ["f1", "f2", "f3"]
    panel = make_split("active_panel", obs, cfg, [("m0", "default")])
    assert not panel.heldout.any() and (panel.dropped == (obs["family"] == "f4").to_numpy()).all()
    forward = make_split("forward", obs, cfg, [("m0", "default")])
    forward_active = make_split("forward_active", obs, cfg, [("m0", "default")])
    assert (forward_active.heldout == (forward.heldout & (obs["family"] != "f4").to_numpy())).all()
    assert forward_active.heldout.any() and not (forward_active.heldout & forward_active.dropped).any()
