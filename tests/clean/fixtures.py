"""Small hand-written input tables for the cleaning-chain tests.

`Panel` builds the three input tables (plus registry_models) of sql/00_source_tables.sql in
an in-memory DuckDB with defaults for every column a rule does not look at, so each test
states only what matters to its rule.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pandas as pd

from atlas_assets.clean import CleaningConfig, run_chain, run_stage
from atlas_assets.settings import SQL_DIR

BENCHMARK_DEFAULTS: dict[str, Any] = dict(
    name=None, direction="higher", range_min=0.0, range_max=1.0, unit="fraction", floor=0.0, items=None,
    family=None, role="primary", kind="bounded", sampling_protocol="single", category="reasoning",
    is_safety=False, is_composite=False, contamination="static", notes=None, reference=None,
)
RAW_DEFAULTS: dict[str, Any] = dict(
    source="epoch_hub", source_class="evaluator_release", snapshot_sha256="0" * 64, file="f.csv",
    model_name=None, score_column="score", stderr=None, ci_low=None, ci_high=None, shots=None, harness=None,
    sampling_protocol=None, evaluated_on=None, released_on=None, organization=None, origin=None, origin_url=None,
    verification_class="independent",
)

# A config that lets tiny fixtures through the coverage filter unless a test says otherwise.
LOOSE = CleaningConfig.load().replace(min_models_per_family=1, min_families_per_model=1, primary_min_models=1)


@dataclass
class Panel:
    benchmarks: list[dict[str, Any]] = field(default_factory=list)
    scores: list[dict[str, Any]] = field(default_factory=list)
    model_ids: list[dict[str, Any]] = field(default_factory=list)
    models: list[dict[str, Any]] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)
    _counter: itertools.count = field(default_factory=lambda: itertools.count(1))

    def benchmark(self, benchmark: str, **values: Any) -> Panel:
        row = {"benchmark": benchmark, **BENCHMARK_DEFAULTS, **values}
        row["name"] = row["name"] or benchmark
        row["family"] = row["family"] or benchmark
        self.benchmarks.append(row)
        return self

    def republishes(self, source: str, file: str, original_source: str, original_file: str) -> Panel:
        """`source/file` copies `original_source/original_file` (registry_files.republishes_*)."""
        self.files.append({"source": source, "file": file, "source_class": "benchmark_release",
                           "harness_columns": [], "republishes_source": original_source,
                           "republishes_file": original_file})
        return self

    def model(self, model_id: str, model: str | None = "same", state: str | None = "default", **values: Any) -> Panel:
        model = model_id if model == "same" else model
        self.model_ids.append(
            {"model_id": model_id, "model": model, "reasoning_state": state, "budget_tokens": None, "rule": "test"}
        )
        if model is not None and model not in {m["model"] for m in self.models}:
            self.models.append(
                {"model": model, "display_name": model, "organization": None,
                 "released_on": values.get("released_on"), "n_identifiers": 1}
            )
        return self

    def score(self, model_id: str, benchmark: str, score: float, row_key: str | None = None, **values: Any) -> str:
        n = next(self._counter)
        key = row_key or f"t/f.csv#{n}/{benchmark}"
        self.scores.append(
            {"row_key": key, **RAW_DEFAULTS, "row_number": n, "model_id": model_id,
             "benchmark": benchmark, "score": float(score), **values}
        )
        return key

    def connect(self, conn: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
        conn = conn or duckdb.connect()
        conn.execute((SQL_DIR / "00_source_tables.sql").read_text())
        for table, rows in (
            ("registry_benchmarks", self.benchmarks),
            ("raw_scores", self.scores),
            ("registry_model_ids", self.model_ids),
            ("registry_models", self.models),
            ("registry_files", self.files),
        ):
            if rows:
                insert_rows(conn, table, rows)
        return conn

    def run(self, config: CleaningConfig = LOOSE, until: str | None = None) -> duckdb.DuckDBPyConnection:
        conn = self.connect()
        if until is None:
            run_chain(conn, config)
        else:
            from atlas_assets.clean import STAGE_NAMES

            for name in STAGE_NAMES[: STAGE_NAMES.index(until) + 1]:
                run_stage(conn, name, config)
        return conn


def insert_rows(conn: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]]) -> None:
    columns = [c[0] for c in conn.execute(f'DESCRIBE "{table}"').fetchall()]
    frame = pd.DataFrame([{c: row.get(c) for c in columns} for row in rows], columns=columns)
    frame = frame.astype(object).where(frame.notna(), None)
    conn.register("_rows", frame)
    try:
        select = ", ".join('_rows."' + c + '"' for c in columns)
        conn.execute(f'INSERT INTO "{table}" SELECT {select} FROM _rows')
    finally:
        conn.unregister("_rows")


def table(conn: duckdb.DuckDBPyConnection, query: str) -> list[tuple]:
    return conn.execute(query).fetchall()


def exclusions(conn: duckdb.DuckDBPyConnection, stage: str) -> dict[str, str]:
    """subject -> reason for one stage's ledger rows."""
    return dict(conn.execute("SELECT subject, reason FROM audit_exclusions WHERE stage = ?", [stage]).fetchall())
