"""Ingest: one asset per source (download → immutable snapshot → parsed rows), then raw_scores.

Nothing lost, nothing invented:
- Every retrieval attempt is recorded in `source_snapshots`, failed ones too, so the
  freshness check reads the latest attempt, not the latest success.
- A new download that cannot be had, cannot be parsed, yields no rows, or yields more than
  `max_row_loss_share` fewer rows than the last good snapshot is not a good snapshot: it
  stays on disk, is audited, and the source falls back to its last good snapshot (WARN).
- A file of a usable snapshot that vanished, emptied or cannot be read as a whole keeps its
  last good rows (from the staging table, with their own snapshot hash); a bad row costs
  only that row.
- A source asset never fails for bad input: with no usable snapshot at all it stages
  nothing and its WARN checks say so, so the other sources still land in raw_scores.
"""


from dataclasses import dataclass
from typing import Callable

import dagster as dg
from dagster_duckdb import DuckDBResource
from pydantic import Field

from atlas_assets.defs.refresh import DATA_VERSION_TAG, StepInputs, StepRefresh, run_specification, table_version
from atlas_assets.ingest import aider, arcprize, epoch, swebench, tau2
from atlas_assets.ingest.archive import ArchiveError
from atlas_assets.ingest.bundles import BundleError, read_bundle
from atlas_assets.ingest.fetch import FetchError, FetchResult, SourceFetcher, utc_now
from atlas_assets.ingest.records import FILE_ERROR_REASONS, KEPT_ROWS_REASONS, ParseOutput
from atlas_assets.ingest.snapshots import SnapshotStore
from atlas_assets.ingest.swebench import LeaderboardFormatError
from atlas_assets.registry.benchmarks import load_benchmark_registry
from atlas_assets.storage import count_by, ensure_source_tables, replace_rows

SOURCE_ERRORS = (FetchError, ArchiveError, LeaderboardFormatError, BundleError, arcprize.ArcPrizeFormatError,
                 tau2.Tau2FormatError)
# source_snapshots.status values whose snapshot may be used (parsed_ok).
USABLE_STATUSES = ("parsed", "parsed_with_file_errors")
# Source-level audit reasons (one per unusable attempt), in the source's audit table.
SNAPSHOT_REASONS = ("rejected_snapshot", "unparsable_snapshot", "fetch_failed")


@dataclass(frozen=True)
class SourceSpec:
    """One source. A single-document source downloads `url`; a multi-document one (`documents` set)
    downloads each document relative to `url` (then those `discover` names from them) into one bundle
    (atlas_assets/ingest/bundles.py), and its parser gets {document name: bytes}."""

    name: str
    url: str
    source_class_note: str
    parse: Callable[[object, object, str], ParseOutput]
    documents: tuple[str, ...] = ()
    discover: Callable[[dict[str, bytes]], list[str]] | None = None

    @property
    def is_bundle(self) -> bool:
        return bool(self.documents)

    def retrieve(self, fetcher: SourceFetcher) -> FetchResult:
        if self.is_bundle:
            return fetcher.fetch_bundle(self.name, self.url, list(self.documents), self.discover)
        return fetcher.fetch(self.url)

    def read(self, store: SnapshotStore, sha256: str):
        """What the parser reads from a stored snapshot: the bytes, or a bundle's documents by name."""
        return read_bundle(store, sha256) if self.is_bundle else store.read(sha256)

    @property
    def asset_name(self) -> str:
        return f"{self.name}_scores"

    @property
    def staging_table(self) -> str:
        return f"raw_scores__{self.name}"

    @property
    def cost_staging_table(self) -> str:
        return f"raw_costs__{self.name}"

    @property
    def audit_table(self) -> str:
        return f"audit_ingest__{self.name}"


