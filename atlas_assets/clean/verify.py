"""What the clean-stage checks verify, as plain functions of a DuckDB connection.

atlas_assets/defs/clean/checks.py wraps these as Dagster asset checks; the tests call
them directly. Table-level expectations are GX specs (`Expectation`, run by
atlas_assets.quality.expectations.validate_frame); the cross-table invariants
(conservation, coverage, convergence, drift) are SQL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import duckdb

from atlas_assets.clean.chain import STAGE_BY_NAME, stage_counts
from atlas_assets.clean.config import CleaningConfig
from atlas_assets.quality.expectations import Expectation

MODELED_CONTRACT = [
    ("model", "VARCHAR"),
    ("reasoning_state", "VARCHAR"),
    ("family", "VARCHAR"),
    ("kind", "VARCHAR"),
    ("u", "DOUBLE"),
    ("correct", "INTEGER"),
    ("items", "INTEGER"),
    ("floor", "DOUBLE"),
    ("n_components", "INTEGER"),
    ("released_on", "DATE"),
]
PROTOCOLS = ["single", "average", "consensus", "best_of_n"]


@dataclass
class Verdict:
    passed: bool
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TableSuite:
    """A GX suite for one stage: the frame to validate (SQL) and the expectations."""

    query: str
    expectations: list[Expectation]


def _grain(stage: str) -> list[str]:
    return list(STAGE_BY_NAME[stage].grain)


def table_suites(stage: str) -> list[TableSuite]:
    """GX expectations per stage: at least one row (an empty stage table is a broken chain, not
    a table every expectation holds on), keys non-null and unique at the grain, value domains,
    u in [0,1]."""
    keys = _grain(stage)
    not_null = [
        Expectation("ExpectTableRowCountToBeBetween", min_value=1),
        *[Expectation("ExpectColumnValuesToNotBeNull", column=c) for c in keys if c != "harness"],
    ]
    if stage in ("oriented_scores", "screened_scores"):
        suite = [
            *not_null,
            Expectation("ExpectColumnValuesToBeUnique", column="row_key"),
            Expectation("ExpectColumnValuesToNotBeNull", column="score"),
            Expectation("ExpectColumnValuesToBeInSet", column="direction", value_set=["higher", "lower"]),
        ]
        if stage == "screened_scores":
            suite += [
                Expectation("ExpectColumnValuesToBeInSet", column="effective_protocol", value_set=PROTOCOLS),
                Expectation("ExpectColumnValuesToNotBeNull", column="effective_protocol"),
                Expectation("ExpectColumnValuesToBeInSet", column="sampling_class", value_set=["single", "consensus"]),
            ]
        return [TableSuite(f"SELECT * EXCLUDE (evaluated_on) FROM {stage}", suite)]
    if stage == "resolved_cells":
        return [
            TableSuite(
                "SELECT model_id, config_id, benchmark, score, n_reports, n_reports_cell, resolution FROM resolved_cells",
                [
                    *not_null,
                    Expectation("ExpectColumnValuesToNotBeNull", column="config_id"),
                    Expectation("ExpectCompoundColumnsToBeUnique", column_list=["config_id", "benchmark"]),
                    Expectation("ExpectColumnValuesToNotBeNull", column="score"),
                    Expectation("ExpectColumnValuesToBeBetween", column="n_reports", min_value=1),
                    Expectation(
                        "ExpectColumnValuesToBeInSet", column="resolution",
                        value_set=["single_report", "consensus", "tiebreak", "majority"],
                    ),
                ],
            )
        ]
    if stage == "pooled_states":
        return [
            TableSuite(
                "SELECT model, reasoning_state, benchmark, score, n_configs FROM pooled_states",
                [
                    *not_null,
                    Expectation("ExpectCompoundColumnsToBeUnique", column_list=keys),
                    Expectation("ExpectColumnValuesToNotBeNull", column="score"),
                    Expectation("ExpectColumnValuesToBeBetween", column="n_configs", min_value=1),
                ],
            )
        ]
    # family_observations, modeled_observations: same shape
    columns = "model, reasoning_state, family, kind, u, correct, items, floor, n_components"
    return [
        TableSuite(
            f"SELECT {columns} FROM {stage}",
            [
                *not_null,
                Expectation("ExpectCompoundColumnsToBeUnique", column_list=keys),
                Expectation("ExpectColumnValuesToBeInSet", column="kind", value_set=["bounded", "rating"]),
                Expectation("ExpectColumnValuesToNotBeNull", column="u"),
                Expectation("ExpectColumnValuesToBeBetween", column="floor", min_value=0, max_value=1, strict_max=True),
                Expectation("ExpectColumnValuesToBeBetween", column="n_components", min_value=1),
            ],
        ),
        # bounded observations: u on the declared range, whole items within the item count
        TableSuite(
            f"SELECT u, correct, items, correct <= items AS correct_within_items FROM {stage} WHERE kind = 'bounded'",
            [
                Expectation("ExpectColumnValuesToBeBetween", column="u", min_value=0, max_value=1),
                Expectation("ExpectColumnValuesToBeBetween", column="correct", min_value=0),
                Expectation("ExpectColumnValuesToBeBetween", column="items", min_value=1),
                Expectation("ExpectColumnValuesToBeInSet", column="correct_within_items", value_set=[True]),
            ],
        ),
    ]


def conservation(conn: duckdb.DuckDBPyConnection, stage: str) -> Verdict:
    """rows in = rows kept + rows excluded, and no input row is in the ledger twice."""
    counts = stage_counts(conn, stage)
    duplicates = conn.execute(
        "SELECT count(*) FROM (SELECT subject FROM audit_exclusions WHERE stage = ? GROUP BY subject HAVING count(*) > 1)",
        [stage],
    ).fetchone()[0]
    return Verdict(
        counts.conserved and duplicates == 0,
        {
            "rows_in": counts.rows_in,
            "rows_kept": counts.rows_kept,
            "rows_excluded": counts.rows_excluded,
            "rows_out": counts.rows_out,
            "identity": f"{counts.rows_in} = {counts.rows_kept} + {counts.rows_excluded}",
            "ledger_duplicates": int(duplicates),
        },
    )


def ledger_complete(conn: duckdb.DuckDBPyConnection) -> Verdict:
    """Every stage conserves its rows; every raw row is either in the model or in the ledger."""
    per_stage = {name: conservation(conn, name) for name in STAGE_BY_NAME}
    raw_rows = conn.execute("SELECT count(*) FROM raw_scores").fetchone()[0]
    accounted = conn.execute(
        """
        SELECT count(DISTINCT key) FROM (
            SELECT unnest(row_keys) AS key FROM audit_exclusions
            UNION ALL SELECT unnest(row_keys) FROM modeled_observations
        )
        """
    ).fetchone()[0]
    failing = [name for name, verdict in per_stage.items() if not verdict.passed]
    return Verdict(
        not failing and raw_rows > 0 and accounted == raw_rows,
        {
            "raw_rows": raw_rows,
            "raw_rows_accounted": accounted,
            "failing_stages": ", ".join(failing) or "none",
            **{f"{name}_identity": verdict.metadata["identity"] for name, verdict in per_stage.items()},
        },
    )


def orientation_rules_hold(conn: duckdb.DuckDBPyConnection) -> Verdict:
    """Only declared higher/lower, non-composite benchmarks; lower ones reflected on the declared range."""
    bad = conn.execute(
        """
        SELECT count(*) FILTER (WHERE b.direction NOT IN ('higher', 'lower') OR b.direction IS NULL) AS undeclared,
               count(*) FILTER (WHERE b.is_composite) AS composite,
               count(*) FILTER (WHERE o.direction = 'lower'
                                AND abs(o.score - (b.range_min + b.range_max - o.score_published)) > 1e-9) AS not_reflected
        FROM oriented_scores AS o JOIN registry_benchmarks AS b USING (benchmark)
        """
    ).fetchone()
    names = ("undeclared_direction", "composite", "not_reflected")
    return Verdict(sum(bad) == 0, dict(zip(names, map(int, bad))))


def screen_rules_hold(conn: duckdb.DuckDBPyConnection, config: CleaningConfig) -> Verdict:
    """No kept score with the wrong sampling class or below half the floor."""
    bad = conn.execute(
        """
        SELECT count(*) FILTER (WHERE s.sampling_class <>
                   CASE WHEN b.sampling_protocol IN ('consensus', 'best_of_n') THEN 'consensus' ELSE 'single' END),
               count(*) FILTER (WHERE b.floor > 0 AND (s.score - b.range_min) / (b.range_max - b.range_min) < $fraction * b.floor
                                AND (b.items IS NULL OR $fraction * b.floor * b.items >= $min_items))
        FROM screened_scores AS s JOIN registry_benchmarks AS b USING (benchmark)
        """,
        {"fraction": config.floor_guard_fraction, "min_items": config.floor_guard_min_items},
    ).fetchone()
    return Verdict(sum(bad) == 0, {"protocol_class_mismatch": int(bad[0]), "below_half_floor": int(bad[1])})


def bounds_suspect_benchmarks(conn: duckdb.DuckDBPyConnection) -> Verdict:
    """WARN signal: benchmarks excluded because too many of their scores sit at a declared bound
    that a correct declaration makes rare (audit_bounds.suspect): name them so the registry's
    bounds get checked."""
    rows = conn.execute(
        "SELECT benchmark, counted, n_scores, at_min, at_max FROM audit_bounds WHERE suspect ORDER BY benchmark"
    ).fetchall()
    return Verdict(
        not rows,
        {
            "suspect_benchmarks": ", ".join(r[0] for r in rows) or "none",
            "details": "; ".join(f"{b}: {c} of {n} at a bound (min {lo}, max {hi})" for b, c, n, lo, hi in rows) or "none",
            "benchmarks_with_bound_hits": int(conn.execute("SELECT count(*) FROM audit_bounds").fetchone()[0]),
        },
    )


def bounds_audit_consistent(conn: duckdb.DuckDBPyConnection, config: CleaningConfig) -> Verdict:
    """audit_bounds agrees with the ledger: its suspect benchmarks are exactly those charged to
    bounds_suspect, each with all its n_scores rows; counts add up and the flag follows the share."""
    row = conn.execute(
        """
        WITH ledger AS (
            SELECT benchmark, count(*) AS n FROM audit_exclusions
            WHERE stage = 'screened_scores' AND reason = 'bounds_suspect' GROUP BY benchmark
        )
        SELECT
          (SELECT count(*) FROM audit_bounds a FULL JOIN ledger l USING (benchmark)
             WHERE coalesce(a.suspect, false) <> (l.benchmark IS NOT NULL)
                OR (a.suspect AND a.n_scores <> l.n)) AS disagreements,
          (SELECT count(*) FROM audit_bounds
             WHERE counted > at_min + at_max OR at_min + at_max > n_scores
                OR suspect <> (counted > $share * n_scores)) AS inconsistent,
          (SELECT count(*) FROM audit_bounds WHERE suspect) AS suspect
        """,
        {"share": config.bounds_guard_max_share},
    ).fetchone()
    data = dict(zip(("disagreements_with_ledger", "inconsistent_rows", "suspect"), map(int, row)))
    return Verdict(data["disagreements_with_ledger"] == 0 and data["inconsistent_rows"] == 0, data)


def coverage_holds(conn: duckdb.DuckDBPyConnection, config: CleaningConfig) -> Verdict:
    """On modeled_observations: every family has enough models and varies; every model has enough
    families; the filter converged; ratings are standardized within family."""
    row = conn.execute(
        """
        WITH fam AS (
            SELECT family, count(DISTINCT model) AS n_models, max(u) - min(u) AS u_range,
                   any_value(kind) AS kind, avg(u) AS mean_u, stddev_samp(u) AS sd_u
            FROM modeled_observations GROUP BY family
        ),
        mdl AS (SELECT model, count(DISTINCT family) AS n_families FROM modeled_observations GROUP BY model)
        SELECT (SELECT count(*) FROM fam WHERE n_models < ?) AS thin_families,
               (SELECT count(*) FROM fam WHERE u_range <= ?) AS constant_families,
               (SELECT count(*) FROM mdl WHERE n_families < ?) AS thin_models,
               (SELECT count(*) FROM fam WHERE kind = 'rating' AND (abs(mean_u) > 1e-6 OR abs(sd_u - 1) > 1e-6)) AS unstandardized,
               (SELECT rows_removed FROM audit_coverage_iterations ORDER BY iteration DESC LIMIT 1) AS last_round_removed,
               (SELECT count(*) FROM audit_coverage_iterations) AS iterations,
               (SELECT count(*) FROM fam) AS families,
               (SELECT count(*) FROM mdl) AS models,
               (SELECT count(*) FROM modeled_observations) AS "rows"
        """,
        [config.min_models_per_family, config.zero_variance_epsilon, config.min_families_per_model],
    ).fetchone()
    names = ("thin_families", "constant_families", "thin_models", "unstandardized_rating_families",
             "last_round_removed", "iterations", "families", "models", "rows")
    data = {k: (int(v) if v is not None else 0) for k, v in zip(names, row)}
    passed = (
        data["rows"] > 0 and data["iterations"] > 0  # an empty output holds every threshold vacuously
        and data["thin_families"] == 0 and data["constant_families"] == 0 and data["thin_models"] == 0
        and data["unstandardized_rating_families"] == 0 and data["last_round_removed"] == 0
    )
    return Verdict(passed, data)


def no_constant_families(conn: duckdb.DuckDBPyConnection, stage: str, config: CleaningConfig) -> Verdict:
    rows = conn.execute(
        f"SELECT family FROM {stage} GROUP BY family HAVING count(*) > 1 AND max(u) - min(u) <= ?",
        [config.zero_variance_epsilon],
    ).fetchall()
    return Verdict(not rows, {"constant_families": ", ".join(r[0] for r in rows) or "none"})


def contract_columns(conn: duckdb.DuckDBPyConnection) -> Verdict:
    """modeled_observations starts with exactly the columns the Stan data stage reads."""
    described = [(r[0], r[1]) for r in conn.execute("DESCRIBE modeled_observations").fetchall()]
    head = described[: len(MODELED_CONTRACT)]
    return Verdict(
        head == MODELED_CONTRACT,
        {"expected": json.dumps(MODELED_CONTRACT), "found": json.dumps(head)},
    )


def _history(conn: duckdb.DuckDBPyConnection, stage: str) -> list[tuple]:
    return conn.execute(
        """SELECT rows_in, rows_kept, rows_out, details FROM audit_stage_history
           WHERE stage = ? ORDER BY recorded_at DESC, rowid DESC LIMIT 2""",
        [stage],
    ).fetchall()


def conflict_share_drift(conn: duckdb.DuckDBPyConnection, config: CleaningConfig) -> Verdict:
    """WARN signal: the share of contested cells ending as conflicts jumped vs the previous run."""
    history = _history(conn, "resolved_cells")

    def share(entry: tuple) -> float:
        details = json.loads(entry[3]) if entry[3] else {}
        conflicts = details.get("conflict_cells") or 0
        cells = entry[2] + conflicts
        return conflicts / cells if cells else 0.0

    if len(history) < 2:
        return Verdict(True, {"note": "no previous materialization to compare with"})
    now, before = share(history[0]), share(history[1])
    return Verdict(
        now - before <= config.conflict_share_jump,
        {"conflict_share": round(now, 5), "previous_conflict_share": round(before, 5),
         "allowed_jump": config.conflict_share_jump},
    )


def kept_share_drift(conn: duckdb.DuckDBPyConnection, stage: str, config: CleaningConfig) -> Verdict:
    """WARN signal: a stage keeps a clearly smaller share of its input than last time."""
    history = _history(conn, stage)
    if len(history) < 2:
        return Verdict(True, {"note": "no previous materialization to compare with"})

    def share(entry: tuple) -> float:
        return entry[1] / entry[0] if entry[0] else 1.0

    now, before = share(history[0]), share(history[1])
    return Verdict(
        before - now <= config.kept_share_drop,
        {"kept_share": round(now, 5), "previous_kept_share": round(before, 5), "allowed_drop": config.kept_share_drop},
    )


def conflict_queue_complete(conn: duckdb.DuckDBPyConnection) -> Verdict:
    """Every report the ledger charges to an unresolved conflict is in the queue, and vice versa;
    every queued cell has at least two reports."""
    row = conn.execute(
        """
        SELECT
          (SELECT count(*) FROM audit_exclusions e WHERE e.stage = 'resolved_cells' AND e.reason = 'unresolved_conflict'
             AND e.subject NOT IN (SELECT row_key FROM audit_conflicts)) AS missing_from_queue,
          (SELECT count(*) FROM audit_conflicts c WHERE c.row_key NOT IN (
             SELECT subject FROM audit_exclusions WHERE stage = 'resolved_cells' AND reason = 'unresolved_conflict')) AS not_in_ledger,
          (SELECT count(*) FROM audit_conflicts WHERE n_reports < 2) AS single_report_cells,
          (SELECT count(*) FROM audit_conflicts) AS reports,
          (SELECT count(DISTINCT (config_id, benchmark)) FROM audit_conflicts) AS cells
        """
    ).fetchone()
    names = ("missing_from_queue", "not_in_ledger", "single_report_cells", "reports", "cells")
    data = dict(zip(names, map(int, row)))
    return Verdict(data["missing_from_queue"] == 0 and data["not_in_ledger"] == 0 and data["single_report_cells"] == 0, data)


def harness_spread_consistent(conn: duckdb.DuckDBPyConnection) -> Verdict:
    """The harness audit lists exactly the pooled states built from two or more configurations,
    with n, ids and scores that agree with each other and with the pooled score."""
    row = conn.execute(
        """
        SELECT
          (SELECT count(*) FROM pooled_states WHERE n_configs >= 2) AS pooled_multi,
          (SELECT count(*) FROM audit_harness_spread) AS audited,
          (SELECT count(*) FROM audit_harness_spread
             WHERE len(config_ids) <> n_configs OR len(scores) <> n_configs OR len(harnesses) <> n_configs
                OR spread < 0 OR abs(spread - (list_max(scores) - list_min(scores))) > 1e-9
                OR pooled_score < list_min(scores) - 1e-9 OR pooled_score > list_max(scores) + 1e-9) AS inconsistent
        """
    ).fetchone()
    data = dict(zip(("pooled_multi", "audited", "inconsistent"), map(int, row)))
    return Verdict(data["pooled_multi"] == data["audited"] and data["inconsistent"] == 0, data)
