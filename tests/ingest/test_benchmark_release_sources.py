"""The three benchmark-release sources (issue 11): Aider, tau2-bench, ARC Prize, on small hand-written
documents with their quirks and broken input, read with the packaged registry. Every dropped row is
audited with source, file, row and field; nothing is invented."""

from __future__ import annotations

import json
import textwrap

import pytest

from atlas_assets.ingest import aider, arcprize, tau2
from atlas_assets.ingest.bundles import BundleError, read_bundle
from atlas_assets.ingest.fetch import FetchError, SourceFetcher, mirror_path
from atlas_assets.registry.benchmarks import load_benchmark_registry

SHA = "b" * 64


@pytest.fixture(scope="module")
def registry():
    return load_benchmark_registry()


def audits(out, reason=None):
    return [a for a in out.audit if reason is None or a["reason"] == reason]


def by_model(out):
    return {row["model_id"]: row for row in out.scores}


# ------------------------------------------------------------------------------------------------ Aider

POLYGLOT = textwrap.dedent("""\
    - dirname: 2025-08-23-15-47-21--gpt-5-high
      model: gpt-5 (high)
      edit_format: diff
      pass_rate_1: 52.0
      pass_rate_2: 88.0
      reasoning_effort: high
      command: aider --model openai/gpt-5
      date: 2025-08-23
      commit_hash: 5318380
      total_cost: 29.0829
      test_cases: 225
    - dirname: 2025-06-01-00-00-00--o3-flag
      model: o3
      edit_format: diff
      pass_rate_2: 79.5
      command: aider --model o3 --reasoning-effort high
      date: 2025-06-01
      total_cost: 0
      test_cases: 224
    - dirname: 2025-06-27-23-53-57--o3-mini-high-diff-arch
      model: o3 (high) + gpt-4.1
      edit_format: architect
      editor_model: gpt-4.1
      pass_rate_2: 78.2
      reasoning_effort: high
      date: 2025-06-27
      total_cost: 17.5518
      test_cases: 224
    - dirname: 2025-07-01-00-00-00--contradiction
      model: gpt-5 (high)
      reasoning_effort: low
      edit_format: diff
      pass_rate_2: 70.0
      date: 2025-07-01
      test_cases: 225
    - dirname: 2025-07-02-00-00-00--bad-score
      model: claude-sonnet-4-20250514 (32k thinking)
      thinking_tokens: 32000
      edit_format: diff
      pass_rate_2: n/a
      date: 2025-07-02
      test_cases: 225
    - just a string
    """)
EDIT = textwrap.dedent("""\
    - dirname: 2024-10-22-17-45-28--sonnet-1022
      model: claude-3-5-sonnet-20241022
      edit_format: diff
      pass_rate_2: 84.2
      released: 2024-10-22
      date: 2024-10-22
      total_cost: 0.0
      test_cases: 133
    - dirname: 2024-04-12-22-18-20--partial
      model: gpt-4-turbo-2024-04-09 (diff)
      edit_format: diff
      pass_rate_2: 33.3
      date: 2024-04-12
      test_cases: 33
    - dirname: 2024-12-21-22-06-01--polyglot-o1-mini-whole
      model: o1-mini-2024-09-12
      edit_format: whole
      pass_rate_2: 32.9
      date: 2024-12-21
      test_cases: 225
      total_tests: 225
    """)


