"""Checks beside the ingest assets: freshness and provenance per source; table expectations on raw_scores."""

import datetime as dt
import os

import dagster as dg
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.alerts import scrape_alert, write_alert
from atlas_assets.defs.ingest.assets import SOURCES, SourceSpec
from atlas_assets.ingest.fetch import SourceFetcher
from atlas_assets.ingest.records import FILE_ERROR_REASONS, KEPT_ROWS_REASONS, UNREADABLE_ROW_REASONS
from atlas_assets.quality.expectations import Expectation, validate_frame

SOURCE_CLASSES = ["model_release", "evaluator_release", "benchmark_release"]

# Freshness: a source whose newest snapshot has stayed the same for longer than this is flagged (WARN).
MAX_SNAPSHOT_AGE_ENV = "ATLAS_MAX_SNAPSHOT_AGE_DAYS"
DEFAULT_MAX_SNAPSHOT_AGE_DAYS = 14.0


def max_snapshot_age_days() -> float:
    """The configured age (days) after which a source without new content is stale: $ATLAS_MAX_SNAPSHOT_AGE_DAYS,
    else 14."""
    value = os.environ.get(MAX_SNAPSHOT_AGE_ENV, "").strip()
    if not value:
        return DEFAULT_MAX_SNAPSHOT_AGE_DAYS
    try:
        days = float(value)
    except ValueError:
        raise ValueError(f"{MAX_SNAPSHOT_AGE_ENV}={value!r}: expected a number of days") from None
    if not days > 0:
        raise ValueError(f"{MAX_SNAPSHOT_AGE_ENV}={value!r}: expected a positive number of days")
    return days


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _age_days(since: str, now: dt.datetime) -> float:
    start = dt.datetime.fromisoformat(since)
    start = start if start.tzinfo else start.replace(tzinfo=dt.timezone.utc)  # recorded in UTC
    return (now - start).total_seconds() / 86400.0
PROTOCOLS = ["single", "average", "consensus", "best_of_n"]


def _listing(rows: list[tuple], limit: int = 20) -> str:
    return "\n".join(" | ".join("" if v is None else str(v) for v in row) for row in rows[:limit]) or "none"


