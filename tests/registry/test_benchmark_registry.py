"""The benchmark registry (config/benchmarks.yaml): it loads, it matches the DuckDB contract, it covers
every column of the real published files, and the validator names the offending entry."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import duckdb
import pandas as pd
import pytest
import yaml

from atlas_assets.registry.benchmarks import (
    BENCHMARKS_PATH,
    RegistryError,
    load_benchmark_registry,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = Path(os.environ.get("ATLAS_SHARED_DATA", PROJECT_ROOT.parent / "shared" / "data"))
EPOCH_HUB = SHARED_DATA / "epoch-benchmarking-hub"
SWE_BOARDS = SHARED_DATA / "swe-bench-leaderboards" / "leaderboards.json"
ECI_BASELINES = SHARED_DATA / "epoch-eci-normalization" / "eci_baselines_ceilings.csv"
CONTRACT = PROJECT_ROOT / "sql" / "00_source_tables.sql"


@pytest.fixture(scope="module")
def registry():
    return load_benchmark_registry()


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real data not found at {path} (set ATLAS_SHARED_DATA to the shared data folder)")
    return path


def _epoch_csvs() -> list[str]:
    hub = _require(EPOCH_HUB)
    return sorted(str(p.relative_to(hub)) for p in hub.rglob("*.csv"))


def _swe_boards() -> dict[str, list[dict]]:
    data = json.loads(_require(SWE_BOARDS).read_text())
    return {board["name"]: board["results"] for board in data["leaderboards"]}


def _registered(registry, source: str, file: str) -> list[str]:
    c = registry.columns
    return c[(c["source"] == source) & (c["file"] == file)]["column"].tolist()


# ------------------------------------------------------------------------------------ the real YAML


def test_real_registry_loads_and_matches_the_duckdb_contract(registry):
    con = duckdb.connect()
    con.execute(CONTRACT.read_text())
    for table, frame in [("registry_benchmarks", registry.benchmarks), ("registry_files", registry.files),
                         ("registry_columns", registry.columns)]:
        contract_columns = [row[0] for row in con.execute(f"DESCRIBE {table}").fetchall()]
        assert list(frame.columns) == contract_columns, table
        con.register("frame", frame)
        con.execute(f"INSERT INTO {table} SELECT * FROM frame").fetchall()  # PKs, NOT NULLs, list type
        con.unregister("frame")
        assert con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0] == len(frame)
    assert len(registry.version) == 64 and registry.version == load_benchmark_registry().version


def test_registry_counts_are_plausible(registry):
    assert len(registry.benchmarks) >= 60
    assert set(registry.columns["use"]) == {"score", "cost", "auxiliary", "ignored"}
    assert registry.benchmarks["benchmark"].is_unique
    # every file that publishes scores has exactly one headline
    scores = registry.columns[registry.columns["use"] == "score"]
    assert (scores.groupby(["source", "file"])["headline"].sum() == 1).all()


def test_file_entry_and_score_columns(registry):
    entry = registry.file_entry("epoch_hub", "gpqa_diamond.csv")
    assert entry["source_class"] == "evaluator_release"
    assert entry["stderr_column"] == "stderr" and entry["model_id_column"] == "Model version"
    assert entry["harness_columns"] == []
    assert registry.file_entry("epoch_hub", "no_such_file.csv") is None
    verified = registry.score_columns("swe_bench", "leaderboards.json:Verified")
    assert verified[["column", "benchmark", "headline", "scale"]].values.tolist() == [
        ["resolved", "swe_bench_verified", True, 0.01]]
    mmlu = registry.file_entry("epoch_hub", "mmlu_external.csv")
    assert mmlu["source_class"] == "model_release"
    assert mmlu["source_class_by_origin"]["Stanford CRFM Leaderboard"] == "evaluator_release"


# ------------------------------------------------------------------------------------ coverage of real files


def test_every_real_epoch_file_and_column_is_registered(registry):
    missing_files, missing_columns, stale_columns = [], [], []
    for file in _epoch_csvs():
        header = list(pd.read_csv(EPOCH_HUB / file, nrows=0).columns)
        registered = _registered(registry, "epoch_hub", file)
        if not registered:
            missing_files.append(file)
            continue
        missing_columns += [f"{file}:{c}" for c in header if c not in registered]
        stale_columns += [f"{file}:{c}" for c in registered if c not in header]
    assert not missing_files, f"unregistered Epoch files: {missing_files}"
    assert not missing_columns, f"unregistered Epoch columns: {missing_columns}"
    assert not stale_columns, f"registered columns absent from the real files: {stale_columns}"
    assert len(_epoch_csvs()) == 52  # 49 benchmark CSVs + ECI + 2 additional_eci_data


def test_every_key_of_every_swe_bench_result_is_registered(registry):
    boards = _swe_boards()
    assert set(boards) == {"bash-only", "Test", "Verified", "Lite", "Multimodal"}
    for board, results in boards.items():
        file = f"leaderboards.json:{board}"
        registered = set(_registered(registry, "swe_bench", file))
        keys = set().union(*(result.keys() for result in results))
        assert keys <= registered, f"{file}: unregistered keys {sorted(keys - registered)}"
        assert registry.file_entry("swe_bench", file)["source_class"] == "benchmark_release"


def test_newer_layout_files_are_registered(registry):
    for file in ["benchmark_metadata.csv", "model_metadata.csv", "epoch_capabilities_index/eci_scores.csv",
                 "epoch_capabilities_index/edi_scores.csv", "epoch_capabilities_index/processed_data_for_eci.csv"]:
        assert registry.file_entry("epoch_hub", file) is not None, file
    assert set(_registered(registry, "epoch_hub", "benchmark_metadata.csv")) == {
        "benchmark", "in_eci", "source_file", "score_column", "scale", "random_baseline", "score_ceiling",
        "release_date", "superseded_by"}
    eci = registry.score_columns("epoch_hub", "epoch_capabilities_index/eci_scores.csv")
    assert eci["benchmark"].tolist() == ["epoch_capabilities_index"]


def test_published_values_times_scale_fall_in_the_declared_range(registry):
    """Catches a wrong unit/scale: e.g. a 0-100 column feeding a benchmark declared 0-1."""
    bench = registry.benchmarks.set_index("benchmark")
    boards = _swe_boards()
    problems = []
    for _, col in registry.columns[registry.columns["use"] == "score"].iterrows():
        if col["source"] == "swe_bench":
            values = pd.Series([float(r["resolved"]) for r in boards[col["file"].split(":", 1)[1]]])
        else:
            path = EPOCH_HUB / col["file"]
            if not path.exists():  # newer-layout files: no real copy available
                continue
            values = pd.to_numeric(pd.read_csv(path)[col["column"]], errors="coerce").dropna()
        assert len(values), f"{col['file']}:{col['column']} has no numeric values"
        values = values * col["scale"]
        lo, hi = bench.loc[col["benchmark"], "range_min"], bench.loc[col["benchmark"], "range_max"]
        if (pd.notna(lo) and values.min() < lo) or (pd.notna(hi) and values.max() > hi):
            problems.append(f"{col['file']}:{col['column']} -> {col['benchmark']} [{values.min()}, {values.max()}] vs [{lo}, {hi}]")
    assert not problems, problems


def test_floors_agree_with_epochs_well_determined_random_baselines(registry):
    """Cross-check with Epoch's ECI baselines where Epoch's affine map is well determined (>= 10 exact
    pairs). Deliberate differences must be listed here with the reason (see the YAML notes)."""
    baselines = pd.read_csv(_require(ECI_BASELINES))
    scores = registry.columns[registry.columns["use"] == "score"].set_index(["file", "column"])["benchmark"]
    floors = registry.benchmarks.set_index("benchmark")["floor"]
    deliberate = {}  # none among the well-determined ones
    checked = 0
    for _, row in baselines[baselines["n_exact"] >= 10].iterrows():
        benchmark = scores.get((row["file"], row["score_column"]))
        assert benchmark is not None, f"Epoch's ECI score column {row['file']}:{row['score_column']} is not a registered score"
        if benchmark in deliberate:
            continue
        assert floors[benchmark] == pytest.approx(row["random_baseline"], abs=0.01), benchmark
        checked += 1
    assert checked >= 25


# ------------------------------------------------------------------------------------ spot facts


def test_spot_facts(registry):
    b = registry.benchmarks.set_index("benchmark")
    assert b.loc["gpqa_diamond", "floor"] == 0.25 and b.loc["gpqa_diamond", "items"] == 198
    assert b.loc["mmlu", "floor"] == 0.25 and b.loc["mmlu", "items"] == 14042
    assert b.loc["gsm8k", "items"] == 1319 and b.loc["swe_bench_verified", "items"] == 500
    assert b.loc["epoch_capabilities_index", "is_composite"]
    assert not b.loc[b.index != "epoch_capabilities_index", "is_composite"].any()
    assert not b["is_safety"].any()
    assert b.loc["webdev_arena", "kind"] == "rating" and b.loc["webdev_arena", "unit"] == "elo"
    assert b.loc["metr_time_horizon", "kind"] == "unbounded" and b.loc["metr_time_horizon", "unit"] == "minutes"
    # FrontierMath: Epoch's 0.57 ceiling is Epoch's choice, the declared range is 0-1
    assert (b.loc["frontiermath_tiers_1_3", "range_min"], b.loc["frontiermath_tiers_1_3", "range_max"]) == (0, 1)
    assert b.loc["frontiermath_tiers_1_3", "family"] != b.loc["frontiermath_tier_4", "family"]
    assert b.loc["hle_calibration_error", "direction"] == "lower"
    # LiveBench: global average primary, categories components of the same family
    lb = b[b["family"] == "livebench"]
    assert lb.loc["livebench", "role"] == "primary" and (lb.drop(index="livebench")["role"] == "component").all()
    assert b.loc["livebench", "contamination"] == "live"


def test_shared_benchmarks_across_sources(registry):
    c = registry.columns[registry.columns["use"] == "score"]
    verified = c[c["benchmark"] == "swe_bench_verified"][["source", "file"]].values.tolist()
    assert ["epoch_hub", "swe_bench_verified.csv"] in verified
    assert ["epoch_hub", "swe_bench_bash.csv"] in verified
    assert ["swe_bench", "leaderboards.json:Verified"] in verified
    assert ["swe_bench", "leaderboards.json:bash-only"] in verified
    # swe_bench_bash.csv is a copy of the swebench.com board, not an Epoch run
    assert registry.file_entry("epoch_hub", "swe_bench_bash.csv")["source_class"] == "benchmark_release"
    assert registry.file_entry("epoch_hub", "swe_bench_verified.csv")["source_class"] == "evaluator_release"


def test_hle_stderr_column_is_converted_from_a_95_percent_half_width(registry):
    col = registry.column_entry("epoch_hub", "hle_external.csv", "Accuracy Standard Error")
    assert col["use"] == "auxiliary" and col["scale"] == pytest.approx(1 / 1.96, rel=1e-5)
    assert registry.file_entry("epoch_hub", "hle_external.csv")["stderr_column"] == "Accuracy Standard Error"


# ------------------------------------------------------------------------------------ validation errors

MINIMAL = {
    "version": 1,
    "benchmarks": {
        "toy_mc": {
            "name": "Toy MC", "direction": "higher", "range": [0, 1], "unit": "fraction", "floor": 0.25,
            "items": 100, "family": "toy", "role": "primary", "kind": "bounded", "sampling_protocol": "single",
            "category": "knowledge", "safety": False, "composite": False, "contamination": "static",
        },
        "toy_sub": {
            "name": "Toy MC subset", "direction": "higher", "range": [0, 1], "unit": "fraction", "floor": 0.25,
            "family": "toy", "role": "component", "kind": "bounded", "sampling_protocol": "single",
            "category": "knowledge", "safety": False, "composite": False, "contamination": "static",
        },
    },
    "files": {
        "epoch_hub": {
            "toy.csv": {
                "source_class": "evaluator_release",
                "model_id_column": "Model version",
                "columns": {
                    "Model version": {"use": "auxiliary"},
                    "Score": {"use": "score", "benchmark": "toy_mc", "headline": True},
                    "Subset score": {"use": "score", "benchmark": "toy_sub"},
                    "Country": {"use": "ignored", "reason": "model metadata"},
                },
            },
        },
    },
}


def _write(tmp_path: Path, document: dict) -> Path:
    path = tmp_path / "benchmarks.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _broken(mutate) -> dict:
    document = copy.deepcopy(MINIMAL)
    mutate(document)
    return document


def test_minimal_registry_is_valid(tmp_path):
    registry = load_benchmark_registry(_write(tmp_path, MINIMAL))
    assert registry.benchmarks["benchmark"].tolist() == ["toy_mc", "toy_sub"]
    assert registry.score_columns("epoch_hub", "toy.csv")["column"].tolist() == ["Score", "Subset score"]


def _assert_error(tmp_path, document, *fragments):
    path = _write(tmp_path, document)
    with pytest.raises(RegistryError) as excinfo:
        load_benchmark_registry(path)
    message = str(excinfo.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message


def test_unknown_direction_is_named(tmp_path):
    doc = _broken(lambda d: d["benchmarks"]["toy_mc"].update(direction="up"))
    _assert_error(tmp_path, doc, "benchmarks.toy_mc.direction", "'up'")


def test_two_headlines_are_named(tmp_path):
    doc = _broken(lambda d: d["files"]["epoch_hub"]["toy.csv"]["columns"]["Subset score"].update(headline=True))
    _assert_error(tmp_path, doc, "files.epoch_hub.toy.csv", "headline", "Score", "Subset score")


def test_no_headline_is_an_error(tmp_path):
    doc = _broken(lambda d: d["files"]["epoch_hub"]["toy.csv"]["columns"]["Score"].update(headline=False))
    _assert_error(tmp_path, doc, "files.epoch_hub.toy.csv", "exactly one headline")


def test_dangling_benchmark_is_named(tmp_path):
    doc = _broken(lambda d: d["files"]["epoch_hub"]["toy.csv"]["columns"]["Subset score"].update(benchmark="toy_missing"))
    _assert_error(tmp_path, doc, "files.epoch_hub.toy.csv.columns.Subset score.benchmark", "toy_missing")


def test_unpublished_benchmark_is_named(tmp_path):
    doc = _broken(lambda d: d["files"]["epoch_hub"]["toy.csv"]["columns"].pop("Subset score"))
    _assert_error(tmp_path, doc, "benchmarks.toy_sub", "no file column publishes")


@pytest.mark.parametrize(
    ("mutate", "fragments"),
    [
        (lambda d: d["benchmarks"]["toy_mc"].update(floor=1.0), ["benchmarks.toy_mc.floor"]),
        (lambda d: d["benchmarks"]["toy_mc"].update(floor=-0.1), ["benchmarks.toy_mc.floor"]),
        (lambda d: d["benchmarks"]["toy_mc"].update(items=0), ["benchmarks.toy_mc.items"]),
        (lambda d: d["benchmarks"]["toy_mc"].update(items=12.5), ["benchmarks.toy_mc.items"]),
        (lambda d: d["benchmarks"]["toy_mc"].update(range=[1, 0]), ["benchmarks.toy_mc.range"]),
        (lambda d: d["benchmarks"]["toy_mc"].pop("range"), ["benchmarks.toy_mc.range"]),
        (lambda d: d["benchmarks"]["toy_mc"].update(kind="rating"), ["benchmarks.toy_mc.floor", "rating"]),
        (lambda d: d["benchmarks"]["toy_mc"].update(composite="no"), ["benchmarks.toy_mc.composite"]),
        (lambda d: d["benchmarks"]["toy_mc"].update(safety=1), ["benchmarks.toy_mc.safety"]),
        (lambda d: d["benchmarks"]["toy_mc"].update(role="main"), ["benchmarks.toy_mc.role"]),
        (lambda d: d["benchmarks"]["toy_mc"].update(unit="percentage"), ["benchmarks.toy_mc.unit"]),
        (lambda d: d["benchmarks"]["toy_mc"].update(contamination="dynamic"), ["benchmarks.toy_mc.contamination"]),
        (lambda d: d["benchmarks"]["toy_mc"].update(flor=0.2), ["benchmarks.toy_mc.flor", "unknown field"]),
        (lambda d: d["files"]["epoch_hub"]["toy.csv"].update(source_class="vendor"), ["files.epoch_hub.toy.csv.source_class"]),
        (lambda d: d["files"]["epoch_hub"]["toy.csv"].update(stderr_column="se"), ["files.epoch_hub.toy.csv.stderr_column", "'se'"]),
        (lambda d: d["files"]["epoch_hub"]["toy.csv"]["columns"]["Country"].pop("reason"),
         ["files.epoch_hub.toy.csv.columns.Country.reason"]),
        (lambda d: d["files"]["epoch_hub"]["toy.csv"]["columns"]["Score"].update(use="metric"),
         ["files.epoch_hub.toy.csv.columns.Score.use"]),
        (lambda d: d["files"]["epoch_hub"]["toy.csv"]["columns"]["Score"].update(scale=0),
         ["files.epoch_hub.toy.csv.columns.Score.scale"]),
        (lambda d: d["files"].update(huggingface={}), ["files.huggingface"]),
    ],
)
def test_field_errors_name_the_entry_and_field(tmp_path, mutate, fragments):
    _assert_error(tmp_path, _broken(mutate), *fragments)


def test_duplicate_keys_are_rejected(tmp_path):
    text = yaml.safe_dump(MINIMAL, sort_keys=False)
    duplicated = text.replace("  toy_sub:", "  toy_mc:", 1)
    path = tmp_path / "benchmarks.yaml"
    path.write_text(duplicated)
    with pytest.raises(RegistryError, match="duplicate key 'toy_mc'"):
        load_benchmark_registry(path)


def test_default_path_is_the_packaged_config():
    assert BENCHMARKS_PATH == PROJECT_ROOT / "atlas_assets" / "config" / "benchmarks.yaml"
    assert load_benchmark_registry().path == BENCHMARKS_PATH
