"""Checks beside the registry assets."""


import dagster as dg
from dagster_duckdb import DuckDBResource

from atlas_assets.quality.expectations import Expectation, validate_frame

REASONING_STATES = ["default", "minimal", "low", "medium", "high", "xhigh", "max", "disabled", "enabled"]


@dg.asset_check(asset="registry_benchmarks", blocking=True, description="Registry fields take declared values only.")
def registry_benchmarks_expectations(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        frame = conn.execute("SELECT * FROM registry_benchmarks").df()
    return validate_frame(
        frame,
        [
            Expectation("ExpectColumnValuesToBeUnique", column="benchmark"),
            Expectation("ExpectColumnValuesToBeInSet", column="direction", value_set=["higher", "lower", "zero_best", "target", "custom"]),
            Expectation("ExpectColumnValuesToBeInSet", column="role", value_set=["primary", "component", "diagnostic"]),
            Expectation("ExpectColumnValuesToBeInSet", column="kind", value_set=["bounded", "rating", "unbounded"]),
            Expectation("ExpectColumnValuesToBeInSet", column="sampling_protocol", value_set=["single", "average", "consensus", "best_of_n"]),
            Expectation("ExpectColumnValuesToBeInSet", column="contamination", value_set=["live", "private", "static"]),
            Expectation("ExpectColumnValuesToBeBetween", column="floor", min_value=0, max_value=1, strict_max=True),
            Expectation("ExpectColumnValuesToBeBetween", column="items", min_value=1),
            Expectation("ExpectColumnValuesToNotBeNull", column="family"),
        ],
        suite_name="registry_benchmarks",
    )


@dg.asset_check(asset="registry_model_ids", blocking=True, description="One row per published identifier; states from the normalized set.")
def registry_model_ids_expectations(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        frame = conn.execute("SELECT * FROM registry_model_ids").df()
    return validate_frame(
        frame,
        [
            Expectation("ExpectColumnValuesToNotBeNull", column="model_id"),
            Expectation("ExpectColumnValuesToBeUnique", column="model_id"),
            Expectation("ExpectColumnValuesToBeInSet", column="reasoning_state", value_set=REASONING_STATES),
            Expectation("ExpectColumnValuesToNotBeNull", column="rule"),
        ],
        suite_name="registry_model_ids",
    )


@dg.asset_check(asset="registry_model_ids", description="Every identifier in raw_scores maps to a model and a reasoning state "
                "(WARN: unknown ones are audited in audit_registry and excluded downstream, never guessed).")
def registry_model_ids_complete(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        unmapped = conn.execute(
            """SELECT r.model_id, count(*) AS scores, any_value(m.rule) AS rule
               FROM raw_scores r LEFT JOIN registry_model_ids m USING (model_id)
               WHERE m.model IS NULL OR m.reasoning_state IS NULL GROUP BY 1 ORDER BY 2 DESC"""
        ).fetchall()
        total = conn.execute("SELECT count(DISTINCT model_id) FROM raw_scores").fetchone()[0]
    listing = "\n".join(f"{model_id!r}: {n} scores ({rule})" for model_id, n, rule in unmapped[:40]) or "none"
    return dg.AssetCheckResult(
        passed=not unmapped, severity=dg.AssetCheckSeverity.WARN,
        metadata={"identifiers": total, "unmapped_identifiers": len(unmapped),
                  "unmapped_scores": sum(n for _, n, _ in unmapped), "examples": listing},
    )