def build_source_checks(spec: SourceSpec) -> list[dg.AssetChecksDefinition]:
    @dg.asset_check(asset=spec.asset_name, name="fresh_download_parsed", description=
                    "The latest retrieval attempt of the source was downloaded, parsed and accepted (WARN: a failed "
                    "download, a parse failure or a snapshot that lost most rows falls back to the last good snapshot).")
    def fresh_download_parsed(duckdb: DuckDBResource) -> dg.AssetCheckResult:
        with duckdb.get_connection() as conn:
            # Every attempt is a row, failed ones included, so the latest row is the latest news.
            row = conn.execute(
                """SELECT sha256, retrieved_at, parsed_ok, error, status, score_rows FROM source_snapshots
                   WHERE source = ? ORDER BY retrieved_at DESC, rowid DESC LIMIT 1""",
                [spec.name],
            ).fetchone()
        if row is None:
            return dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.WARN, metadata={"error": "no retrieval recorded"})
        return dg.AssetCheckResult(
            passed=bool(row[2]), severity=dg.AssetCheckSeverity.WARN,
            metadata={"sha256": row[0] or "none", "retrieved_at": row[1], "status": row[4] or "unknown",
                      "score_rows": row[5] if row[5] is not None else -1, "error": row[3] or "none"},
        )

    @dg.asset_check(asset=spec.asset_name, name="snapshot_recorded", blocking=True, description=
                    "Every staged row carries the sha256 of a snapshot that is stored, unaltered, in the snapshot store "
                    "(ERROR). No staged rows at all (no usable snapshot yet) is a WARN, so the other sources still land.")
    def snapshot_recorded(duckdb: DuckDBResource, fetcher: SourceFetcher) -> dg.AssetCheckResult:
        with duckdb.get_connection() as conn:
            hashes = [r[0] for r in conn.execute(f"SELECT DISTINCT snapshot_sha256 FROM {spec.staging_table}").fetchall()]
            rows = conn.execute(f"SELECT count(*) FROM {spec.staging_table}").fetchone()[0]
        if rows == 0:
            return dg.AssetCheckResult(
                passed=False, severity=dg.AssetCheckSeverity.WARN,
                metadata={"rows": 0, "snapshots": "none",
                          "problems": f"no rows staged for {spec.name}: no usable snapshot yet (see fresh_download_parsed)"},
            )
        store = fetcher.store
        problems = []
        for digest in hashes:
            if digest is None or not store.path_for(digest).exists():
                problems.append(f"{digest}: not in the snapshot store")
                continue
            try:
                spec.read(store, digest)  # a bundle: its manifest and every document it names
            except Exception as error:  # noqa: BLE001 - reported as the check's finding
                problems.append(str(error))
        return dg.AssetCheckResult(
            passed=not problems,
            metadata={"rows": rows, "snapshots": ", ".join(h or "NULL" for h in hashes), "problems": "; ".join(problems) or "none"},
        )

    @dg.asset_check(asset=spec.asset_name, name="every_file_read", description=
                    "Every file of the snapshot was read (WARN lists, by file, row and field, the files that could not "
                    "be read as a whole and kept their last good rows, and the rows that could not be read).")
    def every_file_read(duckdb: DuckDBResource) -> dg.AssetCheckResult:
        reasons = list(FILE_ERROR_REASONS + KEPT_ROWS_REASONS + UNREADABLE_ROW_REASONS)
        with duckdb.get_connection() as conn:
            found = conn.execute(
                f"""SELECT file, row_number, field, reason, detail FROM {spec.audit_table}
                    WHERE reason IN ({", ".join("?" * len(reasons))}) ORDER BY file, row_number NULLS FIRST, reason""",
                reasons,
            ).fetchall()
        files = sorted({row[0] for row in found if row[3] in FILE_ERROR_REASONS + KEPT_ROWS_REASONS})
        return dg.AssetCheckResult(
            passed=not found, severity=dg.AssetCheckSeverity.WARN,
            metadata={"findings": len(found), "unreadable_files": ", ".join(files) or "none",
                      "problems": _listing(found, limit=50)},
        )

    @dg.asset_check(asset=spec.asset_name, name="scrape_succeeded", description=
                    "The latest scrape of the source downloaded something (ERROR when the download itself failed: source "
                    "down, 404 or 5xx after the retries, timeout, truncated body, size cap). The last good snapshot stays "
                    "in use and downstream keeps running on it; an unusable download is fresh_download_parsed's WARN.")
    def scrape_succeeded(context: dg.AssetCheckExecutionContext, duckdb: DuckDBResource) -> dg.AssetCheckResult:
        with duckdb.get_connection() as conn:
            latest = conn.execute(
                """SELECT status, retrieved_at, origin, error FROM source_snapshots
                   WHERE source = ? ORDER BY retrieved_at DESC, rowid DESC LIMIT 1""", [spec.name],
            ).fetchone()
            in_use = conn.execute(
                f"SELECT DISTINCT snapshot_sha256 FROM {spec.staging_table} ORDER BY 1").fetchall()
        if latest is None:
            return dg.AssetCheckResult(passed=False, metadata={"error": "no scrape recorded"})
        status, attempted_at, origin, error = latest
        snapshots = ", ".join(r[0] or "NULL" for r in in_use) or "none"
        if status == "fetch_failed":
            # the run goes on (not blocking), so the run-failure sensor would not hear of it: alert here
            write_alert(scrape_alert(context, spec.asset_name, f"{spec.name}: scrape failed at {attempted_at}: {error}; "
                                     f"snapshots in use: {snapshots}"))
        return dg.AssetCheckResult(
            passed=status != "fetch_failed",
            metadata={"status": status or "unknown", "attempted_at": attempted_at, "origin": origin,
                      "error": (error or "none") if status == "fetch_failed" else "none",
                      "snapshots_in_use": snapshots},
        )

    @dg.asset_check(asset=spec.asset_name, name="snapshot_not_stale", description=
                    "The source produced new content within the configured age (ATLAS_MAX_SNAPSHOT_AGE_DAYS, default 14 "
                    "days): WARN when its newest good snapshot was first retrieved longer ago, whether the source kept "
                    "serving the same bytes or the scrapes since then failed.")
    def snapshot_not_stale(duckdb: DuckDBResource) -> dg.AssetCheckResult:
        max_age = max_snapshot_age_days()
        with duckdb.get_connection() as conn:
            # the newest good snapshot, and when this stretch of it began (after the last different good one)
            row = conn.execute(
                """WITH good AS (SELECT sha256, retrieved_at FROM source_snapshots
                                 WHERE source = ? AND parsed_ok AND sha256 IS NOT NULL AND coalesce(score_rows, 0) > 0),
                        newest AS (SELECT sha256 FROM good ORDER BY retrieved_at DESC LIMIT 1),
                        other AS (SELECT max(retrieved_at) AS since FROM good WHERE sha256 <> (SELECT sha256 FROM newest))
                   SELECT (SELECT sha256 FROM newest), min(retrieved_at), max(retrieved_at) FROM good
                   WHERE sha256 = (SELECT sha256 FROM newest) AND retrieved_at > coalesce((SELECT since FROM other), '')""",
                [spec.name],
            ).fetchone()
            last_attempt = conn.execute("SELECT max(retrieved_at) FROM source_snapshots WHERE source = ?", [spec.name]).fetchone()[0]
        if row is None or row[0] is None:
            return dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.WARN,
                                       metadata={"error": "no good snapshot yet", "max_age_days": max_age})
        sha256, first_seen, last_seen = row
        age = _age_days(first_seen, _utc_now())
        return dg.AssetCheckResult(
            passed=age <= max_age, severity=dg.AssetCheckSeverity.WARN,
            metadata={"newest_snapshot": sha256, "first_retrieved_at": first_seen, "last_retrieved_at": last_seen,
                      "last_attempt_at": last_attempt or "none", "age_days": round(age, 6), "max_age_days": max_age},
        )

    return [fresh_download_parsed, snapshot_recorded, every_file_read, scrape_succeeded, snapshot_not_stale]


