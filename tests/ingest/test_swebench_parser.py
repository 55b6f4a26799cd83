"""The SWE-bench leaderboards parser on small hand-written documents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from atlas_assets.ingest.swebench import LeaderboardFormatError, attempts_protocol, parse_leaderboards
from atlas_assets.registry.benchmarks import load_benchmark_registry

FIXTURES = Path(__file__).parent / "fixtures"
SHA = "b" * 64


@pytest.fixture(scope="module")
def registry():
    return load_benchmark_registry(FIXTURES / "registry.yaml")


def result(name, resolved, tags, **extra):
    return {"name": name, "resolved": resolved, "date": "2025-11-20", "tags": tags, "cost": None, **extra}


def document(*results, board="Toy"):
    return json.dumps({"leaderboards": [{"name": board, "results": list(results)}]}).encode()


def test_results_become_scores_with_protocol_and_harness(registry):
    content = document(
        result("mini-SWE-agent + Claude 4.5 Opus (20251101)", "74.4", ["Model: claude-opus-4-5-20251101", "Org: Anthropic", "System: Attempts - 1"]),
        result("Agentless + GPT-4o", 38.8, ["Model: gpt-4o-2024-05-13", "System: Attempts - 2+"]),
    )
    output = parse_leaderboards(content, registry, SHA)
    scores = output.score_frame().set_index("row_number")
    assert scores.loc[1, "model_id"] == "claude-opus-4-5-20251101"
    assert scores.loc[1, "score"] == pytest.approx(74.4)
    assert scores.loc[1, "sampling_protocol"] == "single" and scores.loc[2, "sampling_protocol"] == "best_of_n"
    assert scores.loc[1, "harness"] == "mini-SWE-agent + Claude 4.5 Opus (20251101)"
    assert scores.loc[1, "file"] == "leaderboards.json:Toy" and scores.loc[1, "source_class"] == "benchmark_release"
    assert str(scores.loc[1, "evaluated_on"]) == "2025-11-20"
    assert scores.loc[1, "row_key"] == "swe_bench/leaderboards.json:Toy#1/toy_swe"
    assert output.audit == []


def test_unusable_results_are_audited(registry):
    content = document(
        result("Ensemble", "60", ["Model: claude-sonnet-4-20250514", "Model: gpt-5", "System: Attempts - 2+"]),
        result("Solo", "abc", ["Model: gpt-5-2025-08-07"]),
        result("Solo 2", "41.0", ["Model: gpt-5-2025-08-07"], mystery_field=1),
    )
    output = parse_leaderboards(content, registry, SHA)
    found = sorted((a["reason"], a["row_number"], a["field"]) for a in output.audit)
    assert ("non_numeric_score", 2, "resolved") in found
    assert ("unregistered_column", None, "mystery_field") in found
    # A system built on several models keeps its score under the system's name as published;
    # the model registry cannot map that name to one model and audits it there.
    assert [(s["row_number"], s["model_id"]) for s in output.scores] == [(1, "Ensemble"), (3, "gpt-5-2025-08-07")]


def test_unknown_board_and_broken_documents(registry):
    output = parse_leaderboards(document(result("x", "1", ["Model: gpt-5"]), board="Brand New"), registry, SHA)
    assert [(a["reason"], a["file"]) for a in output.audit] == [("unregistered_file", "leaderboards.json:Brand New")]
    with pytest.raises(LeaderboardFormatError, match="not valid JSON"):
        parse_leaderboards(b'{"leaderboards": [', registry, SHA)
    with pytest.raises(LeaderboardFormatError, match="'leaderboards' list"):
        parse_leaderboards(b'{"boards": []}', registry, SHA)


def test_attempts_tags():
    assert attempts_protocol(["System: Attempts - 1"]) == "single"
    assert attempts_protocol(["System: Attempts - 2"]) == "best_of_n"
    assert attempts_protocol(["System: Attempts - 2+"]) == "best_of_n"
    assert attempts_protocol(["Org: X"]) is None


# --- issue 7 items 10, 14: a board without results is an emptied file, not a good board with 0 rows
def test_board_without_results_is_a_file_error(registry):
    content = json.dumps({"leaderboards": [{"name": "Toy", "results": []}]}).encode()
    output = parse_leaderboards(content, registry, SHA)
    assert output.scores == [] and output.file_errors == {"leaderboards.json:Toy": "empty_file"}
    assert [(a["reason"], a["file"]) for a in output.audit] == [("empty_file", "leaderboards.json:Toy")]


# --- issue 7 item 13: results that lose the fields naming the model are not re-keyed by another field
def test_board_without_model_tags_is_a_file_error(registry):
    bare = {"name": "mini-SWE-agent + X", "resolved": "50", "date": "2025-11-20", "cost": None}
    output = parse_leaderboards(document(bare), registry, SHA)
    assert output.scores == [] and output.file_errors == {"leaderboards.json:Toy": "missing_key_column"}
    assert ("missing_key_column", None, "tags") in [(a["reason"], a["row_number"], a["field"]) for a in output.audit]
