"""The active panel (issue 12, seed 004 §04): which benchmark families new models are still tested on.

`active_panel(conn, window_days)` runs outputs/sql/active_panel.sql on the run's DuckDB tables (modeled
observations, and raw_scores for each result's own date) through the result_dates macro (outputs/result_dates.py:
the dating rule family_quality's live pool shares): one row per family with its newest result date, how its
results were dated, whether it is active and why. The validation studies `active_panel` (the production
specification refitted on the active families only: the active-panel variant of every score) and
`forward_active` (the forward study on the active panel) read the active families from this table.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd

from atlas_assets.outputs.result_dates import define_result_dates

SQL = Path(__file__).resolve().parent / "sql" / "active_panel.sql"


def active_panel(conn: duckdb.DuckDBPyConnection, window_days: int) -> pd.DataFrame:
    define_result_dates(conn)
    return conn.execute(SQL.read_text(), {"window_days": int(window_days)}).df()