def test_aider_rows_identity_costs_and_quirks(registry):
    out = aider.parse_aider({"polyglot_leaderboard.yml": POLYGLOT.encode(), "edit_leaderboard.yml": EDIT.encode()},
                            registry, SHA)
    rows = by_model(out)
    # the setting in the name; the setting only in the command flag becomes part of the identifier
    assert set(rows) == {"gpt-5 (high)", "o3 (high)", "claude-3-5-sonnet-20241022"}
    gpt5 = rows["gpt-5 (high)"]
    assert (gpt5["benchmark"], gpt5["score"], gpt5["harness"], gpt5["verification_class"]) == (
        "aider_polyglot", 88.0, "diff", "community")
    assert str(gpt5["evaluated_on"]) == "2025-08-23"
    assert rows["claude-3-5-sonnet-20241022"]["benchmark"] == "aider_code_editing"
    # total_cost is USD for the run: divided by the run's test cases; 0 means unknown
    (cost,) = [c for c in out.costs if c["model_id"] == "gpt-5 (high)"]
    assert (cost["cost_unit"], cost["tasks"]) == ("usd_per_run", 225.0)
    assert cost["usd_per_task"] == pytest.approx(29.0829 / 225)
    assert {(a["file"], a["row_number"]) for a in audits(out, "zero_cost_unknown")} == {
        ("polyglot_leaderboard.yml", 2), ("edit_leaderboard.yml", 1)}
    # a system of two models, a contradiction between name and fields, a partial run, another suite's run
    (system,) = audits(out, "multi_model_system")
    assert (system["file"], system["row_number"], system["field"]) == ("polyglot_leaderboard.yml", 3, "model")
    (conflict,) = audits(out, "conflicting_reasoning_setting")
    assert (conflict["row_number"], conflict["field"]) == (4, "reasoning_effort") and "'high'" in conflict["detail"]
    (partial,) = audits(out, "partial_run")
    assert (partial["file"], partial["row_number"], partial["field"]) == ("edit_leaderboard.yml", 2, "test_cases")
    (other,) = audits(out, "run_of_another_suite")
    assert (other["file"], other["row_number"]) == ("edit_leaderboard.yml", 3)
    # a score that is not a number names file, row and field; a row that is not a mapping is skipped, audited
    (bad,) = audits(out, "non_numeric_score")
    assert (bad["file"], bad["row_number"], bad["field"], bad["value"]) == ("polyglot_leaderboard.yml", 5, "pass_rate_2", "n/a")
    assert "polyglot_leaderboard.yml row 5 field 'pass_rate_2'" in bad["detail"]
    (malformed,) = audits(out, "malformed_row")
    assert (malformed["file"], malformed["row_number"]) == ("polyglot_leaderboard.yml", 6)


def test_aider_broken_document_costs_that_file_only(registry):
    out = aider.parse_aider({"polyglot_leaderboard.yml": b"- model: [unclosed\n", "edit_leaderboard.yml": EDIT.encode()},
                            registry, SHA)
    assert out.file_errors == {"polyglot_leaderboard.yml": "unparsable_file"}
    assert "not valid UTF-8 YAML" in audits(out, "unparsable_file")[0]["detail"]
    assert {row["file"] for row in out.scores} == {"edit_leaderboard.yml"}


# ------------------------------------------------------------------------------------------------ tau2

def _submission(**fields):
    base = {"model_name": "GPT-5.2", "model_organization": "OpenAI", "submitting_organization": "Sierra",
            "submission_date": "2026-02-26", "contact_info": {"name": "x"}, "is_new": False,
            "trajectories_available": True, "submission_type": "standard", "reasoning_effort": "high",
            "results": {"airline": {"pass_1": 83.0, "pass_2": 78.33, "cost": 0.11379},
                        "telecom": {"pass_1": None, "cost": None}},
            "methodology": {"evaluation_date": "2026-05-05", "tau2_bench_version": "1.0.1", "user_simulator": "gpt-5.2"},
            "model_release": {"release_date": "2025-12-11"}}
    base.update(fields)
    return json.dumps(base).encode()


def tau2_bundle():
    return {
        "manifest.json": json.dumps({"submissions": ["gpt-5-2_sierra", "gpt-5-2-none_openai", "broken_x"],
                                     "legacy_submissions": ["claude-opus-4_anthropic"]}).encode(),
        "gpt-5-2_sierra/submission.json": _submission(),
        "gpt-5-2-none_openai/submission.json": _submission(reasoning_effort="none", submitting_organization="OpenAI",
                                                           results={"airline": {"pass_1": 52.5, "cost": 0}}),
        "broken_x/submission.json": b"{not json",
        "claude-opus-4_anthropic/submission.json": _submission(
            model_name="Claude Opus 4", model_organization="Anthropic", submitting_organization="Anthropic",
            reasoning_effort=None, methodology={"evaluation_date": "2025-05-22", "tau2_bench_version": "original tau-bench"}),
    }


