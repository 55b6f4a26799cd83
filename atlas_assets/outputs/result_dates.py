"""When a result was obtained, and whether it is recent: one rule for every reader (issue 12).

The rule is the table macro of outputs/sql/result_dates.sql (a result's own evaluation date, else its model's
release date; the snapshot date is the data's newest result; recent = within the window of it). The window is one
setting, outputs.yaml `result_dates.window_days`. The active panel (active_panel.sql: a family is active with a
recent result) and family_quality's live pool (a family's recent results) both read it, so they cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import duckdb
import pandas as pd

SQL = Path(__file__).resolve().parent / "sql" / "result_dates.sql"


def window_days(outputs_cfg: Mapping[str, Any]) -> int:
    """The one configured window (outputs.yaml `result_dates.window_days`)."""
    return int(outputs_cfg["result_dates"]["window_days"])


def define_result_dates(conn: duckdb.DuckDBPyConnection) -> None:
    """Create the temporary macro `result_dates(window_days)` on this connection (it reads modeled_observations and
    raw_scores when called)."""
    conn.execute(SQL.read_text())


def result_dates(conn: duckdb.DuckDBPyConnection, window: int) -> pd.DataFrame:
    """One row per modeled observation: kind, u, evaluated_on, released_on, result_date, dated_by, as_of,
    window_days, window_start, recent."""
    define_result_dates(conn)
    return conn.execute("SELECT * FROM result_dates(?)", [int(window)]).df()
