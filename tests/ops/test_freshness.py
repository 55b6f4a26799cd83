"""Freshness per source: ERROR when the scrape itself fails (the last good snapshot stays in use, nothing
downstream stops), WARN when the newest snapshot is older than the configured age (ATLAS_MAX_SNAPSHOT_AGE_DAYS).

The real source assets and checks run in process on a small offline mirror written here (the helpers of
tests/ingest/test_source_assets.py), against a real DuckDB file.
"""

from __future__ import annotations

import datetime as dt
import json

import dagster as dg
import pytest

from atlas_assets.defs.alerts import alerts_log_path
from atlas_assets.defs.ingest import assets as ingest_assets
from atlas_assets.defs.ingest import checks as ingest_checks
from atlas_assets.defs.ingest.checks import MAX_SNAPSHOT_AGE_ENV
from atlas_assets.registry.benchmarks import load_benchmark_registry
from tests.ingest.test_source_assets import FIXTURES, Mirror, checks, mc, query, run, sha, swe


@pytest.fixture
def mirror(tmp_path, monkeypatch) -> Mirror:
    monkeypatch.setenv("ATLAS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ATLAS_DUCKDB", raising=False)
    monkeypatch.delenv(MAX_SNAPSHOT_AGE_ENV, raising=False)
    monkeypatch.setenv("ATLAS_MIRROR", str(tmp_path / "mirror"))
    registry = load_benchmark_registry(FIXTURES / "registry.yaml")
    monkeypatch.setattr(ingest_assets, "load_benchmark_registry", lambda: registry)
    return Mirror(tmp_path / "mirror")


def swe_alerts() -> list[dict]:
    lines = alerts_log_path().read_text().splitlines() if alerts_log_path().exists() else []
    return [alert for alert in map(json.loads, lines)
            if any(check["asset"] == "swe_bench_scores" for check in alert["failed_checks"])]


