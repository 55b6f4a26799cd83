"""Publishing several tables is all or nothing."""

import duckdb
import pandas as pd
import pytest

from atlas_assets.storage import replace_tables


def test_a_failure_part_way_leaves_every_table_as_it_was(tmp_path):
    conn = duckdb.connect(str(tmp_path / "atlas.duckdb"))
    replace_tables(conn, {"state_scores": pd.DataFrame({"x": [1.0]}), "model_scores": pd.DataFrame({"y": [2.0]})})
    with pytest.raises(duckdb.Error):
        replace_tables(conn, {"state_scores": pd.DataFrame({"x": [9.0]}), "model scores; --": pd.DataFrame({"y": [9.0]})})
    assert conn.execute("SELECT x FROM state_scores").fetchall() == [(1.0,)]
    assert conn.execute("SELECT y FROM model_scores").fetchall() == [(2.0,)]


def test_replace_partition_touches_only_its_slice_and_adds_new_columns(tmp_path):
    import duckdb
    import pandas as pd

    from atlas_assets.storage import replace_partition

    conn = duckdb.connect(str(tmp_path / "t.duckdb"))
    replace_partition(conn, {"t": pd.DataFrame({"fold": ["a", "a"], "x": [1, 2]})}, "fold", "a")
    replace_partition(conn, {"t": pd.DataFrame({"fold": ["b"], "x": [3]})}, "fold", "b")
    replace_partition(conn, {"t": pd.DataFrame({"fold": ["a"], "x": [9], "extra": ["new"]})}, "fold", "a")
    rows = conn.execute("SELECT fold, x, extra FROM t ORDER BY fold").fetchall()
    assert rows == [("a", 9, "new"), ("b", 3, None)]
    # an empty frame clears its slice; a row outside the slice is refused and nothing changes
    replace_partition(conn, {"t": pd.DataFrame(columns=["fold", "x"])}, "fold", "b")
    assert conn.execute("SELECT fold FROM t").fetchall() == [("a",)]
    try:
        replace_partition(conn, {"t": pd.DataFrame({"fold": ["c"], "x": [1]})}, "fold", "a")
    except ValueError as refusal:
        assert "outside the slice" in str(refusal)
    else:
        raise AssertionError("a row outside the slice was written")
    assert conn.execute("SELECT fold, x FROM t").fetchall() == [("a", 9)]
