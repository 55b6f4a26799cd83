"""Hand-written results laid out as the DuckDB tables the dating rule reads (modeled_observations and the raw_scores
rows behind them), and their dated rows (outputs/result_dates.py)."""

from __future__ import annotations

import duckdb
import pandas as pd

from atlas_assets.outputs.result_dates import result_dates


def observation_tables(conn: duckdb.DuckDBPyConnection, results: list[dict]) -> None:
    """Each result: model, reasoning_state, family, kind, u, released_on, and evaluated_on (a date, None, or a list:
    one raw row per entry). Creates modeled_observations and raw_scores on `conn`."""
    observations, raw = [], []
    for i, result in enumerate(results):
        evaluated = result.get("evaluated_on")
        dates = evaluated if isinstance(evaluated, list) else [evaluated]
        keys = [f"r{i}_{k}" for k in range(len(dates))]
        raw += [{"row_key": key, "evaluated_on": None if pd.isna(d) else pd.Timestamp(d)} for key, d in zip(keys, dates)]
        released = result.get("released_on")
        observations.append({"model": result["model"], "reasoning_state": result.get("reasoning_state", "default"),
                             "family": result["family"], "kind": result.get("kind", "bounded"),
                             "u": float(result.get("u", 0.5)),
                             "released_on": None if pd.isna(released) else pd.Timestamp(released), "row_keys": keys})
    conn.register("observations_frame", pd.DataFrame(observations))
    conn.register("raw_frame", pd.DataFrame(raw, columns=["row_key", "evaluated_on"]))
    conn.execute("CREATE OR REPLACE TABLE modeled_observations AS SELECT model, reasoning_state, family, kind, u, "
                 "CAST(released_on AS DATE) AS released_on, CAST(row_keys AS VARCHAR[]) AS row_keys "
                 "FROM observations_frame")
    conn.execute("CREATE OR REPLACE TABLE raw_scores AS SELECT row_key, CAST(evaluated_on AS DATE) AS evaluated_on "
                 "FROM raw_frame")
    conn.unregister("observations_frame")
    conn.unregister("raw_frame")


def dated(results: list[dict], window_days: int = 365) -> pd.DataFrame:
    """The result_dates rows of `results` (an in-memory DuckDB)."""
    with duckdb.connect() as conn:
        observation_tables(conn, results)
        return result_dates(conn, window_days)