def test_tau2_rows_identity_verification_and_quirks(registry):
    out = tau2.parse_tau2(tau2_bundle(), registry, SHA)
    rows = {(r["model_id"], r["benchmark"]): r for r in out.scores}
    # the all-null telecom domain is not a result; the effort field is the setting
    assert set(rows) == {("GPT-5.2 (high)", "tau2_airline"), ("GPT-5.2 (no thinking)", "tau2_airline")}
    high = rows[("GPT-5.2 (high)", "tau2_airline")]
    assert (high["file"], high["row_number"], high["score"]) == ("submissions:airline", 1, 83.0)
    assert high["harness"] == "standard | 1.0.1 | gpt-5.2" and str(high["released_on"]) == "2025-12-11"
    # run by the maintainer: independent; by the model's developer: vendor-reported
    assert high["verification_class"] == "independent"
    assert rows[("GPT-5.2 (no thinking)", "tau2_airline")]["verification_class"] == "vendor_reported"
    (cost,) = out.costs
    assert (cost["model_id"], cost["cost_unit"], cost["usd_per_task"]) == ("GPT-5.2 (high)", "usd_per_task", 0.11379)
    assert audits(out, "zero_cost_unknown")[0]["row_number"] == 2
    (broken,) = audits(out, "malformed_row")
    assert (broken["row_number"], broken["value"]) == (3, "broken_x") and "not valid JSON" in broken["detail"]
    (v1,) = audits(out, "other_benchmark_version")
    assert v1["field"] == "methodology.tau2_bench_version" and "claude-opus-4_anthropic" in v1["detail"]


def test_tau2_unreadable_manifest_names_the_document(registry):
    with pytest.raises(tau2.Tau2FormatError, match="manifest.json is not valid JSON"):
        tau2.parse_tau2({"manifest.json": b"[1,"}, registry, SHA)
    with pytest.raises(tau2.Tau2FormatError, match="lists \\['extra'\\]"):
        tau2.parse_tau2({"manifest.json": b'{"submissions": [], "extra": []}'}, registry, SHA)
    assert tau2.discover({"manifest.json": b"[1,"}) == []


# ------------------------------------------------------------------------------------------------ ARC Prize

def arc_bundle(evaluations=None):
    models = [
        {"id": "gpt-5-2025-08-07-high", "displayName": "GPT-5 (High)", "modelReleaseDate": "2025-08-07T00:00:00.000Z",
         "providerId": "OpenAI", "modelType": "CoT", "modelGroup": "gpt-5", "paperUrl": "", "codeUrl": "", "dataUrl": "",
         "featured": None},
        {"id": "o3-mini-2025-01-31-low", "displayName": "o3-mini (Low)", "modelReleaseDate": "2025-01-31T00:00:00.000Z",
         "providerId": "OpenAI", "modelType": "Base LLM", "modelGroup": "", "paperUrl": "", "codeUrl": "", "dataUrl": "",
         "featured": None},
        {"id": "o3-mini-2025-01-31-low", "displayName": "o3-mini (Low)", "modelReleaseDate": "2025-01-31T00:00:00.000Z",
         "providerId": "OpenAI", "modelType": "CoT", "modelGroup": "", "paperUrl": "x", "codeUrl": "", "dataUrl": "",
         "featured": None},
    ]
    evaluations = evaluations or [
        {"datasetId": "v1_Semi_Private", "modelId": "gpt-5-2025-08-07-high", "score": 0.6567, "costPerTask": 0.5087,
         "resultsUrl": "", "display": True},
        {"datasetId": "v2_Semi_Private", "modelId": "o3-mini-2025-01-31-low", "score": "high", "costPerTask": 0.01,
         "resultsUrl": "", "display": False},
        {"datasetId": "v9_Secret", "modelId": "gpt-5-2025-08-07-high", "score": 0.1, "resultsUrl": "", "display": True},
        {"datasetId": "v1_Semi_Private", "modelId": "not-in-models", "score": 0.2, "costPerTask": 1.0,
         "resultsUrl": "", "display": True},
    ]
    datasets = [{"id": "v1_Semi_Private", "displayName": "ARC-AGI-1", "url": ""},
                {"id": "v2_Semi_Private", "displayName": "ARC-AGI-2", "url": ""},
                {"id": "v3_Public_Demo", "displayName": "ARC-AGI-3 Public Demo", "url": ""}]
    return {"evaluations.json": json.dumps(evaluations).encode(), "models.json": json.dumps(models).encode(),
            "datasets.json": json.dumps(datasets).encode()}


