"""Checks beside the clean assets.

Hard gates are blocking ERROR checks (a failure stops everything downstream, e.g. the fit):
table expectations per stage (GX suite: keys non-null and unique at the stage's grain,
value domains, u in [0, 1] for bounded observations), the conservation identity per stage,
the stage's own rules on its output (directions declared, protocol classes, coverage
thresholds, no zero-variance family, the output contract). Drift signals are WARN.
Each check opens the DuckDB file, so each is in the "duckdb" pool too.
"""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg
from dagster_duckdb import DuckDBResource

from atlas_assets.clean import STAGE_NAMES, CleaningConfig
from atlas_assets.clean import verify
from atlas_assets.quality.expectations import validate_frame

ERROR = dg.AssetCheckSeverity.ERROR
WARN = dg.AssetCheckSeverity.WARN


def _result(verdict: verify.Verdict, severity: dg.AssetCheckSeverity = ERROR) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=verdict.passed, severity=severity, metadata=verdict.metadata)


def build_table_check(stage: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=stage,
        name=f"{stage}_expectations",
        blocking=True,
        pool="duckdb",
        description="GX suite: keys non-null and unique at the stage's grain, value domains"
        + (", u within [0, 1] for bounded observations" if "observations" in stage else ""),
    )
    def _check(duckdb: DuckDBResource) -> dg.AssetCheckResult:
        with duckdb.get_connection() as conn:
            frames = [(suite, conn.execute(suite.query).df()) for suite in verify.table_suites(stage)]
        results = [
            validate_frame(frame, suite.expectations, suite_name=f"{stage}_{i}") for i, (suite, frame) in enumerate(frames)
        ]
        metadata: dict[str, object] = {}
        for i, result in enumerate(results):
            metadata.update({(k if i == 0 else f"{k} [{i}]"): v for k, v in result.metadata.items()})
        return dg.AssetCheckResult(passed=all(r.passed for r in results), severity=ERROR, metadata=metadata)

    return _check


def build_conservation_check(stage: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=stage,
        name=f"{stage}_conservation",
        blocking=True,
        pool="duckdb",
        description="rows in = rows kept + rows excluded (audit_exclusions), each dropped row in the ledger once.",
    )
    def _check(duckdb: DuckDBResource) -> dg.AssetCheckResult:
        with duckdb.get_connection() as conn:
            return _result(verify.conservation(conn, stage))

    return _check


def build_sql_check(stage: str, name: str, description: str, fn: Callable, severity=ERROR) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=stage, name=name, blocking=severity == ERROR, pool="duckdb", description=description
    )
    def _check(duckdb: DuckDBResource) -> dg.AssetCheckResult:
        config = CleaningConfig.load()
        with duckdb.get_connection() as conn:
            return _result(fn(conn, config), severity)

    return _check


table_checks = [build_table_check(stage) for stage in STAGE_NAMES]
conservation_checks = [build_conservation_check(stage) for stage in STAGE_NAMES]
rule_checks = [
    build_sql_check(
        "oriented_scores", "oriented_scores_directions_declared",
        "Only declared higher/lower, non-composite benchmarks pass; lower-is-better scores are reflected.",
        lambda conn, config: verify.orientation_rules_hold(conn),
    ),
    build_sql_check(
        "screened_scores", "screened_scores_guards_hold",
        "No kept score of the wrong sampling class or below half the guessing floor.",
        verify.screen_rules_hold,
    ),
    build_sql_check(
        "family_observations", "family_observations_no_constant_family",
        "No family whose observations never vary.",
        lambda conn, config: verify.no_constant_families(conn, "family_observations", config),
    ),
    build_sql_check(
        "modeled_observations", "modeled_observations_coverage",
        "Coverage thresholds hold on the output, no zero-variance family, the filter converged, ratings standardized.",
        verify.coverage_holds,
    ),
    build_sql_check(
        "modeled_observations", "modeled_observations_contract",
        "The leading columns are exactly the contract the Stan data stage reads.",
        lambda conn, config: verify.contract_columns(conn),
    ),
    build_sql_check(
        "audit_conflicts", "audit_conflicts_complete",
        "The conflict queue holds exactly the reports the ledger charges to unresolved conflicts, >= 2 per cell.",
        lambda conn, config: verify.conflict_queue_complete(conn),
    ),
    build_sql_check(
        "audit_bounds", "audit_bounds_consistent",
        "The bounds audit's suspect benchmarks are exactly those whose scores the ledger charges to bounds_suspect, "
        "with counts that add up.",
        lambda conn, config: verify.bounds_audit_consistent(conn, config),
    ),
    build_sql_check(
        "audit_harness_spread", "audit_harness_spread_consistent",
        "The harness audit lists every state pooled from several configurations, with consistent n, ids and spread.",
        lambda conn, config: verify.harness_spread_consistent(conn),
    ),
    build_sql_check(
        "audit_exclusions", "audit_exclusions_complete",
        "Every stage conserves its rows and every raw score is either modeled or in the ledger.",
        lambda conn, config: verify.ledger_complete(conn),
    ),
]
drift_checks = [
    build_sql_check(
        "audit_bounds", "audit_bounds_suspect_benchmarks",
        "WARN naming every benchmark excluded because more than bounds_guard_max_share of its scores sit at its "
        "declared max (or at its min where it has a guessing floor): its declared bounds need checking.",
        lambda conn, config: verify.bounds_suspect_benchmarks(conn), severity=WARN,
    ),
    build_sql_check(
        "resolved_cells", "resolved_cells_conflict_share_drift",
        "WARN when the share of cells ending as conflicts jumps vs the previous materialization.",
        verify.conflict_share_drift, severity=WARN,
    ),
    *[
        build_sql_check(
            stage, f"{stage}_kept_share_drift",
            "WARN when the stage keeps a clearly smaller share of its input than at the previous materialization.",
            lambda conn, config, stage=stage: verify.kept_share_drift(conn, stage, config), severity=WARN,
        )
        for stage in STAGE_NAMES
    ],
]
