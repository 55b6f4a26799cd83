"""Ingest: one asset per source (download → immutable snapshot → parsed rows), then raw_scores.

A source whose new download cannot be had or cannot be parsed falls back to its newest
snapshot that parsed, so one bad source never stops the others; the asset records the
error and its freshness check fails (WARN). Only a source with no usable snapshot at all
fails its asset.
"""


from dataclasses import dataclass
from typing import Callable

import dagster as dg
from dagster_duckdb import DuckDBResource

from atlas_assets.ingest import epoch, swebench
from atlas_assets.ingest.archive import ArchiveError
from atlas_assets.ingest.fetch import FetchError, FetchResult, SourceFetcher
from atlas_assets.ingest.records import ParseOutput
from atlas_assets.ingest.snapshots import SnapshotStore
from atlas_assets.ingest.swebench import LeaderboardFormatError
from atlas_assets.registry.benchmarks import load_benchmark_registry
from atlas_assets.storage import count_by, ensure_source_tables, replace_rows

SOURCE_ERRORS = (FetchError, ArchiveError, LeaderboardFormatError)


@dataclass(frozen=True)
class SourceSpec:
    name: str
    url: str
    source_class_note: str
    parse: Callable[[bytes, object, str], ParseOutput]

    @property
    def asset_name(self) -> str:
        return f"{self.name}_scores"

    @property
    def staging_table(self) -> str:
        return f"raw_scores__{self.name}"

    @property
    def audit_table(self) -> str:
        return f"audit_ingest__{self.name}"


SOURCES = [
    SourceSpec("epoch_hub", epoch.URL, "evaluator release (Epoch's runs) and the leaderboards it re-publishes", epoch.parse_epoch_export),
    SourceSpec("swe_bench", swebench.URL, "benchmark release (the SWE-bench team's leaderboards)", swebench.parse_leaderboards),
]


def _record_snapshot(conn, spec: SourceSpec, fetched: FetchResult, run_id: str, parsed: ParseOutput | None, error: str | None) -> None:
    conn.execute(
        "INSERT INTO source_snapshots VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [spec.name, fetched.url, fetched.sha256, fetched.retrieved_at, fetched.origin, fetched.bytes, fetched.changed,
         parsed is not None, len(parsed.scores) if parsed else None, len(parsed.audit) if parsed else None, error, run_id],
    )


def _last_parsed(conn, spec: SourceSpec) -> tuple[str, str] | None:
    row = conn.execute(
        "SELECT sha256, retrieved_at FROM source_snapshots WHERE source = ? AND parsed_ok ORDER BY retrieved_at DESC, rowid DESC LIMIT 1",
        [spec.name],
    ).fetchone()
    return (row[0], row[1]) if row else None


def build_source_asset(spec: SourceSpec) -> dg.AssetsDefinition:
    @dg.asset(
        name=spec.asset_name,
        deps=["registry_benchmarks"],
        pool="duckdb",
        kinds={"duckdb", "python"},
        description=f"Scores scraped from {spec.url} ({spec.source_class_note}); staged as `{spec.staging_table}`.",
        metadata={"source_url": spec.url},
    )
    def source_scores(context: dg.AssetExecutionContext, fetcher: SourceFetcher, duckdb: DuckDBResource) -> dg.MaterializeResult:
        registry = load_benchmark_registry()
        store: SnapshotStore = fetcher.store
        fetched, parsed, problem = None, None, None
        try:
            fetched = fetcher.fetch(spec.url)
            context.log.info(f"{spec.name}: {fetched.bytes} bytes from {fetched.origin}, sha256 {fetched.sha256}, changed={fetched.changed}")
            parsed = spec.parse(store.read(fetched.sha256), registry, fetched.sha256)
        except SOURCE_ERRORS as error:
            problem = str(error)
            context.log.error(f"{spec.name}: {problem}")

        with duckdb.get_connection() as conn:
            ensure_source_tables(conn)
            if fetched is not None:
                _record_snapshot(conn, spec, fetched, context.run_id, parsed, problem)
            fallback_sha = None
            if parsed is None:
                previous = _last_parsed(conn, spec)
                if previous is None:
                    raise dg.Failure(
                        description=f"{spec.name}: no usable data: {problem}; no earlier snapshot parsed either",
                        metadata={"error": problem},
                    )
                fallback_sha = previous[0]
                context.log.warning(f"{spec.name}: falling back to snapshot {fallback_sha} retrieved {previous[1]}")
                parsed = spec.parse(store.read(fallback_sha), registry, fallback_sha)
            replace_rows(conn, spec.staging_table, parsed.score_frame(), like="raw_scores")
            replace_rows(conn, spec.audit_table, parsed.audit_frame(), like="audit_ingest")
            benchmarks = count_by(conn, spec.staging_table, "benchmark")
            reasons = count_by(conn, spec.audit_table, "reason")

        metadata: dict[str, object] = {
            "snapshot_sha256": parsed.snapshot_sha256,
            "score_rows": len(parsed.scores),
            "audit_rows": len(parsed.audit),
            "files_read": len(parsed.files_read),
            "benchmarks": len(benchmarks),
            "rows_per_benchmark": dg.MetadataValue.json(benchmarks),
            "audit_reasons": dg.MetadataValue.json(reasons),
            "registry_version": registry.version,
            "fresh": problem is None,
            "error": problem or "none",
            "fallback_snapshot": fallback_sha or "none",
        }
        if fetched is not None:
            metadata.update(fetched.metadata())
        return dg.MaterializeResult(metadata=metadata)

    return source_scores


source_assets = [build_source_asset(spec) for spec in SOURCES]


@dg.asset(
    deps=[spec.asset_name for spec in SOURCES],
    pool="duckdb",
    kinds={"duckdb"},
    description="Every published score of every source in one long table, with provenance; parse problems in `audit_ingest`.",
)
def raw_scores(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    with duckdb.get_connection() as conn:
        ensure_source_tables(conn)
        conn.execute("BEGIN TRANSACTION")
        conn.execute("DELETE FROM raw_scores")
        conn.execute("DELETE FROM audit_ingest")
        for spec in SOURCES:
            conn.execute(f"INSERT INTO raw_scores BY NAME SELECT * FROM {spec.staging_table}")
            conn.execute(f"INSERT INTO audit_ingest BY NAME SELECT * FROM {spec.audit_table}")
        conn.execute("COMMIT")
        total = conn.execute("SELECT count(*) FROM raw_scores").fetchone()[0]
        audit_total = conn.execute("SELECT count(*) FROM audit_ingest").fetchone()[0]
        per_source = count_by(conn, "raw_scores", "source")
        per_class = count_by(conn, "raw_scores", "source_class")
        n_benchmarks = conn.execute("SELECT count(DISTINCT benchmark) FROM raw_scores").fetchone()[0]
        n_ids = conn.execute("SELECT count(DISTINCT model_id) FROM raw_scores").fetchone()[0]
        snapshots = dict(conn.execute("SELECT source, any_value(snapshot_sha256) FROM raw_scores GROUP BY 1").fetchall())
        reasons = count_by(conn, "audit_ingest", "reason")
    context.log.info(f"raw_scores: {total} rows from {per_source}; {audit_total} audit rows")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": total,
            "rows_per_source": dg.MetadataValue.json(per_source),
            "rows_per_source_class": dg.MetadataValue.json(per_class),
            "benchmarks": n_benchmarks,
            "model_identifiers": n_ids,
            "snapshots": dg.MetadataValue.json(snapshots),
            "audit_rows": audit_total,
            "audit_reasons": dg.MetadataValue.json(reasons),
        }
    )