SOURCES = [
    SourceSpec("epoch_hub", epoch.URL, "evaluator release (Epoch's runs) and the leaderboards it re-publishes", epoch.parse_epoch_export),
    SourceSpec("swe_bench", swebench.URL, "benchmark release (the SWE-bench team's leaderboards)", swebench.parse_leaderboards),
    SourceSpec("aider", aider.BASE_URL, "benchmark release (Aider's polyglot and code-editing leaderboards)",
               aider.parse_aider, documents=aider.DOCUMENTS),
    SourceSpec("tau2_bench", tau2.BASE_URL, "benchmark release (the tau2-bench leaderboard: its manifest and every "
               "submission it lists)", tau2.parse_tau2, documents=tau2.DOCUMENTS, discover=tau2.discover),
    SourceSpec("arc_prize", arcprize.BASE_URL, "benchmark release (the ARC Prize leaderboard: evaluations, models, "
               "datasets)", arcprize.parse_arc_prize, documents=arcprize.DOCUMENTS),
]


class IngestConfig(dg.Config):
    """Run configuration of a source asset (launchpad: ops.<source>_scores.config)."""

    max_row_loss_share: float = Field(
        default=0.5, ge=0.0, lt=1.0,
        description="A new snapshot that yields more than this share fewer score rows than the last good "
        "snapshot is rejected (kept on disk, audited) and the last good one stays in use.",
    )


@dataclass(frozen=True)
class LastGood:
    sha256: str
    retrieved_at: str
    score_rows: int