source_checks = [check for spec in SOURCES for check in build_source_checks(spec)]


@dg.asset_check(asset="raw_scores", blocking=True, description="Table expectations (Great Expectations): keys, scores, provenance.")
def raw_scores_expectations(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        frame = conn.execute("SELECT * FROM raw_scores").df()
    return validate_frame(
        frame,
        [
            Expectation("ExpectTableRowCountToBeBetween", min_value=1),
            Expectation("ExpectColumnValuesToNotBeNull", column="row_key"),
            Expectation("ExpectColumnValuesToBeUnique", column="row_key"),
            Expectation("ExpectColumnValuesToNotBeNull", column="model_id"),
            Expectation("ExpectColumnValuesToNotBeNull", column="benchmark"),
            Expectation("ExpectColumnValuesToNotBeNull", column="score"),
            Expectation("ExpectColumnValuesToBeInSet", column="source_class", value_set=SOURCE_CLASSES),
            Expectation("ExpectColumnValuesToBeInSet", column="sampling_protocol", value_set=PROTOCOLS),
            Expectation("ExpectColumnValuesToMatchRegex", column="snapshot_sha256", regex=r"^[0-9a-f]{64}$"),
            Expectation("ExpectColumnValuesToBeBetween", column="shots", min_value=0, max_value=100),
        ],
        suite_name="raw_scores",
    )


@dg.asset_check(asset="raw_scores", blocking=True, description="Every benchmark in raw_scores has a registry entry.")
def raw_scores_benchmarks_registered(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        missing = conn.execute(
            "SELECT benchmark, count(*) FROM raw_scores WHERE benchmark NOT IN (SELECT benchmark FROM registry_benchmarks) GROUP BY 1 ORDER BY 1"
        ).fetchall()
    return dg.AssetCheckResult(passed=not missing, metadata={"unregistered_benchmarks": _listing(missing)})


@dg.asset_check(asset="raw_scores", description="Scores outside their benchmark's declared range (WARN: the guards downstream decide).")
def raw_scores_within_declared_range(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        outside = conn.execute(
            """SELECT r.row_key, r.model_id, r.score, b.range_min, b.range_max
               FROM raw_scores r JOIN registry_benchmarks b USING (benchmark)
               WHERE b.kind = 'bounded' AND (r.score < b.range_min OR r.score > b.range_max) ORDER BY 1"""
        ).fetchall()
    return dg.AssetCheckResult(passed=not outside, severity=dg.AssetCheckSeverity.WARN,
                               metadata={"outside_range": len(outside), "examples": _listing(outside)})


@dg.asset_check(asset="raw_scores", description="Every column and file the sources publish is registered, and every "
                "registered headline is still published (WARN lists the unknown or vanished ones; optional columns absent "
                "from a file stay in audit_ingest as 'missing_column').")
def raw_scores_nothing_unregistered(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        unknown = conn.execute(
            """SELECT source, file, field, reason FROM audit_ingest
               WHERE reason IN ('unregistered_file', 'unregistered_column', 'missing_headline_column')
               ORDER BY 1, 2, 3"""
        ).fetchall()
    return dg.AssetCheckResult(passed=not unknown, severity=dg.AssetCheckSeverity.WARN,
                               metadata={"findings": len(unknown), "examples": _listing(unknown)})


@dg.asset_check(asset="raw_costs", blocking=True, description="Every staged cost is a positive, finite number of US "
                "dollars per task read in a registered unit, and a whole-run figure says how many tasks divided it.")
def raw_costs_well_formed(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        bad = conn.execute(
            "SELECT row_key, usd_per_task, cost_unit, tasks FROM raw_costs WHERE NOT (usd_per_task > 0) "
            "OR NOT isfinite(usd_per_task) OR cost_unit NOT IN ('usd_per_task', 'usd_per_run') "
            "OR (cost_unit = 'usd_per_run' AND NOT (tasks > 0))").df()
        rows = conn.execute("SELECT count(*) FROM raw_costs").fetchone()[0]
        without_score = conn.execute(
            "SELECT count(*) FROM raw_costs AS c WHERE NOT EXISTS (SELECT 1 FROM raw_scores AS s "
            "WHERE s.source = c.source AND s.file = c.file AND s.row_number = c.row_number)").fetchone()[0]
    return dg.AssetCheckResult(passed=bad.empty, metadata={
        "rows": rows, "malformed": len(bad), "examples": dg.MetadataValue.json(bad.head(10).astype(str).to_dict("records")),
        "rows_whose_record_has_no_score": without_score})
