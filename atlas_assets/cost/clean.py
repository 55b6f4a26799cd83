"""Run sql/08_cost_observations.sql: raw_costs -> cost_observations (+ audit_cost_exclusions).

The stage's configuration (config/cost.yaml `observations`) reaches the SQL as one DuckDB variable
(`cost_same_run_relative_tolerance`) and two small tables written here first: `cost_config_evaluators`
and `cost_config_agent_files` (pattern, value, priority = position in the file; first match wins).
`CostStageCounts.conserved` is the stage's conservation identity: raw_costs rows = kept + excluded.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import duckdb
import pandas as pd

from atlas_assets.settings import SQL_DIR

COST_SQL = SQL_DIR / "08_cost_observations.sql"


@dataclass
class CostStageCounts:
    rows_in: int
    rows_kept: int
    rows_excluded: int
    excluded_by_reason: dict[str, int] = field(default_factory=dict)
    runs: int = 0
    states: int = 0
    models: int = 0
    benchmarks: int = 0
    harnessed_rows: int = 0
    rows_per_source: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def conserved(self) -> bool:
        return self.rows_in == self.rows_kept + self.rows_excluded

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "conserved": self.conserved}


def write_config_tables(conn: duckdb.DuckDBPyConnection, observations: Mapping[str, Any]) -> None:
    evaluators = pd.DataFrame(
        [(e["pattern"], e["evaluator"], i) for i, e in enumerate(observations["evaluators"])],
        columns=["pattern", "evaluator", "priority"])
    agents = pd.DataFrame(
        [(a["pattern"], a["standard_harness"], i) for i, a in enumerate(observations["agent_files"])],
        columns=["pattern", "standard_harness", "priority"])
    for name, frame in (("cost_config_evaluators", evaluators), ("cost_config_agent_files", agents)):
        conn.register("incoming_frame", frame.astype({"priority": "int64"}))
        conn.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM incoming_frame")
        conn.unregister("incoming_frame")
    conn.execute("SET VARIABLE cost_same_run_relative_tolerance = ?",
                 [float(observations["same_run_relative_tolerance"])])


def run_cost_stage(conn: duckdb.DuckDBPyConnection, cfg: Mapping[str, Any]) -> CostStageCounts:
    """Run the stage (raw_costs, registry_model_ids and registry_benchmarks must exist) and count it."""
    write_config_tables(conn, cfg["observations"])
    started = time.perf_counter()
    conn.execute(COST_SQL.read_text())
    seconds = time.perf_counter() - started
    one = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    return CostStageCounts(
        rows_in=int(one("SELECT count(*) FROM raw_costs")),
        rows_kept=int(one("SELECT count(*) FROM cost_observations")),
        rows_excluded=int(one("SELECT count(*) FROM audit_cost_exclusions")),
        excluded_by_reason=dict(conn.execute(
            "SELECT reason, count(*) FROM audit_cost_exclusions GROUP BY 1 ORDER BY 1").fetchall()),
        runs=int(one("SELECT count(DISTINCT run_id) FROM cost_observations")),
        states=int(one("SELECT count(DISTINCT (model, reasoning_state)) FROM cost_observations")),
        models=int(one("SELECT count(DISTINCT model) FROM cost_observations")),
        benchmarks=int(one("SELECT count(DISTINCT benchmark) FROM cost_observations")),
        harnessed_rows=int(one("SELECT count(*) FILTER (WHERE harnessed) FROM cost_observations")),
        rows_per_source=dict(conn.execute(
            "SELECT source || '/' || file, count(*) FROM cost_observations GROUP BY 1 ORDER BY 1").fetchall()),
        seconds=seconds,
    )