def _record_attempt(conn, spec: SourceSpec, run_id: str, *, url: str, retrieved_at: str, origin: str, status: str,
                    sha256: str | None = None, bytes_: int | None = None, changed: bool | None = None,
                    parsed: ParseOutput | None = None, error: str | None = None,
                    rows: tuple[int | None, int | None] | None = None) -> None:
    score_rows, audit_rows = rows or ((len(parsed.scores), len(parsed.audit)) if parsed else (None, None))
    conn.execute(
        """INSERT INTO source_snapshots (source, url, sha256, retrieved_at, origin, bytes, changed, parsed_ok,
                                         score_rows, audit_rows, error, run_id, status)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        [spec.name, url, sha256, retrieved_at, origin, bytes_, changed, status in USABLE_STATUSES,
         score_rows, audit_rows, error, run_id, status],
    )


def _last_good(conn, spec: SourceSpec) -> LastGood | None:
    # score_rows > 0: a snapshot that yielded nothing is never a fallback (older databases accepted such).
    row = conn.execute(
        """SELECT sha256, retrieved_at, score_rows FROM source_snapshots
           WHERE source = ? AND parsed_ok AND sha256 IS NOT NULL AND coalesce(score_rows, 0) > 0
           ORDER BY retrieved_at DESC, rowid DESC LIMIT 1""",
        [spec.name],
    ).fetchone()
    return LastGood(row[0], row[1], int(row[2])) if row else None


def _ensure_staging(conn, spec: SourceSpec) -> None:
    conn.execute(f"CREATE TABLE IF NOT EXISTS {spec.staging_table} AS SELECT * FROM raw_scores LIMIT 0")
    conn.execute(f"CREATE TABLE IF NOT EXISTS {spec.cost_staging_table} AS SELECT * FROM raw_costs LIMIT 0")
    conn.execute(f"CREATE TABLE IF NOT EXISTS {spec.audit_table} AS SELECT * FROM audit_ingest LIMIT 0")


def _rows_per_file(conn, spec: SourceSpec) -> dict[str, int]:
    return dict(conn.execute(f"SELECT file, count(*) FROM {spec.staging_table} GROUP BY 1").fetchall())


def _shortfall(spec: SourceSpec, parsed: ParseOutput, last: LastGood | None, share: float,
               staged_per_file: dict[str, int]) -> str | None:
    """Why a parsed snapshot is not a good one (it yields nothing, or far fewer rows), else None."""
    fresh = len(parsed.scores)
    if fresh > 0 and (last is None or fresh >= (1.0 - share) * last.score_rows):
        return None
    head = f"{spec.name}: snapshot {parsed.snapshot_sha256[:12]} yields {fresh} score rows"
    if last is None:
        return f"{head}; a snapshot without rows is not a good snapshot"
    fresh_per_file: dict[str, int] = {}
    for row in parsed.scores:
        fresh_per_file[row["file"]] = fresh_per_file.get(row["file"], 0) + 1
    losses = sorted(((n - fresh_per_file.get(f, 0), f, n) for f, n in staged_per_file.items() if fresh_per_file.get(f, 0) < n),
                    reverse=True)
    files = "; ".join(f"{f}: {n} -> {fresh_per_file.get(f, 0)}" for _, f, n in losses[:5])
    return (f"{head} against {last.score_rows} in the last good snapshot {last.sha256[:12]} of {last.retrieved_at} "
            f"({1 - fresh / last.score_rows:.0%} fewer, more than the {share:.0%} allowed); rejected, the last good "
            f"snapshot stays in use" + (f". Largest losses: {files}" if files else ""))


def _keep_last_good_files(conn, spec: SourceSpec, parsed: ParseOutput) -> list[str]:
    """Files the snapshot could not deliver keep their rows: copied into temp tables kept_scores / kept_costs /
    kept_audit (a file's costs travel with its scores: the same snapshot semantics).

    A file that vanished, emptied, or could not be read as a whole (parsed.file_errors) keeps the
    rows it had in the staging table: each keeps the sha256 of the snapshot it came from, so
    provenance stays exact. Their row-level audit rows travel with them; file-level ones are this
    run's own.
    """
    fresh_files = {row["file"] for row in parsed.scores}
    kept = []
    for file, n in sorted(_rows_per_file(conn, spec).items()):
        if file in fresh_files and file not in parsed.file_errors:
            continue
        if file in parsed.file_errors:
            why = parsed.file_errors[file]
        elif file in parsed.files_seen:
            why = "emptied"
            parsed.flag("emptied_file", f"{spec.name}/{file}: no readable row in this snapshot (it had {n})", file=file)
        else:
            why = "vanished"
            parsed.flag("vanished_file", f"{spec.name}/{file}: not in this snapshot any more (it had {n} rows)", file=file)
        shas = [r[0] for r in conn.execute(f"SELECT DISTINCT snapshot_sha256 FROM {spec.staging_table} WHERE file = ? ORDER BY 1",
                                           [file]).fetchall()]
        parsed.flag("kept_last_good_rows", f"{spec.name}/{file}: {why}; kept its {n} last good rows from snapshot "
                    f"{', '.join(sha[:12] for sha in shas)}", file=file, value=n)
        kept.append(file)
    files = ", ".join("?" * len(kept)) or "NULL"
    skip = list(FILE_ERROR_REASONS + KEPT_ROWS_REASONS + SNAPSHOT_REASONS)
    conn.execute(f"CREATE OR REPLACE TEMP TABLE kept_scores AS SELECT * FROM {spec.staging_table} WHERE file IN ({files})", kept)
    conn.execute(f"CREATE OR REPLACE TEMP TABLE kept_costs AS SELECT * FROM {spec.cost_staging_table} WHERE file IN ({files})",
                 kept)
    conn.execute(
        f"CREATE OR REPLACE TEMP TABLE kept_audit AS SELECT * FROM {spec.audit_table} "
        f"WHERE file IN ({files}) AND reason NOT IN ({', '.join('?' * len(skip))})", kept + skip,
    )
    return kept


def _stage(conn, spec: SourceSpec, parsed: ParseOutput) -> None:
    """Staging tables (scores, costs, audit) := this parse's rows plus the kept ones, in one transaction."""
    conn.execute("BEGIN TRANSACTION")
    try:
        for table, like, frame, kept in ((spec.staging_table, "raw_scores", parsed.score_frame(), "kept_scores"),
                                         (spec.cost_staging_table, "raw_costs", parsed.cost_frame(), "kept_costs"),
                                         (spec.audit_table, "audit_ingest", parsed.audit_frame(), "kept_audit")):
            conn.register("incoming_frame", frame)
            conn.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM {like} LIMIT 0")
            columns = ", ".join(f'"{c}"' for c in frame.columns)
            conn.execute(f"INSERT INTO {table} BY NAME SELECT {columns} FROM incoming_frame")
            conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {kept}")
            conn.unregister("incoming_frame")
        conn.execute("COMMIT")
    except Exception:
        conn.execute("ROLLBACK")
        raise


def _record_documents(conn, spec: SourceSpec, fetched: FetchResult) -> None:
    if fetched.documents:
        conn.executemany(
            "INSERT OR IGNORE INTO source_documents VALUES (?, ?, ?, ?, ?, ?)",
            [[fetched.sha256, spec.name, d.name, d.url, d.sha256, d.bytes] for d in fetched.documents],
        )


def _reuse_staged_snapshot(context: dg.AssetExecutionContext, spec: SourceSpec, fetched: FetchResult,
                           refresh: StepRefresh, duckdb: DuckDBResource) -> dg.MaterializeResult | None:
    """The download has the bytes of the snapshot staged by the last materialization, which parsed cleanly under
    the same specification (registry, parsers): parsing them again would stage the same rows. The attempt is
    recorded as any other (freshness reads it); the staging tables stay as they are. None when any of that is
    not so (then the snapshot is parsed)."""
    earlier = refresh.previous
    if earlier is None or not refresh.unchanged():
        return None
    status, staged = earlier.metadata.get("status"), earlier.metadata.get("snapshot_sha256")
    if status is None or status.value != "parsed" or staged is None or staged.value != fetched.sha256:
        return None
    with duckdb.get_connection() as conn:
        ensure_source_tables(conn)
        _ensure_staging(conn, spec)
        if table_version(conn, spec.staging_table, spec.cost_staging_table, spec.audit_table) != \
                earlier.tags.get(DATA_VERSION_TAG):
            return None  # the staging tables moved since (another run, or by hand): parse again
        rows = conn.execute(
            """SELECT score_rows, audit_rows FROM source_snapshots WHERE source = ? AND sha256 = ? AND status = 'parsed'
               ORDER BY retrieved_at DESC, rowid DESC LIMIT 1""", [spec.name, fetched.sha256]).fetchone()
        if rows is None:
            return None
        _record_attempt(conn, spec, context.run_id, url=fetched.url, retrieved_at=fetched.retrieved_at,
                        origin=fetched.origin, status="parsed", sha256=fetched.sha256, bytes_=fetched.bytes,
                        changed=fetched.changed, rows=rows)
        _record_documents(conn, spec, fetched)
    return refresh.reuse(what="its rows stay staged as they are", overrides=fetched.metadata())


def build_source_asset(spec: SourceSpec) -> dg.AssetsDefinition:
    @dg.asset(
        name=spec.asset_name,
        deps=["registry_benchmarks"],
        pool="duckdb",
        kinds={"duckdb", "python"},
        description=f"Scores scraped from {spec.url} ({spec.source_class_note}); staged as `{spec.staging_table}` "
        f"(reported costs: `{spec.cost_staging_table}`).",
        metadata={"source_url": spec.url},
    )
    def source_scores(context: dg.AssetExecutionContext, config: IngestConfig, fetcher: SourceFetcher,
                      duckdb: DuckDBResource) -> dg.MaterializeResult:
        registry = load_benchmark_registry()
        store: SnapshotStore = fetcher.store
        fetched, parsed, problem, status, attempt = None, None, None, "parsed", None
        try:
            fetched = spec.retrieve(fetcher)
            context.log.info(f"{spec.name}: {fetched.bytes} bytes from {fetched.origin}, sha256 {fetched.sha256}, changed={fetched.changed}")
        except FetchError as error:
            problem, status, attempt = str(error), "fetch_failed", error.attempt
        except OSError as error:
            # The download could not be stored (disk full, read-only folder): not bad input, so the run fails,
            # naming what it was storing where; nothing was recorded or staged, earlier snapshots are untouched.
            raise dg.Failure(description=f"{spec.name}: could not store the download of {spec.url} in the snapshot "
                             f"store {fetcher.snapshot_dir}: {error}") from error
        refresh = None
        if fetched is not None:
            # the publication scope covers every parser and the whole registry (the cost columns' fields too)
            refresh = StepRefresh(context, StepInputs({"download": fetched.sha256}, {
                "publication_specification": run_specification(context.run_id, "publication")}))
            if reused := _reuse_staged_snapshot(context, spec, fetched, refresh, duckdb):
                return reused
            try:
                parsed = spec.parse(spec.read(store, fetched.sha256), registry, fetched.sha256)
            except Exception as error:  # noqa: BLE001 - any parse failure of one source must not stop the others
                problem = str(error) if isinstance(error, SOURCE_ERRORS) else f"{type(error).__name__}: {error}"
                status = "parse_failed"
                context.log.exception(f"{spec.name}: snapshot {fetched.sha256} cannot be parsed")

        with duckdb.get_connection() as conn:
            ensure_source_tables(conn)
            _ensure_staging(conn, spec)
            last = _last_good(conn, spec)
            rejected = None
            if parsed is not None:
                problem = _shortfall(spec, parsed, last, config.max_row_loss_share, _rows_per_file(conn, spec))
                if problem is not None:
                    status, rejected, parsed = "rejected_shrunk", parsed, None
                elif parsed.file_errors:
                    status = "parsed_with_file_errors"
            if fetched is not None:
                _record_attempt(conn, spec, context.run_id, url=fetched.url, retrieved_at=fetched.retrieved_at,
                                origin=fetched.origin, status=status, sha256=fetched.sha256, bytes_=fetched.bytes,
                                changed=fetched.changed, parsed=parsed or rejected, error=problem)
            else:
                _record_attempt(conn, spec, context.run_id, url=spec.url, status=status, error=problem,
                                retrieved_at=attempt.retrieved_at if attempt else utc_now(),
                                origin=attempt.origin if attempt else ("mirror" if fetcher.mirror else "live"))
            if fetched is not None:
                _record_documents(conn, spec, fetched)
            if problem is not None:
                context.log.warning(problem)

            fallback_sha = None
            if parsed is None and last is not None:
                fallback_sha = last.sha256
                context.log.warning(f"{spec.name}: falling back to snapshot {fallback_sha} retrieved {last.retrieved_at}")
                parsed = spec.parse(spec.read(store, fallback_sha), registry, fallback_sha)
            if parsed is None:
                # No usable snapshot at all: stage what is there (nothing, on a first run) and say so; the
                # other sources still land in raw_scores. The WARN checks name the problem.
                parsed = ParseOutput(source=spec.name, snapshot_sha256=None)
                context.log.error(f"{spec.name}: no usable data: {problem}; no earlier snapshot parsed either")
            if problem is not None:
                reason = {"rejected_shrunk": "rejected_snapshot", "parse_failed": "unparsable_snapshot",
                          "fetch_failed": "fetch_failed"}[status]
                sha = rejected.snapshot_sha256 if rejected else (fetched.sha256 if fetched else None)
                parsed.audit.append({"source": spec.name, "snapshot_sha256": sha, "file": None, "row_number": None,
                                     "field": None, "reason": reason, "value": None,
                                     "detail": f"{problem}; using " + (f"snapshot {fallback_sha}" if fallback_sha else "no snapshot")})
            kept_files = _keep_last_good_files(conn, spec, parsed)
            _stage(conn, spec, parsed)
            benchmarks = count_by(conn, spec.staging_table, "benchmark")
            reasons = count_by(conn, spec.audit_table, "reason")
            staged = conn.execute(f"SELECT count(*) FROM {spec.staging_table}").fetchone()[0]
            staged_costs = conn.execute(f"SELECT count(*) FROM {spec.cost_staging_table}").fetchone()[0]
            audit_rows = conn.execute(f"SELECT count(*) FROM {spec.audit_table}").fetchone()[0]
            # what was staged, not what was downloaded: the same snapshot (or the same fallback) keeps the version
            staged_version = table_version(conn, spec.staging_table, spec.cost_staging_table, spec.audit_table)

        metadata: dict[str, object] = {
            "snapshot_sha256": parsed.snapshot_sha256 or "none",
            "status": status,
            "score_rows": staged,
            "score_rows_from_snapshot": len(parsed.scores),
            "score_rows_kept_from_earlier": staged - len(parsed.scores),
            "cost_rows": staged_costs,
            "files_kept_from_earlier": dg.MetadataValue.json(kept_files),
            "file_errors": dg.MetadataValue.json(parsed.file_errors),
            "audit_rows": audit_rows,
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
        if refresh is not None:  # a download: the next run may find the same bytes staged
            return refresh.computed(metadata, data_version=staged_version)
        return dg.MaterializeResult(metadata=metadata, data_version=dg.DataVersion(staged_version))

    return source_scores


source_assets = [build_source_asset(spec) for spec in SOURCES]


def _union_staging(conn, tables: dict[str, list[str]]) -> None:
    """Replace each contract table by the union of its sources' staging tables, in one transaction (a source
    that never ran has an empty staging table: it contributes nothing, not an error)."""
    ensure_source_tables(conn)
    for spec in SOURCES:
        _ensure_staging(conn, spec)
    conn.execute("BEGIN TRANSACTION")
    try:
        for table, staging in tables.items():
            conn.execute(f"DELETE FROM {table}")
            for name in staging:
                conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {name}")
        conn.execute("COMMIT")
    except Exception:
        conn.execute("ROLLBACK")
        raise


@dg.asset(
    deps=[spec.asset_name for spec in SOURCES],
    pool="duckdb",
    kinds={"duckdb"},
    description="Every published score of every source in one long table, with provenance; parse problems in `audit_ingest`.",
)
def raw_scores(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    with duckdb.get_connection() as conn:
        _union_staging(conn, {"raw_scores": [s.staging_table for s in SOURCES],
                              "audit_ingest": [s.audit_table for s in SOURCES]})
        total = conn.execute("SELECT count(*) FROM raw_scores").fetchone()[0]
        audit_total = conn.execute("SELECT count(*) FROM audit_ingest").fetchone()[0]
        per_source = count_by(conn, "raw_scores", "source")
        per_class = count_by(conn, "raw_scores", "source_class")
        n_benchmarks = conn.execute("SELECT count(DISTINCT benchmark) FROM raw_scores").fetchone()[0]
        n_ids = conn.execute("SELECT count(DISTINCT model_id) FROM raw_scores").fetchone()[0]
        snapshots = dict(conn.execute("SELECT source, any_value(snapshot_sha256) FROM raw_scores GROUP BY 1").fetchall())
        reasons = count_by(conn, "audit_ingest", "reason")
        version = table_version(conn, "raw_scores", "audit_ingest")
    context.log.info(f"raw_scores: {total} rows from {per_source}; {audit_total} audit rows; content {version[:12]}")
    return dg.MaterializeResult(
        data_version=dg.DataVersion(version),
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


@dg.asset(
    deps=[spec.asset_name for spec in SOURCES],
    pool="duckdb",
    kinds={"duckdb"},
    description="Every reported cost of every source in one long table (raw_costs), in US dollars per task by the "
    "registry's unit of its column, with the same row identity as raw_scores; unusable costs (0 = not reported, "
    "negative, a whole-run cost without a task count) are in `audit_ingest`. Same snapshots as the scores.",
)
def raw_costs(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    with duckdb.get_connection() as conn:
        _union_staging(conn, {"raw_costs": [s.cost_staging_table for s in SOURCES]})
        total = conn.execute("SELECT count(*) FROM raw_costs").fetchone()[0]
        per_source = count_by(conn, "raw_costs", "source")
        per_file = dict(conn.execute(
            "SELECT source || '/' || file || ' :: ' || cost_column, count(*) FROM raw_costs GROUP BY 1 ORDER BY 1").fetchall())
        per_unit = count_by(conn, "raw_costs", "cost_unit")
        staged_audit = " UNION ALL ".join(f"SELECT reason FROM {spec.audit_table}" for spec in SOURCES)
        audited = dict(conn.execute(
            f"SELECT reason, count(*) FROM ({staged_audit}) WHERE reason IN ('zero_cost_unknown', 'negative_cost', "
            "'cost_without_task_count') GROUP BY 1 ORDER BY 1").fetchall())
        version = table_version(conn, "raw_costs")
    context.log.info(f"raw_costs: {total} rows from {per_source}; costs audited at parse: {audited}")
    return dg.MaterializeResult(
        data_version=dg.DataVersion(version),
        metadata={
            "dagster/row_count": total,
            "rows_per_source": dg.MetadataValue.json(per_source),
            "rows_per_file_and_column": dg.MetadataValue.json({k: int(v) for k, v in per_file.items()}),
            "rows_per_unit_read": dg.MetadataValue.json(per_unit),
            "costs_audited_at_parse": dg.MetadataValue.json({k: int(v) for k, v in audited.items()}),
        }
    )
