"""Clean: the DuckDB SQL chain from raw_scores + registry to the matrix the model fits.

One asset per SQL stage (sql/01..06), each run through atlas_assets.clean.run_stage with
the thresholds of config/cleaning.yaml; stage 3 also writes the conflict queue and stage 4
the harness-spread audit (declared as their own assets, materialized by the same step).
Every asset writes DuckDB, so every one is in the "duckdb" pool.
"""

from __future__ import annotations


import dagster as dg
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets.clean import STAGE_BY_NAME, STAGE_NAMES, CleaningConfig, StageCounts, record_history, run_stage
from atlas_assets.clean.verify import ledger_complete
from atlas_assets.defs.refresh import StepInputs, StepRefresh, run_specification, table_version

# Inputs owned by the ingest and registry stages (declared as deps, not imported).
UPSTREAM = {
    "oriented_scores": ["raw_scores", "registry_benchmarks"],
    "screened_scores": ["oriented_scores", "registry_benchmarks"],
    "resolved_cells": ["screened_scores", "registry_benchmarks"],
    "pooled_states": ["resolved_cells", "audit_conflicts", "registry_model_ids", "registry_benchmarks"],
    "family_observations": ["pooled_states", "audit_conflicts", "registry_model_ids", "registry_benchmarks"],
    "modeled_observations": ["family_observations", "registry_model_ids"],
}
# Audit tables written by a stage's SQL next to its output.
COMPANIONS = {
    "screened_scores": {
        "audit_bounds": "Scores at exactly a declared bound, per benchmark: how many sit at the min and the max, "
        "how many count against the declaration (the max; the min where guessing clears it), and whether the "
        "benchmark was excluded as bounds_suspect (named by a WARN check).",
    },
    "resolved_cells": {
        "audit_conflicts": "Conflict queue: every report of every configuration x benchmark cell that stayed "
        "irreconcilable after consensus, protocol tiebreak and majority (excluded from the fit).",
    },
    "pooled_states": {
        "audit_harness_spread": "Every (model, reasoning state, benchmark) pooled from several harness "
        "configurations: the configuration ids, harnesses, scores, n and spread.",
    },
}


def _reason_table(counts: StageCounts) -> dg.MetadataValue:
    frame = pd.DataFrame(
        [{"reason": reason, "rows": n} for reason, n in counts.excluded_by_reason.items()] or [{"reason": "(none)", "rows": 0}]
    )
    return dg.MetadataValue.md(frame.to_markdown(index=False))


def stage_metadata(counts: StageCounts) -> dict[str, object]:
    metadata: dict[str, object] = {
        "dagster/row_count": counts.rows_out,
        "rows_in": counts.rows_in,
        "rows_kept": counts.rows_kept,
        "rows_excluded": counts.rows_excluded,
        "conservation": f"{counts.rows_in} = {counts.rows_kept} kept + {counts.rows_excluded} excluded"
        + ("" if counts.conserved else "  (VIOLATED)"),
        "excluded_by_reason": _reason_table(counts),
        "seconds": round(counts.seconds, 3),
    }
    for key, value in counts.extra.items():
        metadata[key] = dg.MetadataValue.json(value) if isinstance(value, (dict, list)) else value
    return metadata


def build_stage_asset(stage_name: str) -> dg.AssetsDefinition:
    stage = STAGE_BY_NAME[stage_name]
    specs = [
        dg.AssetSpec(
            stage.name,
            deps=UPSTREAM[stage.name],
            description=f"{stage.description} (sql/{stage.sql_file})",
            kinds={"duckdb", "sql"},
            metadata={"sql_file": f"sql/{stage.sql_file}", "grain": ", ".join(stage.grain)},
        )
    ]
    for key, description in COMPANIONS.get(stage.name, {}).items():
        specs.append(
            dg.AssetSpec(key, deps=UPSTREAM[stage.name], description=description, kinds={"duckdb", "sql"})
        )

    outputs = [stage.name, *COMPANIONS.get(stage.name, {})]

    @dg.multi_asset(name=f"clean_{stage.name}", specs=specs, pool="duckdb", can_subset=False)
    def _stage(context, duckdb: DuckDBResource):
        # unchanged upstream tables and fit specification (SQL, cleaning.yaml, the registries, the code): the
        # tables this stage wrote last time are what it would write again
        specification = {"fit_specification": run_specification(context.run_id, "fit")}
        inputs = StepInputs.of(context, UPSTREAM[stage.name], specification)
        refreshes = [StepRefresh(context, inputs, key) for key in outputs]
        with duckdb.get_connection() as conn:
            present = {row[0] for row in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        reused = [r.reuse(still_there=set(outputs) <= present) for r in refreshes]
        if all(reused):
            yield from reused
            return
        config = CleaningConfig.load()
        with duckdb.get_connection() as conn:
            counts = run_stage(conn, stage.name, config)
            record_history(conn, counts, run_id=context.run_id, config=config)
            companion_rows = {
                key: conn.execute(f'SELECT count(*) FROM "{key}"').fetchone()[0] for key in COMPANIONS.get(stage.name, {})
            }
            versions = {key: table_version(conn, key) for key in outputs}
        context.log.info(f"{stage.name}: {counts.as_dict()}")
        yield refreshes[0].computed({**stage_metadata(counts), "config_fingerprint": config.fingerprint()},
                                    versions[stage.name])
        for refresh, (key, n) in zip(refreshes[1:], companion_rows.items()):
            yield refresh.computed({"dagster/row_count": int(n)}, versions[key])

    return _stage


stage_assets = [build_stage_asset(name) for name in STAGE_NAMES]


@dg.asset(
    deps=list(STAGE_NAMES),
    pool="duckdb",
    kinds={"duckdb", "sql"},
    description="The one exclusion ledger (sql/07_audit_exclusions.sql): every row any clean stage dropped, once, "
    "with stage, reason code, source row keys and values. This asset summarizes it per stage and reason.",
)
def audit_exclusions(context, duckdb: DuckDBResource) -> dg.MaterializeResult:
    inputs = StepInputs.of(context, STAGE_NAMES, {"fit_specification": run_specification(context.run_id, "fit")})
    refresh = StepRefresh(context, inputs)
    reused = refresh.reuse()
    if reused:
        return reused
    with duckdb.get_connection() as conn:
        summary = conn.execute(
            "SELECT stage, reason, n_rows, n_source_rows FROM audit_exclusion_counts ORDER BY stage, n_rows DESC"
        ).df()
        verdict = ledger_complete(conn)
    summary["stage_order"] = summary["stage"].map({name: i for i, name in enumerate(STAGE_NAMES)})
    summary = summary.sort_values(["stage_order", "n_rows"], ascending=[True, False]).drop(columns="stage_order")
    per_stage = summary.groupby("stage", sort=False)["n_rows"].sum().to_dict()
    return refresh.computed({
        "dagster/row_count": int(summary["n_rows"].sum()) if len(summary) else 0,
        "by_stage_and_reason": dg.MetadataValue.md(summary.to_markdown(index=False)),
        "excluded_per_stage": dg.MetadataValue.json({k: int(v) for k, v in per_stage.items()}),
        **{k: v for k, v in verdict.metadata.items()},
    })
