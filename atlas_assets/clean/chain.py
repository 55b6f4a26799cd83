"""Runs the cleaning chain's SQL files against a DuckDB connection.

The same files are run by the Dagster assets (atlas_assets/defs/clean), the tests and
the benchmark (bench/bench_clean_chain.py):

    from atlas_assets.clean import CleaningConfig, run_chain, run_stage
    counts = run_chain(conn, CleaningConfig.load())          # all six stages, in order
    counts = run_stage(conn, "resolved_cells", config)        # one stage -> StageCounts

Thresholds are bound as DuckDB session variables (`SET VARIABLE name = ?`, a prepared
parameter, never string formatting) and read in SQL with `getvariable('name')`.
Each stage replaces its output table(s) and its own rows of `audit_exclusions`, so a
stage can be re-run on its own; `StageCounts.conserved` is the conservation identity
rows_in = rows_kept + rows_excluded, counted in the stage's input rows.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from atlas_assets.clean.config import CleaningConfig
from atlas_assets.settings import SQL_DIR

LEDGER_SQL = "07_audit_exclusions.sql"


@dataclass(frozen=True)
class Stage:
    name: str  # output table, also the Dagster asset key and the ledger's `stage`
    sql_file: str
    input_table: str
    grain: tuple[str, ...]  # unique key of the output table
    kept_expr: str  # how many input rows the output represents (SQL aggregate over the output)
    description: str


STAGES: tuple[Stage, ...] = (
    Stage(
        "oriented_scores", "01_oriented_scores.sql", "raw_scores", ("row_key",), "count(*)",
        "Declared higher/lower-is-better benchmarks only; lower-is-better reflected on the declared range.",
    ),
    Stage(
        "screened_scores", "02_screened_scores.sql", "oriented_scores", ("row_key",), "count(*)",
        "Sampling-class screen, half-floor guard, declared-range and bounds guards.",
    ),
    Stage(
        "resolved_cells", "03_resolved_cells.sql", "screened_scores", ("model_id", "harness", "benchmark"),
        "coalesce(sum(n_reports), 0)",
        "One row per configuration x benchmark: consensus, protocol tiebreak, majority, conflict.",
    ),
    Stage(
        "pooled_states", "04_pooled_states.sql", "resolved_cells", ("model", "reasoning_state", "benchmark"),
        "coalesce(sum(n_configs), 0)",
        "Harness configurations of one model, reasoning state and benchmark pooled to their median.",
    ),
    Stage(
        "family_observations", "05_family_observations.sql", "pooled_states", ("model", "reasoning_state", "family"),
        "coalesce(sum(n_components), 0)",
        "Scaled to the declared range (or standardized ratings); primary or averaged components per family.",
    ),
    Stage(
        "modeled_observations", "06_modeled_observations.sql", "family_observations",
        ("model", "reasoning_state", "family"), "count(*)",
        "Iterative coverage filter: what the capability model fits.",
    ),
)
STAGE_BY_NAME = {stage.name: stage for stage in STAGES}
STAGE_NAMES = tuple(stage.name for stage in STAGES)


@dataclass
class StageCounts:
    stage: str
    rows_in: int
    rows_out: int
    rows_kept: int
    rows_excluded: int
    excluded_by_reason: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def conserved(self) -> bool:
        return self.rows_in == self.rows_kept + self.rows_excluded

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["conserved"] = self.conserved
        return data


@functools.cache
def _sql_text(path: Path) -> str:
    return path.read_text()


def sql_path(file_name: str, sql_dir: Path | None = None) -> Path:
    return (sql_dir or SQL_DIR) / file_name


def bind_config(conn: duckdb.DuckDBPyConnection, config: CleaningConfig) -> None:
    """Bind every threshold as a session variable (prepared parameter, typed by its Python value)."""
    for name, value in config.variables().items():
        conn.execute(f"SET VARIABLE {name} = ?", [value])  # name is a dataclass field, value a parameter


def ensure_ledger(conn: duckdb.DuckDBPyConnection, sql_dir: Path | None = None) -> None:
    conn.execute(_sql_text(sql_path(LEDGER_SQL, sql_dir)))


def _scalar(conn: duckdb.DuckDBPyConnection, query: str, params: list[Any] | None = None) -> Any:
    row = conn.execute(query, params or []).fetchone()
    return row[0] if row else None


def stage_counts(conn: duckdb.DuckDBPyConnection, stage: Stage | str, seconds: float = 0.0) -> StageCounts:
    """Counts of a stage as it now stands in the database (rows in/out/kept/excluded, by reason)."""
    stage = STAGE_BY_NAME[stage] if isinstance(stage, str) else stage
    rows_in = _scalar(conn, f'SELECT count(*) FROM "{stage.input_table}"')
    rows_out = _scalar(conn, f'SELECT count(*) FROM "{stage.name}"')
    rows_kept = _scalar(conn, f'SELECT {stage.kept_expr} FROM "{stage.name}"')
    by_reason = dict(
        conn.execute(
            "SELECT reason, count(*) FROM audit_exclusions WHERE stage = ? GROUP BY reason ORDER BY reason",
            [stage.name],
        ).fetchall()
    )
    extra: dict[str, Any] = {}
    if stage.name == "resolved_cells":
        extra["resolutions"] = dict(
            conn.execute("SELECT resolution, count(*) FROM resolved_cells GROUP BY 1 ORDER BY 1").fetchall()
        )
        extra["conflict_cells"] = _scalar(
            conn, "SELECT count(DISTINCT (config_id, benchmark)) FROM audit_conflicts"
        )
        extra["conflict_reports"] = _scalar(conn, "SELECT count(*) FROM audit_conflicts")
    elif stage.name == "pooled_states":
        extra["pooled_groups"] = _scalar(conn, "SELECT count(*) FROM audit_harness_spread")
    elif stage.name == "modeled_observations":
        extra["iterations"] = [
            dict(zip(("iteration", "rows_in", "rows_removed"), row))
            for row in conn.execute(
                "SELECT iteration, rows_in, rows_removed FROM audit_coverage_iterations ORDER BY iteration"
            ).fetchall()
        ]
        extra["families"] = _scalar(conn, "SELECT count(DISTINCT family) FROM modeled_observations")
        extra["models"] = _scalar(conn, "SELECT count(DISTINCT model) FROM modeled_observations")
        extra["states"] = _scalar(
            conn, "SELECT count(DISTINCT (model, reasoning_state)) FROM modeled_observations"
        )
    return StageCounts(
        stage=stage.name,
        rows_in=int(rows_in),
        rows_out=int(rows_out),
        rows_kept=int(rows_kept or 0),
        rows_excluded=int(sum(by_reason.values())),
        excluded_by_reason={str(k): int(v) for k, v in by_reason.items()},
        seconds=seconds,
        extra=extra,
    )


def run_stage(
    conn: duckdb.DuckDBPyConnection,
    stage_name: str,
    config: CleaningConfig | None = None,
    *,
    sql_dir: Path | None = None,
) -> StageCounts:
    """Run one stage's SQL file (its inputs must exist) and return its counts."""
    stage = STAGE_BY_NAME[stage_name]
    config = config or CleaningConfig.load()
    ensure_ledger(conn, sql_dir)
    bind_config(conn, config)
    started = time.perf_counter()
    conn.execute(_sql_text(sql_path(stage.sql_file, sql_dir)))
    seconds = time.perf_counter() - started
    return stage_counts(conn, stage, seconds)


def run_chain(
    conn: duckdb.DuckDBPyConnection,
    config: CleaningConfig | None = None,
    *,
    stages: Iterable[str] | None = None,
    sql_dir: Path | None = None,
) -> list[StageCounts]:
    """Run the stages in pipeline order (all six by default)."""
    config = config or CleaningConfig.load()
    wanted = set(stages) if stages is not None else set(STAGE_NAMES)
    return [run_stage(conn, stage.name, config, sql_dir=sql_dir) for stage in STAGES if stage.name in wanted]


def record_history(
    conn: duckdb.DuckDBPyConnection, counts: StageCounts, *, run_id: str | None, config: CleaningConfig
) -> None:
    """Append a stage's counts to audit_stage_history (read by the drift checks)."""
    import json

    conn.execute(
        "INSERT INTO audit_stage_history VALUES (now()::TIMESTAMP, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            run_id, counts.stage, counts.rows_in, counts.rows_out, counts.rows_kept, counts.rows_excluded,
            config.fingerprint(), json.dumps({"excluded_by_reason": counts.excluded_by_reason, **counts.extra}),
        ],
    )