def test_arc_prize_rows_identity_costs_and_quirks(registry):
    out = arcprize.parse_arc_prize(arc_bundle(), registry, SHA)
    rows = by_model(out)
    # the ARC id's setting suffix is read into the identifier the registry maps
    gpt5 = rows["gpt-5-2025-08-07 (high)"]
    assert (gpt5["benchmark"], gpt5["score"], gpt5["file"], gpt5["row_number"]) == (
        "arc_agi_1", 0.6567, "evaluations.json:v1_Semi_Private", 1)
    assert (gpt5["model_name"], gpt5["organization"], str(gpt5["released_on"])) == ("GPT-5 (High)", "OpenAI", "2025-08-07")
    assert (gpt5["verification_class"], gpt5["sampling_protocol"]) == ("independent", "best_of_n")
    assert [c["usd_per_task"] for c in out.costs if c["model_id"] == "gpt-5-2025-08-07 (high)"] == [0.5087]
    # a model row repeated with different fields: the first is used, the difference audited
    (dup,) = audits(out, "conflicting_duplicate_model")
    assert dup["file"] == "models.json" and dup["row_number"] == 3 and dup["field"] == "modelType, paperUrl"
    # a non-numeric score, an unknown dataset, an unknown model, a dataset without evaluations
    (bad,) = audits(out, "non_numeric_score")
    assert (bad["file"], bad["row_number"], bad["field"]) == ("evaluations.json:v2_Semi_Private", 2, "score")
    assert audits(out, "unknown_dataset")[0]["value"] == "v9_Secret"
    assert any(a["reason"] == "unregistered_file" and a["file"] == "evaluations.json:v9_Secret" for a in out.audit)
    (unknown,) = audits(out, "unknown_model_reference")
    assert unknown["row_number"] == 4 and "not-in-models" in rows
    assert audits(out, "dataset_without_evaluations")[0]["value"] == "v3_Public_Demo"


def test_arc_prize_missing_or_broken_document_is_a_format_error(registry):
    bundle = arc_bundle()
    del bundle["models.json"]
    with pytest.raises(arcprize.ArcPrizeFormatError, match="has no models.json"):
        arcprize.parse_arc_prize(bundle, registry, SHA)
    bundle = arc_bundle()
    bundle["evaluations.json"] = b'{"not": "an array"}'
    with pytest.raises(arcprize.ArcPrizeFormatError, match="evaluations.json must be a JSON array"):
        arcprize.parse_arc_prize(bundle, registry, SHA)


# ------------------------------------------------------------------------------------------------ bundles

