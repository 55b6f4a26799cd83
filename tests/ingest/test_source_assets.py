"""The ingest assets and their checks on broken mirrors: nothing lost, nothing invented (issue 7 items 10, 11, 13, 14).

Each test runs the real assets in process against a real DuckDB file and a small offline
mirror written here, read with the fixture registry. A first run lands good data; the next
run feeds a broken download and the test asserts what lands in raw_scores, what is audited,
and which check says so.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from atlas_assets import settings
from atlas_assets.defs.ingest import assets as ingest_assets
from atlas_assets.defs.ingest.assets import raw_costs, raw_scores, source_assets
from atlas_assets.defs.ingest.checks import source_checks
from atlas_assets.ingest import epoch, swebench
from atlas_assets.ingest.fetch import mirror_path
from atlas_assets.registry.benchmarks import load_benchmark_registry
from atlas_assets.resources import build_resources

FIXTURES = Path(__file__).parent / "fixtures"
MC_HEADER = "Model version,mean_score,Best score (across scorers),Release date,Organization,stderr,Started at\n"
MC_ROW = "model-{i},0.5,0.{i},2025-01-01,Org,0.01,2026-01-01\n"
AGENT_HEADER = "Model version,Name,Agent,Shots,Release date,Source,Score (%),Long tasks (%)\n"
AGENT_ROW = "agent-model-{i},Agent Model {i},Forge,0,2025-11-18,Toy Leaderboard,0.{i},0.1\n"


def mc(n: int) -> str:
    return MC_HEADER + "".join(MC_ROW.format(i=i) for i in range(1, n + 1))


def agent(n: int) -> str:
    return AGENT_HEADER + "".join(AGENT_ROW.format(i=i) for i in range(1, n + 1))


def zip_of(members: dict[str, str | bytes]) -> bytes:
    """Deterministic bytes (fixed member times), so a test can name the snapshot by its hash."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as handle:
        for name, data in members.items():
            handle.writestr(zipfile.ZipInfo(name, date_time=(2026, 4, 1, 0, 0, 0)), data)
    return buffer.getvalue()


def swe(n: int, costs: list | None = None) -> bytes:
    costs = costs or [None] * n
    results = [{"name": f"Agent + M{i}", "resolved": str(40 + i), "date": "2025-11-20", "cost": costs[i - 1],
                "tags": [f"Model: model-{i}", "System: Attempts - 1"]} for i in range(1, n + 1)]
    return json.dumps({"leaderboards": [{"name": "Toy", "results": results}]}).encode()


class Mirror:
    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, url: str, content: bytes | None) -> None:
        path = mirror_path(self.root, url)
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(content)

    def sources(self, epoch_members: dict | None, swe_doc: bytes | None) -> None:
        self.put(epoch.URL, None if epoch_members is None else zip_of(epoch_members))
        self.put(swebench.URL, swe_doc)


@pytest.fixture
def mirror(tmp_path, monkeypatch) -> Mirror:
    monkeypatch.setenv("ATLAS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ATLAS_DUCKDB", raising=False)
    monkeypatch.setenv("ATLAS_MIRROR", str(tmp_path / "mirror"))
    registry = load_benchmark_registry(FIXTURES / "registry.yaml")
    monkeypatch.setattr(ingest_assets, "load_benchmark_registry", lambda: registry)
    return Mirror(tmp_path / "mirror")


def run(selection=None, **config) -> dg.ExecuteInProcessResult:
    selection = selection or [*source_assets, raw_scores, *source_checks]
    run_config = {"ops": {name: {"config": values} for name, values in config.items()}}
    return dg.materialize(selection, resources=build_resources(), run_config=run_config, raise_on_error=False)


def query(sql: str, params=None) -> list[tuple]:
    with duckdb.connect(str(settings.duckdb_path()), read_only=True) as conn:
        return conn.execute(sql, params or []).fetchall()


def checks(result) -> dict[tuple[str, str], dg.AssetCheckEvaluation]:
    return {(e.asset_key.to_user_string(), e.check_name): e for e in result.get_asset_check_evaluations()}


def rows_by_file(source: str) -> dict[str, int]:
    return dict(query("SELECT file, count(*) FROM raw_scores WHERE source = ? GROUP BY 1", [source]))


