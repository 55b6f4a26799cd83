"""Registry: the curated benchmark and model metadata, loaded from the package's YAML into DuckDB."""


import dagster as dg
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.refresh import table_version
from atlas_assets.registry.benchmarks import load_benchmark_registry
from atlas_assets.registry.model_ids import build_model_registry
from atlas_assets.storage import count_by, ensure_source_tables, replace_rows


@dg.asset(
    pool="duckdb",
    kinds={"duckdb", "yaml"},
    description="Benchmark registry (config/benchmarks.yaml): direction, range, floor, items, family, role, kind, protocol, "
    "flags per benchmark; how every column of every source file is read (`registry_files`, `registry_columns`).",
)
def registry_benchmarks(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    registry = load_benchmark_registry()
    with duckdb.get_connection() as conn:
        ensure_source_tables(conn)
        replace_rows(conn, "registry_benchmarks", registry.benchmarks)
        replace_rows(conn, "registry_files", registry.files)
        replace_rows(conn, "registry_columns", registry.columns)
        uses = count_by(conn, "registry_columns", "use")
        families = conn.execute("SELECT count(DISTINCT family) FROM registry_benchmarks").fetchone()[0]
        roles = count_by(conn, "registry_benchmarks", "role")
        kinds = count_by(conn, "registry_benchmarks", "kind")
        version = table_version(conn, "registry_benchmarks", "registry_files", "registry_columns")
    return dg.MaterializeResult(
        data_version=dg.DataVersion(version),
        metadata={
            "registry_version": registry.version,
            "dagster/row_count": len(registry.benchmarks),
            "families": families,
            "files": len(registry.files),
            "columns_by_use": dg.MetadataValue.json(uses),
            "benchmarks_by_role": dg.MetadataValue.json(roles),
            "benchmarks_by_kind": dg.MetadataValue.json(kinds),
        }
    )


@dg.asset(
    deps=["raw_scores"],
    pool="duckdb",
    kinds={"duckdb", "yaml"},
    description="Every published model identifier mapped to a canonical model and a normalized reasoning state "
    "(config/reasoning_rules.yaml, config/models.yaml); `registry_models` per model; unknowns in `audit_registry`.",
)
def registry_model_ids(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    with duckdb.get_connection() as conn:
        ensure_source_tables(conn)
        published = conn.execute(
            "SELECT model_id, model_name, organization, released_on, source, file FROM raw_scores"
        ).df()
        model_ids, models, audit = build_model_registry(published)
        replace_rows(conn, "registry_model_ids", model_ids)
        replace_rows(conn, "registry_models", models)
        replace_rows(conn, "audit_registry", audit)
        states = count_by(conn, "registry_model_ids", "reasoning_state")
        audit_kinds = count_by(conn, "audit_registry", "kind")
        unmapped = conn.execute(
            "SELECT count(*) FROM registry_model_ids WHERE model IS NULL OR reasoning_state IS NULL"
        ).fetchone()[0]
        version = table_version(conn, "registry_model_ids", "registry_models", "audit_registry")
    return dg.MaterializeResult(
        data_version=dg.DataVersion(version),
        metadata={
            "dagster/row_count": len(model_ids),
            "models": len(models),
            "identifiers_by_state": dg.MetadataValue.json(states),
            "unmapped_identifiers": unmapped,
            "audit_by_kind": dg.MetadataValue.json(audit_kinds),
        }
    )
