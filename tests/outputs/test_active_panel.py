"""The active panel (outputs/sql/active_panel.sql) on constructed tables, and the validation folds built on it."""

from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import pandas as pd
import pytest

from atlas_assets.outputs.active_panel import active_panel
from atlas_assets.validation.splits import fold_keys, make_split


def panel_tables(conn):
    # family "fresh": one result dated by its own evaluation 2026-07-01 (the snapshot's newest);
    # "old": results 2024, dated by evaluation; "release_dated": no own dates, its model released 2026-01-10;
    # "mixed": an old own date on one row and none on another whose model is new (the release dates that row)
    observations = pd.DataFrame({
        "model": ["a", "b", "a", "c", "b"], "reasoning_state": "default",
        "family": ["fresh", "old", "release_dated", "mixed", "mixed"],
        "released_on": [dt.date(2025, 1, 1), dt.date(2024, 1, 1), dt.date(2026, 1, 10), dt.date(2023, 1, 1),
                        dt.date(2025, 9, 1)],
        "row_keys": [["r1"], ["r2", "r3"], ["r4"], ["r5"], ["r6"]],
    })
    raw = pd.DataFrame({"row_key": ["r1", "r2", "r3", "r4", "r5", "r6"],
                        "evaluated_on": [dt.date(2026, 7, 1), dt.date(2024, 3, 1), dt.date(2024, 5, 1), None,
                                         dt.date(2023, 6, 1), None]})
    conn.register("o", observations)
    conn.register("r", raw)
    conn.execute("CREATE TABLE modeled_observations AS SELECT * FROM o")
    conn.execute("CREATE TABLE raw_scores AS SELECT row_key, CAST(evaluated_on AS DATE) AS evaluated_on FROM r")


def test_a_family_is_active_by_its_results_own_dates_else_the_models_release():
    conn = duckdb.connect()
    panel_tables(conn)
    table = active_panel(conn, 365).set_index("family")
    assert str(table.loc["fresh", "as_of"])[:10] == "2026-07-01"  # the data's newest result, not the clock
    assert table["active"].to_dict() == {"fresh": True, "mixed": True, "old": False, "release_dated": True}
    assert table.loc["old", "last_result_on"] == pd.Timestamp("2024-05-01")
    assert "more than 365 days before 2026-07-01" in table.loc["old", "reason"]
    assert (table.loc["release_dated", "n_dated_by_release"], table.loc["mixed", "n_dated_by_result"]) == (1, 1)
    # a shorter window: the family dated by a 2026-01 release drops out too
    assert active_panel(conn, 120).set_index("family")["active"].to_dict() == {
        "fresh": True, "mixed": False, "old": False, "release_dated": False}


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