def sha(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


# --- item 10 -------------------------------------------------------------------------------------

def test_structurally_empty_document_is_not_a_good_snapshot_and_the_other_source_still_lands(mirror):
    mirror.sources({"toy_mc.csv": mc(2)}, swe(3))
    assert run().success
    good_swe = sha(swe(3))

    empty = json.dumps({"leaderboards": [{"name": "Toy", "results": []}]}).encode()
    mirror.sources({"toy_mc.csv": mc(3)}, empty)
    result = run()
    assert result.success
    # The other source's fresh rows land; the broken one keeps its last good snapshot's rows.
    assert query("SELECT count(*), any_value(snapshot_sha256) FROM raw_scores WHERE source = 'epoch_hub'") == [
        (3, sha(zip_of({"toy_mc.csv": mc(3)})))]
    assert query("SELECT count(*), any_value(snapshot_sha256) FROM raw_scores WHERE source = 'swe_bench'") == [(3, good_swe)]
    # The empty snapshot is kept on disk and recorded, but not as parsed.
    assert (settings.snapshot_dir() / "sha256" / sha(empty)[:2] / sha(empty)).exists()
    latest = query("SELECT sha256, parsed_ok, status, error FROM source_snapshots WHERE source = 'swe_bench' ORDER BY rowid DESC LIMIT 1")[0]
    assert latest[:3] == (sha(empty), False, "rejected_shrunk")
    assert "0 score rows" in latest[3] and "3 in the last good snapshot" in latest[3]
    found = checks(result)
    fresh = found[("swe_bench_scores", "fresh_download_parsed")]
    assert not fresh.passed and fresh.severity == dg.AssetCheckSeverity.WARN
    assert "0 score rows" in fresh.metadata["error"].value
    assert found[("swe_bench_scores", "snapshot_recorded")].passed
    assert found[("epoch_hub_scores", "fresh_download_parsed")].passed
    # The empty snapshot never becomes the fallback: the next run falls back to the good one again.
    run()
    assert rows_by_file("swe_bench") == {"leaderboards.json:Toy": 3}
    # raw_scores alone publishes the same rows.
    assert run([raw_scores]).success
    assert rows_by_file("swe_bench") == {"leaderboards.json:Toy": 3}


def test_row_loss_share_is_configurable(mirror):
    mirror.sources({"toy_mc.csv": mc(2)}, swe(3))
    run()
    mirror.sources({"toy_mc.csv": mc(2)}, swe(1))
    result = run()  # default: at most 50% fewer rows than the last good snapshot
    assert rows_by_file("swe_bench") == {"leaderboards.json:Toy": 3}
    assert "1 score rows" in checks(result)[("swe_bench_scores", "fresh_download_parsed")].metadata["error"].value
    result = run(swe_bench_scores={"max_row_loss_share": 0.8})
    assert rows_by_file("swe_bench") == {"leaderboards.json:Toy": 1}
    assert checks(result)[("swe_bench_scores", "fresh_download_parsed")].passed


def test_no_usable_snapshot_at_all_does_not_stop_the_other_source(mirror):
    mirror.sources({"toy_mc.csv": mc(2)}, b"<html>Service unavailable</html>")
    result = run()
    assert query("SELECT source, count(*) FROM raw_scores GROUP BY 1") == [("epoch_hub", 2)]
    found = checks(result)
    assert not found[("swe_bench_scores", "fresh_download_parsed")].passed
    recorded = found[("swe_bench_scores", "snapshot_recorded")]
    assert not recorded.passed and recorded.severity == dg.AssetCheckSeverity.WARN
    assert "no rows staged" in recorded.metadata["problems"].value


# --- item 11 -------------------------------------------------------------------------------------

def test_missing_source_file_is_a_recorded_attempt_and_fails_the_freshness_check(mirror):
    mirror.sources({"toy_mc.csv": mc(2)}, swe(3))
    run()
    mirror.sources({"toy_mc.csv": mc(2)}, None)
    result = run()
    fresh = checks(result)[("swe_bench_scores", "fresh_download_parsed")]
    assert not fresh.passed and "offline mirror has no file" in fresh.metadata["error"].value
    attempts = query("SELECT sha256, parsed_ok, status, error FROM source_snapshots WHERE source = 'swe_bench' ORDER BY rowid")
    assert [a[:3] for a in attempts] == [(sha(swe(3)), True, "parsed"), (None, False, "fetch_failed")]
    assert "offline mirror has no file" in attempts[-1][3]
    assert rows_by_file("swe_bench") == {"leaderboards.json:Toy": 3}
    assert checks(result)[("epoch_hub_scores", "fresh_download_parsed")].passed


# --- item 13 -------------------------------------------------------------------------------------

def test_file_that_loses_its_model_id_column_keeps_its_last_good_rows(mirror):
    first = {"toy_mc.csv": mc(4), "toy_agent_external.csv": agent(2)}
    mirror.sources(first, swe(3))
    run()
    renamed = agent(2).replace("Model version,", "Model,")
    mirror.sources({"toy_mc.csv": mc(4), "toy_agent_external.csv": renamed}, swe(3))
    result = run()
    kept = query("SELECT DISTINCT model_id, snapshot_sha256 FROM raw_scores WHERE file = 'toy_agent_external.csv' ORDER BY 1")
    assert kept == [("agent-model-1", sha(zip_of(first))), ("agent-model-2", sha(zip_of(first)))]
    reasons = query("SELECT reason, field FROM audit_ingest WHERE file = 'toy_agent_external.csv' ORDER BY 1")
    assert ("missing_key_column", "Model version") in reasons and ("kept_last_good_rows", None) in reasons
    files = checks(result)[("epoch_hub_scores", "every_file_read")]
    assert not files.passed and files.severity == dg.AssetCheckSeverity.WARN
    assert "toy_agent_external.csv" in files.metadata["problems"].value
    assert "Model version" in files.metadata["problems"].value


# --- item 14 -------------------------------------------------------------------------------------

def test_emptied_and_vanished_files_keep_their_last_good_rows_and_a_bad_byte_costs_one_row(mirror):
    loose = {"epoch_hub_scores": {"max_row_loss_share": 0.99}}  # isolate the per-file rules from the snapshot one
    first = {"toy_mc.csv": mc(2), "toy_agent_external.csv": agent(2)}
    mirror.sources(first, swe(3))
    run(**loose)
    assert rows_by_file("epoch_hub") == {"toy_mc.csv": 2, "toy_agent_external.csv": 4}

    bad_byte = agent(2).encode().replace(b"Agent Model 2", b"Agent Model \xff2")
    second = {"toy_mc.csv": MC_HEADER, "toy_agent_external.csv": bad_byte}
    mirror.sources(second, swe(3))
    result = run(**loose)
    assert rows_by_file("epoch_hub") == {"toy_mc.csv": 2, "toy_agent_external.csv": 2}
    assert query("SELECT DISTINCT snapshot_sha256 FROM raw_scores WHERE file = 'toy_mc.csv'") == [(sha(zip_of(first)),)]
    assert query("SELECT DISTINCT model_id, snapshot_sha256 FROM raw_scores WHERE file = 'toy_agent_external.csv'") == [
        ("agent-model-1", sha(zip_of(second)))]
    problems = checks(result)[("epoch_hub_scores", "every_file_read")]
    assert not problems.passed and problems.severity == dg.AssetCheckSeverity.WARN
    listed = problems.metadata["problems"].value
    assert "toy_mc.csv" in listed and "empty_file" in listed
    assert "toy_agent_external.csv | 2 | Name | undecodable_row" in listed

    third = {"toy_mc.csv": mc(2)}  # toy_agent_external.csv vanished
    mirror.sources(third, swe(3))
    result = run(**loose)
    assert rows_by_file("epoch_hub") == {"toy_mc.csv": 2, "toy_agent_external.csv": 2}
    assert ("vanished_file",) in query("SELECT reason FROM audit_ingest WHERE file = 'toy_agent_external.csv'")
    assert not checks(result)[("epoch_hub_scores", "every_file_read")].passed


def test_good_runs_pass_every_source_check(mirror):
    mirror.sources({"toy_mc.csv": mc(2), "toy_agent_external.csv": agent(1)}, swe(2))
    # the two sources this mirror serves (the others have no document here: their checks WARN)
    served = ("epoch_hub_scores", "swe_bench_scores")
    selection = [a for a in source_assets if a.key.to_user_string() in served] + [raw_scores] + [
        c for c in source_checks if next(iter(c.check_keys)).asset_key.to_user_string() in served]
    result = run(selection)
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    expected = sum(len(list(c.check_keys)) for c in selection if isinstance(c, dg.AssetChecksDefinition))
    assert len(evaluations) == expected >= 6 and all(e.passed for e in evaluations)


# --- issue 11: reported costs ride with their scores ------------------------------------------------

def test_costs_are_staged_beside_the_scores_and_fall_back_with_them(mirror):
    good = swe(3, costs=[100.0, 0, "250"])  # whole-run dollars of 500 instances; 0 = not reported
    mirror.sources({"toy_mc.csv": mc(2)}, good)
    assert run([*source_assets, raw_scores, raw_costs]).success
    staged = query("SELECT row_number, model_id, cost_unit, tasks, usd_per_task, snapshot_sha256 FROM raw_costs ORDER BY 1")
    assert staged == [(1, "model-1", "usd_per_run", 500.0, 0.2, sha(good)), (3, "model-3", "usd_per_run", 500.0, 0.5, sha(good))]
    assert query("SELECT row_number, field FROM audit_ingest WHERE reason = 'zero_cost_unknown'") == [(2, "cost")]
    # an unusable download: the scores AND the costs of the last good snapshot stay
    mirror.sources({"toy_mc.csv": mc(2)}, json.dumps({"leaderboards": [{"name": "Toy", "results": []}]}).encode())
    assert run([*source_assets, raw_scores, raw_costs]).success
    assert query("SELECT count(*), any_value(snapshot_sha256) FROM raw_costs") == [(2, sha(good))]
    assert rows_by_file("swe_bench") == {"leaderboards.json:Toy": 3}