def test_a_failed_scrape_is_an_error_while_the_last_good_snapshot_stays_in_use(mirror):
    mirror.sources({"toy_mc.csv": mc(2)}, swe(3))
    first = run()
    assert checks(first)[("swe_bench_scores", "scrape_succeeded")].passed
    assert swe_alerts() == []  # (sources this small mirror does not serve are alerted: they fail to scrape)
    mirror.sources({"toy_mc.csv": mc(2)}, None)  # the SWE-bench download fails (the mirror has no file)
    result = run()
    # one line in the alerts log, though the run itself succeeds
    [alert] = swe_alerts()
    assert alert["run_id"] == result.run_id
    assert alert["failed_checks"] == [{"check": "scrape_succeeded", "asset": "swe_bench_scores", "severity": "ERROR"}]
    assert "swe_bench: scrape failed" in alert["message"] and "offline mirror has no file" in alert["message"]
    assert sha(swe(3)) in alert["message"]

    failed = checks(result)[("swe_bench_scores", "scrape_succeeded")]
    assert not failed.passed and failed.severity == dg.AssetCheckSeverity.ERROR
    assert failed.metadata["status"].value == "fetch_failed"
    assert "offline mirror has no file" in failed.metadata["error"].value
    assert failed.metadata["snapshots_in_use"].value == sha(swe(3))
    assert checks(result)[("epoch_hub_scores", "scrape_succeeded")].passed
    # not blocking: the run succeeds and raw_scores is rebuilt, the failed source on its last good rows
    assert result.success
    assert "raw_scores" in {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert query("SELECT source, count(*), any_value(snapshot_sha256) FROM raw_scores GROUP BY 1 ORDER BY 1") == [
        ("epoch_hub", 2, query("SELECT sha256 FROM source_snapshots WHERE source = 'epoch_hub' LIMIT 1")[0][0]),
        ("swe_bench", 3, sha(swe(3))),
    ]
    # the failed scrape is on record, and the next good scrape clears the error
    mirror.sources({"toy_mc.csv": mc(2)}, swe(3))
    assert checks(run())[("swe_bench_scores", "scrape_succeeded")].passed
    assert len(swe_alerts()) == 1


class Clock:
    """The checks' clock, moved forward by whole days (retrieval times stay the real ones)."""

    def __init__(self, monkeypatch) -> None:
        self.offset = dt.timedelta(0)
        monkeypatch.setattr(ingest_checks, "_utc_now", lambda: dt.datetime.now(dt.timezone.utc) + self.offset)

    def days_later(self, days: float) -> None:
        self.offset = dt.timedelta(days=days)


def test_a_source_without_new_content_for_the_configured_age_is_stale(mirror, monkeypatch):
    clock = Clock(monkeypatch)
    mirror.sources({"toy_mc.csv": mc(2)}, swe(3))
    first = checks(run())[("swe_bench_scores", "snapshot_not_stale")]
    assert first.passed and first.metadata["max_age_days"].value == 14.0  # the default age
    first_seen = first.metadata["first_retrieved_at"].value

    # 15 days on, the source still serves the same bytes: still the snapshot first retrieved then, too old
    clock.days_later(15)
    stale = checks(run())[("swe_bench_scores", "snapshot_not_stale")]
    assert not stale.passed and stale.severity == dg.AssetCheckSeverity.WARN
    assert stale.metadata["newest_snapshot"].value == sha(swe(3))
    assert stale.metadata["first_retrieved_at"].value == first_seen
    assert 15 <= stale.metadata["age_days"].value < 15.1
    # the age is configurable
    monkeypatch.setenv(MAX_SNAPSHOT_AGE_ENV, "30")
    relaxed = checks(run())[("swe_bench_scores", "snapshot_not_stale")]
    assert relaxed.passed and relaxed.metadata["max_age_days"].value == 30.0
    monkeypatch.delenv(MAX_SNAPSHOT_AGE_ENV)

    # new content is a new snapshot, fresh again; the other source kept its bytes and stays stale
    mirror.sources({"toy_mc.csv": mc(2)}, swe(4))
    clock.days_later(0)
    assert checks(run())[("swe_bench_scores", "snapshot_not_stale")].passed
    clock.days_later(15)
    result = checks(run())
    assert not result[("epoch_hub_scores", "snapshot_not_stale")].passed
    newer = result[("swe_bench_scores", "snapshot_not_stale")]
    assert newer.metadata["newest_snapshot"].value == sha(swe(4))
    assert newer.metadata["first_retrieved_at"].value > first_seen

    # content that flips back to an older snapshot starts a new stretch: its age counts from its return
    mirror.sources({"toy_mc.csv": mc(2)}, swe(3))
    clock.days_later(0)
    back = checks(run())[("swe_bench_scores", "snapshot_not_stale")]
    assert back.passed and back.metadata["newest_snapshot"].value == sha(swe(3))
    assert back.metadata["first_retrieved_at"].value > newer.metadata["first_retrieved_at"].value
    assert back.metadata["age_days"].value < 0.01


def test_failed_scrapes_age_the_snapshot_in_use(mirror, monkeypatch):
    clock = Clock(monkeypatch)
    mirror.sources({"toy_mc.csv": mc(2)}, swe(3))
    run()
    mirror.sources({"toy_mc.csv": mc(2)}, None)
    clock.days_later(20)
    found = checks(run())
    assert not found[("swe_bench_scores", "scrape_succeeded")].passed
    stale = found[("swe_bench_scores", "snapshot_not_stale")]
    assert not stale.passed and stale.metadata["newest_snapshot"].value == sha(swe(3))
    assert stale.metadata["last_attempt_at"].value > stale.metadata["last_retrieved_at"].value


def error_messages(error) -> str:
    messages = []
    while error is not None:
        messages.append(error.message)
        error = error.cause
    return "\n".join(messages)


def test_a_bad_age_setting_names_the_variable(mirror, monkeypatch):
    mirror.sources({"toy_mc.csv": mc(2)}, swe(3))
    monkeypatch.setenv(MAX_SNAPSHOT_AGE_ENV, "two weeks")
    result = run()
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failures and all("snapshot_not_stale" in e.step_key for e in failures)
    assert all(f"{MAX_SNAPSHOT_AGE_ENV}='two weeks': expected a number of days" in error_messages(e.event_specific_data.error)
               for e in failures)
