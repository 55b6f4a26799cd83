"""Ingest and registry on the real mirror (Epoch Benchmarking Hub, April 2026; SWE-bench leaderboards)."""

from __future__ import annotations

import hashlib
import os
import subprocess

import dagster as dg
import duckdb
import pytest

from atlas_assets import settings
from atlas_assets.defs.ingest.assets import raw_costs, raw_scores, source_assets
from atlas_assets.defs.ingest import checks as ingest_checks
from atlas_assets.defs.registry import checks as registry_checks
from atlas_assets.defs.registry.assets import registry_benchmarks, registry_model_ids
from atlas_assets.ingest.fetch import mirror_path
from atlas_assets.resources import build_resources
from tests.conftest import MIRROR, PROJECT_ROOT, copy_real_run

pytestmark = pytest.mark.slow

EPOCH_ZIP = MIRROR / "epoch.ai" / "data" / "benchmark_data.zip"
SWE_JSON = MIRROR / "raw.githubusercontent.com" / "SWE-bench" / "swe-bench.github.io" / "master" / "data" / "leaderboards.json"
INGEST_ASSETS = [registry_benchmarks, *source_assets, raw_scores, raw_costs, registry_model_ids]
INGEST_CHECKS = [*dg.load_asset_checks_from_modules([ingest_checks, registry_checks])]


def materialize_ingest() -> dg.ExecuteInProcessResult:
    """Registry and ingest assets with every check beside them, in process."""
    return dg.materialize([*INGEST_ASSETS, *INGEST_CHECKS], resources=build_resources())


class Database:
    """Read-only queries that close their connection at once, so later runs can write again."""

    def execute(self, sql: str, params=None):
        with duckdb.connect(str(settings.duckdb_path()), read_only=True) as conn:
            return _Rows(conn.execute(sql, params or []).fetchall())


class _Rows(list):
    def fetchall(self):
        return list(self)

    def fetchone(self):
        return self[0] if self else None


@pytest.fixture
def ingested(real_run, monkeypatch):
    """The session's one real registry + ingest + clean run (tests/conftest.py `real_run`)."""
    home, result = real_run
    monkeypatch.setenv("ATLAS_HOME", str(home))
    monkeypatch.delenv("ATLAS_DUCKDB", raising=False)
    monkeypatch.setenv("ATLAS_MIRROR", str(MIRROR))
    assert result.success
    return result, Database()


@pytest.fixture
def after_a_good_run(real_run, atlas_env):
    """A fresh ATLAS_HOME holding a copy of a good real run (the shared one)."""
    return copy_real_run(real_run, atlas_env)


def test_real_sources_arrive_with_provenance(ingested):
    result, conn = ingested
    epoch_sha = hashlib.sha256(EPOCH_ZIP.read_bytes()).hexdigest()
    swe_sha = hashlib.sha256(SWE_JSON.read_bytes()).hexdigest()
    snapshots = dict(conn.execute("SELECT source, sha256 FROM source_snapshots").fetchall())
    assert {k: snapshots[k] for k in ("epoch_hub", "swe_bench")} == {"epoch_hub": epoch_sha, "swe_bench": swe_sha}
    assert dict(conn.execute("SELECT source, any_value(snapshot_sha256) FROM raw_scores GROUP BY 1").fetchall()) == snapshots
    # a multi-document source: its snapshot is the bundle, whose documents are the mirror's files byte for byte
    documents = conn.execute("SELECT source, snapshot_sha256, url, sha256 FROM source_documents ORDER BY 1, 3").fetchall()
    assert {row[0] for row in documents} == {"aider", "tau2_bench", "arc_prize"}
    for source, bundle, url, sha in documents:
        assert bundle == snapshots[source]
        assert sha == hashlib.sha256(mirror_path(MIRROR, url).read_bytes()).hexdigest(), url

    per_source = dict(conn.execute("SELECT source, count(*) FROM raw_scores GROUP BY 1").fetchall())
    assert per_source["epoch_hub"] >= 3316  # every row with a model version and a numeric headline, plus secondary columns
    assert 250 <= per_source["swe_bench"] <= 322
    metadata = result.asset_materializations_for_node("epoch_hub_scores")[0].metadata
    assert metadata["sha256"].value == epoch_sha and metadata["origin"].value == "mirror"
    assert metadata["changed_since_last_run"].value is True


