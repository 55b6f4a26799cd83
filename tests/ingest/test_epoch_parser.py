"""The Epoch export parser on small hand-written archives of both layouts, including bad input."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from atlas_assets.ingest.archive import ArchiveError
from atlas_assets.ingest.epoch import detect_layout, parse_epoch_export
from atlas_assets.registry.benchmarks import load_benchmark_registry

FIXTURES = Path(__file__).parent / "fixtures"
SHA = "a" * 64

TOY_MC = (
    "Model version,mean_score,Best score (across scorers),Release date,Organization,stderr,Started at\n"
    "gpt-5.2-2025-12-11_xhigh,0.9,0.9,2025-12-11,OpenAI,0.02,2026-01-05T10:00:00.000Z\n"
    "claude-opus-4-5-20251101_32K,0.85,0.85,2025-11-01,Anthropic,,2026-01-06T10:00:00.000Z\n"
)
TOY_AGENT = (
    "Model version,Name,Agent,Shots,Release date,Source,Score (%),Long tasks (%)\n"
    "gemini-3-pro-preview,Gemini 3 Pro,Forge,0,2025-11-18,Toy Leaderboard,0.5,0.25\n"
)


def make_zip(members: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as handle:
        for name, data in members.items():
            handle.writestr(name, data)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def registry():
    return load_benchmark_registry(FIXTURES / "registry.yaml")


def reasons(output) -> list[tuple]:
    return sorted((a["reason"], a["file"], a["row_number"], a["field"]) for a in output.audit)


def test_old_layout_rows_carry_provenance(registry):
    output = parse_epoch_export(make_zip({"toy_mc.csv": TOY_MC, "toy_agent_external.csv": TOY_AGENT}), registry, SHA)
    scores = output.score_frame().set_index("row_key")

    first = scores.loc["epoch_hub/toy_mc.csv#1/toy_mc"]
    assert first["model_id"] == "gpt-5.2-2025-12-11_xhigh"
    assert first["score"] == pytest.approx(0.9) and first["stderr"] == pytest.approx(0.02)
    assert str(first["evaluated_on"]) == "2026-01-05" and str(first["released_on"]) == "2025-12-11"
    assert first["organization"] == "OpenAI" and first["snapshot_sha256"] == SHA
    assert first["source_class"] == "evaluator_release" and first["sampling_protocol"] == "average"
    assert pd_isna(scores.loc["epoch_hub/toy_mc.csv#2/toy_mc", "stderr"])
    # mean_score is registered as ignored: it produces no rows.
    assert set(scores["score_column"]) == {"Best score (across scorers)", "Score (%)", "Long tasks (%)"}
    assert output.audit == []


def test_scale_harness_shots_and_secondary_columns(registry):
    output = parse_epoch_export(make_zip({"toy_agent_external.csv": TOY_AGENT}), registry, SHA)
    scores = output.score_frame().set_index("benchmark")
    assert scores.loc["toy_agent", "score"] == pytest.approx(50.0)  # 0.5 published, declared in percent
    assert scores.loc["toy_agent_long", "score"] == pytest.approx(25.0)
    assert scores.loc["toy_agent", "harness"] == "Forge" and scores.loc["toy_agent", "shots"] == 0
    assert scores.loc["toy_agent", "origin"] == "Toy Leaderboard"
    assert scores.loc["toy_agent", "model_name"] == "Gemini 3 Pro"


def test_new_layout_is_detected_and_cross_checked(registry):
    metadata = (
        "benchmark,in_eci,source_file,score_column,scale,random_baseline,score_ceiling,release_date,superseded_by\n"
        "Toy MC,True,toy_mc.csv,mean_score,1,0.25,1,2024-01-01,\n"
        "Toy agent,True,toy_agent_external.csv,Score (%),1,0.1,1,2024-01-01,\n"
        "Other,False,other_external.csv,Score,1,0,1,2024-01-01,\n"
    )
    members = {
        "benchmark_metadata.csv": metadata, "toy_mc.csv": TOY_MC,
        "toy_agent_external.csv": TOY_AGENT, "epoch_capabilities_index/eci_scores.csv": "Model version,ECI\n",
    }
    assert detect_layout(members) == "2026-09"
    assert detect_layout({"toy_mc.csv": b""}) == "2026-04"
    output = parse_epoch_export(make_zip(members), registry, SHA)
    assert len(output.scores) == 4
    found = reasons(output)
    assert ("headline_mismatch", "benchmark_metadata.csv", 1, "score_column") in found
    assert ("floor_disagreement", "benchmark_metadata.csv", 2, "random_baseline") in found
    assert ("unregistered_file", "benchmark_metadata.csv", 3, "source_file") in found
    assert ("unregistered_file", "epoch_capabilities_index/eci_scores.csv", None, None) in found


def test_bad_rows_are_audited_with_file_row_and_field(registry):
    bad = (
        "Model version,mean_score,Best score (across scorers),Release date,Organization,stderr,Started at\n"
        "model-a,0.5,n/a,2025-01-01,Org,0.01,2026-01-01\n"          # 1 non-numeric score
        "model-b,0.5,NaN,2025-01-01,Org,0.01,2026-01-01\n"          # 2 NaN
        "model-c,0.5,inf,2025-01-01,Org,0.01,2026-01-01\n"          # 3 infinite
        "model-d,0.5,0.7,2025-01-01\n"                                # 4 truncated row
        ",0.5,0.6,2025-01-01,Org,0.01,2026-01-01\n"                  # 5 no model identifier
        "model-f,0.5,0.6,last spring,Org,oops,2026-01-01\n"          # 6 bad date and stderr: kept, fields emptied
        "model-g,0.5,,2025-01-01,Org,0.01,2026-01-01\n"              # 7 empty headline
        "model-h,0.5,0.8,2025-01-01,Org,0.01,2026-01-01"             # 8 fine, no final newline
    )
    output = parse_epoch_export(make_zip({"toy_mc.csv": bad}), registry, SHA)
    kept = output.score_frame()
    assert sorted(kept["model_id"]) == ["model-f", "model-h"]
    assert kept.set_index("model_id").loc["model-f", "released_on"] is None or pd_isna(kept.set_index("model_id").loc["model-f", "released_on"])
    found = reasons(output)
    field = "Best score (across scorers)"
    assert ("non_numeric_score", "toy_mc.csv", 1, field) in found
    assert ("non_finite_score", "toy_mc.csv", 2, field) in found
    assert ("non_finite_score", "toy_mc.csv", 3, field) in found
    assert ("malformed_row", "toy_mc.csv", 4, None) in found
    assert ("missing_model_id", "toy_mc.csv", 5, "Model version") in found
    assert ("bad_date", "toy_mc.csv", 6, "Release date") in found
    assert ("non_numeric_value", "toy_mc.csv", 6, "stderr") in found
    assert ("missing_score", "toy_mc.csv", 7, field) in found
    detail = next(a["detail"] for a in output.audit if a["row_number"] == 1)
    assert "epoch_hub/toy_mc.csv row 1" in detail and "'n/a'" in detail


def test_file_level_problems(registry):
    renamed = TOY_MC.replace("Best score (across scorers)", "Best score")
    duplicated = "Model version,stderr,stderr\nm,0.1,0.2\n"
    members = {"toy_mc.csv": renamed, "toy_agent_external.csv": duplicated, "surprise_external.csv": "a,b\n1,2\n"}
    output = parse_epoch_export(make_zip(members), registry, SHA)
    found = reasons(output)
    assert output.scores == []
    assert ("missing_headline_column", "toy_mc.csv", None, "Best score (across scorers)") in found
    assert ("unregistered_column", "toy_mc.csv", None, "Best score") in found
    assert ("duplicate_header", "toy_agent_external.csv", 0, "stderr") in found  # row 0: the header row
    assert ("unregistered_file", "surprise_external.csv", None, None) in found

    empty = parse_epoch_export(make_zip({"toy_mc.csv": ""}), registry, SHA)
    assert [a["reason"] for a in empty.audit] == ["empty_file"]


def test_shot_counts_as_published(registry):
    rows = (
        "Model version,Name,Agent,Shots,Release date,Source,Score (%),Long tasks (%)\n"
        "m1,,,25-shot,2024-01-01,Paper,0.4,\n"
        "m2,,,zero-shot,2024-01-01,Paper,0.4,\n"
        "m3,,,few,2024-01-01,Paper,0.4,\n"
    )
    output = parse_epoch_export(make_zip({"toy_agent_external.csv": rows}), registry, SHA)
    shots = output.score_frame().set_index("model_id")["shots"]
    assert shots["m1"] == 25 and shots["m2"] == 0 and pd_isna(shots["m3"])  # 'few' names no count: kept, field empty
    assert reasons(output) == [("unknown_shot_count", "toy_agent_external.csv", 3, "Shots")]


def test_name_stands_in_for_a_blank_model_version(registry):
    rows = "Model version,Name,Agent,Shots,Release date,Source,Score (%),Long tasks (%)\n,GPT-3 175B,,5,2020-05-28,Paper,0.4,\n"
    output = parse_epoch_export(make_zip({"toy_agent_external.csv": rows}), registry, SHA)
    assert [(s["model_id"], s["model_name"], s["benchmark"]) for s in output.scores] == [("GPT-3 175B", "GPT-3 175B", "toy_agent")]


def test_html_instead_of_zip_and_corrupt_zip_fail_clearly(registry):
    with pytest.raises(ArchiveError, match="epoch_hub.*HTML page"):
        parse_epoch_export(b"<html><body>503 Service Unavailable</body></html>", registry, SHA)
    with pytest.raises(ArchiveError, match="epoch_hub"):
        parse_epoch_export(make_zip({"toy_mc.csv": TOY_MC})[:-30], registry, SHA)


def pd_isna(value) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


# --- issue 7 item 13: a file that loses its model-identifier column is an audited error, never re-keyed
def test_missing_model_id_column_is_a_file_error_not_a_re_keying(registry):
    rows = TOY_AGENT.replace("Model version,", "Version,").replace("gemini-3-pro-preview,", "x,")
    output = parse_epoch_export(make_zip({"toy_agent_external.csv": rows, "toy_mc.csv": TOY_MC}), registry, SHA)
    assert {s["file"] for s in output.scores} == {"toy_mc.csv"}  # no row keyed by the display name
    assert output.file_errors == {"toy_agent_external.csv": "missing_key_column"}
    assert ("missing_key_column", "toy_agent_external.csv", None, "Model version") in reasons(output)


# --- issue 7 item 14: files that cannot be read are file errors; one bad byte costs one row
def test_unreadable_files_are_file_errors_naming_file_row_and_field(registry):
    members = {
        "toy_mc.csv": TOY_MC.replace("stderr,Started at", "stderr,stderr"),
        "toy_agent_external.csv": TOY_AGENT.splitlines()[0] + "\n",
    }
    output = parse_epoch_export(make_zip(members), registry, SHA)
    assert output.file_errors == {"toy_mc.csv": "duplicate_header", "toy_agent_external.csv": "empty_file"}
    found = reasons(output)
    assert ("duplicate_header", "toy_mc.csv", 0, "stderr") in found  # row 0 is the header row
    assert ("empty_file", "toy_agent_external.csv", None, None) in found
    empty = parse_epoch_export(make_zip({"toy_mc.csv": ""}), registry, SHA)
    assert empty.file_errors == {"toy_mc.csv": "empty_file"}


def test_a_single_bad_byte_costs_its_row_not_the_file(registry):
    content = TOY_MC.encode().replace(b"Anthropic", b"Anthr\xffopic")  # row 2, field Organization
    output = parse_epoch_export(make_zip({"toy_mc.csv": content}), registry, SHA)
    assert [s["model_id"] for s in output.scores] == ["gpt-5.2-2025-12-11_xhigh"]
    assert output.file_errors == {}
    assert reasons(output) == [("undecodable_row", "toy_mc.csv", 2, "Organization")]
    detail = output.audit[0]["detail"]
    assert "epoch_hub/toy_mc.csv row 2" in detail and "'Organization'" in detail and "0xff" in detail
