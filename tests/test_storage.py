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