def test_every_benchmark_and_identifier_is_registered(ingested):
    _result, conn = ingested
    unregistered = conn.execute(
        "SELECT DISTINCT benchmark FROM raw_scores WHERE benchmark NOT IN (SELECT benchmark FROM registry_benchmarks)"
    ).fetchall()
    assert unregistered == []
    n_benchmarks = conn.execute("SELECT count(DISTINCT benchmark) FROM raw_scores").fetchone()[0]
    assert n_benchmarks >= 49 + 4  # every Epoch benchmark file, and the SWE-bench boards beyond Verified
    unregistered_columns = conn.execute(
        "SELECT file, field FROM audit_ingest WHERE reason IN ('unregistered_column', 'unregistered_file', 'missing_headline_column')"
    ).fetchall()
    assert unregistered_columns == []
    row = conn.execute(
        "SELECT model, reasoning_state FROM registry_model_ids WHERE model_id = 'gpt-5.2-2025-12-11_xhigh'"
    ).fetchone()
    assert row == ("gpt-5.2-2025-12-11", "xhigh")
    unknown = conn.execute(
        "SELECT count(*) FROM registry_model_ids WHERE model IS NULL OR reasoning_state IS NULL"
    ).fetchone()[0]
    audited = conn.execute(
        "SELECT count(DISTINCT subject) FROM audit_registry WHERE kind IN ('unknown_model_id', 'unknown_reasoning_label')"
    ).fetchone()[0]
    assert unknown == audited  # every unknown identifier is in the audit, none is guessed


def test_checks_pass_on_real_data(ingested):
    result, _conn = ingested
    evaluations = {(e.asset_key.to_user_string(), e.check_name): e for e in result.get_asset_check_evaluations()}
    ingest_check_keys = {(key.asset_key.to_user_string(), key.name) for check in INGEST_CHECKS for key in check.check_keys}
    assert ingest_check_keys <= set(evaluations)  # every ingest and registry check ran
    evaluations = {key: evaluations[key] for key in ingest_check_keys}
    assert evaluations[("raw_scores", "raw_scores_nothing_unregistered")].passed
    blocking_failures = [key for key, e in evaluations.items() if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR]
    assert blocking_failures == []
    # Unknown identifiers exist in the real data (e.g. Epoch's `_unknown` suffix): the WARN check says so.
    unmapped = evaluations[("registry_model_ids", "registry_model_ids_complete")]
    assert not unmapped.passed and unmapped.metadata["unmapped_identifiers"].value > 0


def test_rerun_keeps_snapshots_and_reports_unchanged(after_a_good_run):
    result = materialize_ingest()
    metadata = result.asset_materializations_for_node("epoch_hub_scores")[0].metadata
    assert metadata["changed_since_last_run"].value is False
    for bundle_source in ("aider_scores", "tau2_bench_scores", "arc_prize_scores"):
        assert result.asset_materializations_for_node(bundle_source)[0].metadata["changed_since_last_run"].value is False
    stored = list((settings.snapshot_dir() / "sha256").rglob("*"))
    # Epoch's zip, SWE-bench's JSON, and per multi-document source its documents plus one bundle manifest
    # (Aider 2, tau2-bench manifest + 64 submissions, ARC Prize 3): nothing stored twice on a rerun
    assert len([p for p in stored if p.is_file()]) == 2 + (2 + 1) + (65 + 1) + (3 + 1)


def test_refresh_with_changed_source_keeps_the_old_snapshot(atlas_env, tmp_path):
    """The mirror moves from the 2026-04-14 export to the 2026-04-17 one: a new snapshot, the old one kept."""
    older = MIRROR.parent / "snapshots" / "epoch-2026-04-14" / "benchmark_data.zip"
    staged = tmp_path / "mirror"
    (staged / "epoch.ai" / "data").mkdir(parents=True)
    (staged / "epoch.ai" / "data" / "benchmark_data.zip").symlink_to(older)
    swe_target = staged / SWE_JSON.relative_to(MIRROR)
    swe_target.parent.mkdir(parents=True)
    swe_target.symlink_to(SWE_JSON)
    os.environ["ATLAS_MIRROR"] = str(staged)
    first = materialize_ingest()
    os.environ["ATLAS_MIRROR"] = str(MIRROR)
    second = materialize_ingest()
    old_sha = first.asset_materializations_for_node("epoch_hub_scores")[0].metadata["sha256"].value
    new = second.asset_materializations_for_node("epoch_hub_scores")[0].metadata
    assert new["changed_since_last_run"].value is True and new["previous_sha256"].value == old_sha
    assert (settings.snapshot_dir() / "sha256" / old_sha[:2] / old_sha).read_bytes() == older.read_bytes()