def _write(mirror_root, base, documents):
    for name, content in documents.items():
        path = mirror_path(mirror_root, base + name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def test_bundle_one_hash_per_retrieval_covering_every_document(tmp_path):
    mirror = tmp_path / "mirror"
    bundle = tau2_bundle()
    _write(mirror, tau2.BASE_URL, bundle)
    fetcher = SourceFetcher(snapshot_dir=str(tmp_path / "snapshots"), mirror=str(mirror))
    first = fetcher.fetch_bundle("tau2_bench", tau2.BASE_URL, ["manifest.json"], tau2.discover)
    # the manifest, then every submission it lists
    assert [d.name for d in first.documents] == sorted(bundle)
    assert read_bundle(fetcher.store, first.sha256) == bundle
    again = fetcher.fetch_bundle("tau2_bench", tau2.BASE_URL, ["manifest.json"], tau2.discover)
    assert (again.sha256, again.changed) == (first.sha256, False)
    # one document changes: a new bundle hash, that document named as changed
    _write(mirror, tau2.BASE_URL, {"broken_x/submission.json": _submission(model_name="Fixed")})
    changed = fetcher.fetch_bundle("tau2_bench", tau2.BASE_URL, ["manifest.json"], tau2.discover)
    assert changed.sha256 != first.sha256 and changed.changed and changed.changed_documents == ("broken_x/submission.json",)
    # a listed document that cannot be had fails the whole retrieval, naming it
    mirror_path(mirror, tau2.BASE_URL + "gpt-5-2_sierra/submission.json").unlink()
    with pytest.raises(FetchError, match="document gpt-5-2_sierra/submission.json of the bundle"):
        fetcher.fetch_bundle("tau2_bench", tau2.BASE_URL, ["manifest.json"], tau2.discover)


def test_bundle_with_a_missing_document_is_not_read(tmp_path):
    fetcher = SourceFetcher(snapshot_dir=str(tmp_path / "snapshots"), mirror=str(tmp_path / "mirror"))
    _write(tmp_path / "mirror", arcprize.BASE_URL, arc_bundle())
    result = fetcher.fetch_bundle("arc_prize", arcprize.BASE_URL, list(arcprize.DOCUMENTS))
    models = next(d for d in result.documents if d.name == "models.json")
    path = fetcher.store.path_for(models.sha256)
    path.chmod(0o644)
    path.unlink()
    with pytest.raises(BundleError, match="document models.json .* is missing"):
        read_bundle(fetcher.store, result.sha256)


def test_a_bundle_source_that_loses_a_document_falls_back_to_its_last_good_bundle(tmp_path, monkeypatch):
    import dagster as dg
    import duckdb

    from atlas_assets import settings
    from atlas_assets.defs.ingest.assets import raw_scores, source_assets
    from atlas_assets.defs.ingest.checks import source_checks
    from atlas_assets.resources import build_resources

    monkeypatch.setenv("ATLAS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ATLAS_DUCKDB", raising=False)
    monkeypatch.setenv("ATLAS_MIRROR", str(tmp_path / "mirror"))
    asset = next(a for a in source_assets if a.key.to_user_string() == "aider_scores")
    checks = [c for c in source_checks if next(iter(c.check_keys)).asset_key.to_user_string() == "aider_scores"]

    def run():
        result = dg.materialize([asset, raw_scores, *checks], resources=build_resources(), raise_on_error=False)
        assert result.success
        with duckdb.connect(str(settings.duckdb_path()), read_only=True) as conn:
            rows = conn.execute("SELECT file, count(*), any_value(snapshot_sha256) FROM raw_scores GROUP BY 1 ORDER BY 1").fetchall()
        return result, rows, {e.check_name: e for e in result.get_asset_check_evaluations()}

    _write(tmp_path / "mirror", aider.BASE_URL, {"polyglot_leaderboard.yml": POLYGLOT.encode(),
                                                 "edit_leaderboard.yml": EDIT.encode()})
    _, good, found = run()
    assert [(f, n) for f, n, _ in good] == [("edit_leaderboard.yml", 1), ("polyglot_leaderboard.yml", 2)]
    assert found["fresh_download_parsed"].passed and found["snapshot_recorded"].passed
    bundle = good[0][2]
    # the edit board disappears upstream: the retrieval fails as a whole, naming the document, and the
    # source keeps the rows of its last good bundle (WARN), both documents' rows included
    mirror_path(tmp_path / "mirror", aider.BASE_URL + "edit_leaderboard.yml").unlink()
    _, after, found = run()
    assert after == good and {sha for _, _, sha in after} == {bundle}
    fresh = found["fresh_download_parsed"]
    assert not fresh.passed and fresh.severity == dg.AssetCheckSeverity.WARN
    assert "document edit_leaderboard.yml of the bundle" in fresh.metadata["error"].value
    assert found["snapshot_recorded"].passed