def test_broken_source_falls_back_and_does_not_stop_the_other(after_a_good_run, tmp_path):
    broken = tmp_path / "broken_mirror"
    (broken / "epoch.ai" / "data").mkdir(parents=True)
    (broken / "epoch.ai" / "data" / "benchmark_data.zip").write_text("<html><body>Service unavailable</body></html>")
    swe_target = broken / SWE_JSON.relative_to(MIRROR)
    swe_target.parent.mkdir(parents=True)
    swe_target.symlink_to(SWE_JSON)
    os.environ["ATLAS_MIRROR"] = str(broken)
    result = materialize_ingest()
    assert result.success
    metadata = result.asset_materializations_for_node("epoch_hub_scores")[0].metadata
    assert "HTML page" in metadata["error"].value and metadata["fresh"].value is False
    assert metadata["fallback_snapshot"].value == hashlib.sha256(EPOCH_ZIP.read_bytes()).hexdigest()
    conn = Database()
    assert conn.execute("SELECT count(*) FROM raw_scores WHERE source = 'epoch_hub'").fetchone()[0] >= 3316
    failed = dict(conn.execute("SELECT source, error FROM source_snapshots WHERE NOT parsed_ok").fetchall())
    assert "HTML page" in failed.pop("epoch_hub")
    # the multi-document sources the broken mirror does not serve fall back too, naming the missing document
    assert set(failed) == {"aider", "tau2_bench", "arc_prize"}
    assert all("of the bundle" in error for error in failed.values())
    kept = dict(conn.execute("SELECT source, count(*) FROM raw_scores GROUP BY 1").fetchall())
    assert (kept["aider"], kept["tau2_bench"], kept["arc_prize"]) == (161, 142, 589)


def test_cli_materializes_ingest_with_the_project_instance(atlas_env, tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((PROJECT_ROOT / "dagster.yaml").read_text())
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    selection = ",".join(asset.key.to_user_string() for asset in INGEST_ASSETS)
    completed = subprocess.run(
        [str(PROJECT_ROOT / ".venv" / "bin" / "dagster"), "asset", "materialize", "-m", "atlas_assets.definitions", "--select", selection],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert Database().execute("SELECT count(*) FROM raw_scores").fetchone()[0] > 3000
    assert "RUN_SUCCESS" in completed.stdout + completed.stderr


def test_broken_real_mirror_loses_nothing_and_invents_nothing(after_a_good_run, tmp_path):
    """Issue 7 items 10, 13, 14 on the real sources: SWE-bench boards emptied, one Epoch file without its
    'Model version' column, another header-only; the rows in use stay those of the last good run."""
    import io
    import json
    import zipfile

    conn = Database()
    before = dict(conn.execute("SELECT file, count(*) FROM raw_scores GROUP BY 1").fetchall())
    ids_before = conn.execute("SELECT row_key, model_id FROM raw_scores WHERE file = 'arc_agi_external.csv' ORDER BY 1").fetchall()

    broken = tmp_path / "broken_mirror"
    source = zipfile.ZipFile(EPOCH_ZIP)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename.endswith("arc_agi_external.csv"):
                data = data.replace(b"Model version,", b"Model,", 1)  # the identifier column renamed
            elif info.filename.endswith("arc_agi_2_external.csv"):
                data = data.splitlines(keepends=True)[0]  # header only
            target.writestr(info, data)
    (broken / "epoch.ai" / "data").mkdir(parents=True)
    (broken / "epoch.ai" / "data" / "benchmark_data.zip").write_bytes(buffer.getvalue())
    document = json.loads(SWE_JSON.read_bytes())
    for board in document["leaderboards"]:
        board["results"] = []
    swe_target = broken / SWE_JSON.relative_to(MIRROR)
    swe_target.parent.mkdir(parents=True)
    swe_target.write_text(json.dumps(document))
    os.environ["ATLAS_MIRROR"] = str(broken)
    result = materialize_ingest()

    assert result.success
    after = dict(conn.execute("SELECT file, count(*) FROM raw_scores GROUP BY 1").fetchall())
    assert after == before
    assert conn.execute("SELECT row_key, model_id FROM raw_scores WHERE file = 'arc_agi_external.csv' ORDER BY 1").fetchall() == ids_before
    evaluations = {(e.asset_key.to_user_string(), e.check_name): e for e in result.get_asset_check_evaluations()}
    swe_fresh = evaluations[("swe_bench_scores", "fresh_download_parsed")]
    assert not swe_fresh.passed and "yields 0 score rows against 322" in swe_fresh.metadata["error"].value
    files = evaluations[("epoch_hub_scores", "every_file_read")]
    assert not files.passed
    assert "arc_agi_external.csv" in files.metadata["unreadable_files"].value
    assert "arc_agi_2_external.csv" in files.metadata["unreadable_files"].value
    errors = {key for key, e in evaluations.items() if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR}
    # the three bundle sources are not in the broken mirror: their scrape fails (ERROR, not blocking), they keep
    # their last good rows (asserted above with every file's count), and nothing downstream is stopped
    unreachable = {(f"{name}_scores", "scrape_succeeded") for name in ("aider", "tau2_bench", "arc_prize")}
    assert errors == unreachable and not any(evaluations[key].blocking for key in unreachable)
