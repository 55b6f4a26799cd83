"""Cost columns (registry `use: cost`): every reported cost becomes USD per task by its registered unit,
and a cost that is not one (0 = not reported, negative, a whole-run cost without a task count) is audited."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from atlas_assets.ingest.records import ParseOutput
from atlas_assets.ingest.tabular import read_records
from atlas_assets.registry.benchmarks import RegistryError, load_benchmark_registry

BENCHMARK = {
    "name": "Toy", "direction": "higher", "range": [0, 1], "unit": "fraction", "floor": 0.0, "items": 200,
    "family": "toy", "role": "primary", "kind": "bounded", "sampling_protocol": "single",
    "category": "coding", "safety": False, "composite": False, "contamination": "static",
}
REGISTRY = {
    "version": 1,
    "benchmarks": {"toy": BENCHMARK, "toy_b": {**BENCHMARK, "name": "Toy B", "family": "toy_b", "items": None}},
    "files": {"epoch_hub": {"toy.csv": {
        "source_class": "evaluator_release", "model_id_column": "Model",
        "columns": {
            "Model": {"use": "auxiliary"},
            "Score": {"use": "score", "benchmark": "toy", "headline": True},
            "Score B": {"use": "score", "benchmark": "toy_b"},
            "Cost": {"use": "cost", "cost_unit": "usd_per_run"},
            "Cost per task B": {"use": "cost", "cost_unit": "usd_per_task", "benchmark": "toy_b"},
            "Tasks": {"use": "auxiliary"},
            "Run cost B": {"use": "cost", "cost_unit": "usd_per_run", "benchmark": "toy_b", "tasks_column": "Tasks"},
        },
    }}},
}


def _registry(tmp_path: Path, document: dict = REGISTRY):
    path = tmp_path / "benchmarks.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return load_benchmark_registry(path)


def _parse(registry, *records):
    out = ParseOutput(source="epoch_hub", snapshot_sha256="c" * 64)
    header = list(records[0])
    read_records(out, registry, "toy.csv", header, list(enumerate(records, start=1)))
    return out


def test_costs_are_converted_to_dollars_per_task(tmp_path):
    registry = _registry(tmp_path)
    cost_columns = registry.columns.set_index("column")
    assert cost_columns.loc["Cost", "benchmark"] == "toy"  # defaults to the file's headline benchmark
    out = _parse(registry, {"Model": "m1", "Score": "0.5", "Score B": "0.4", "Cost": "50", "Cost per task B": "0.3",
                            "Tasks": "20", "Run cost B": "10"})
    costs = out.cost_frame().set_index("cost_column")
    assert costs.loc["Cost", "usd_per_task"] == pytest.approx(50 / 200)  # the benchmark's 200 items
    assert costs.loc["Cost", "tasks"] == 200 and costs.loc["Cost", "model_id"] == "m1"
    assert costs.loc["Cost per task B", "usd_per_task"] == pytest.approx(0.3)
    assert costs.loc["Run cost B", "usd_per_task"] == pytest.approx(10 / 20)  # the row's own task count
    assert set(costs["row_number"]) == {1} and len(out.scores) == 2


def test_a_cost_that_is_not_one_is_audited_not_kept(tmp_path):
    registry = _registry(tmp_path)
    out = _parse(registry, {"Model": "m1", "Score": "0.5", "Score B": "", "Cost": "0", "Cost per task B": "-1",
                            "Tasks": "", "Run cost B": "7"})
    assert out.costs == []
    reasons = {(row["field"], row["reason"]) for row in out.audit}
    assert ("Cost", "zero_cost_unknown") in reasons
    assert ("Cost per task B", "negative_cost") in reasons
    assert ("Run cost B", "cost_without_task_count") in reasons
    assert all(row["row_number"] == 1 and row["file"] == "toy.csv" for row in out.audit)


@pytest.mark.parametrize("column, change, fragment", [
    ("Cost", {"cost_unit": "eur"}, "cost_unit"),
    ("Cost", {"cost_unit": "usd_per_task", "tasks_column": "Tasks"}, "tasks_column"),
    ("Score B", {"cost_unit": "usd_per_task"}, "only cost columns"),
    ("Run cost B", {"tasks_column": "Missing"}, "Missing"),
])
def test_a_malformed_cost_column_is_named(tmp_path, column, change, fragment):
    document = copy.deepcopy(REGISTRY)
    document["files"]["epoch_hub"]["toy.csv"]["columns"][column].update(change)
    with pytest.raises(RegistryError, match=fragment) as error:
        _registry(tmp_path, document)
    assert column in str(error.value)


def test_a_per_task_column_with_pasted_run_totals_converts_only_those_rows(tmp_path):
    # Epoch's Aider copy: per-exercise dollars, except on rows with a 'Date of evaluation' (the leaderboard's
    # whole-run total_cost pasted in): run_total_when names the column that marks them.
    document = copy.deepcopy(REGISTRY)
    columns = document["files"]["epoch_hub"]["toy.csv"]["columns"]
    columns["Cost"] = {"use": "cost", "cost_unit": "usd_per_task", "run_total_when": "Evaluated"}
    columns["Evaluated"] = {"use": "auxiliary"}
    registry = _registry(tmp_path, document)
    base = {"Score B": "", "Cost per task B": "", "Tasks": "", "Run cost B": ""}
    out = _parse(registry, {"Model": "m1", "Score": "0.5", "Cost": "0.13", "Evaluated": "", **base},
                 {"Model": "m2", "Score": "0.6", "Cost": "29.08", "Evaluated": "2025-08-23", **base})
    costs = out.cost_frame().set_index("model_id")
    assert costs.loc["m1", "usd_per_task"] == pytest.approx(0.13) and costs.loc["m1", "cost_unit"] == "usd_per_task"
    assert costs.loc["m2", "usd_per_task"] == pytest.approx(29.08 / 200) and costs.loc["m2", "cost_unit"] == "usd_per_run"
    assert costs["row_key"].is_unique


def test_two_cost_columns_of_one_run_get_distinct_row_keys(tmp_path):
    document = copy.deepcopy(REGISTRY)
    document["files"]["epoch_hub"]["toy.csv"]["columns"]["Cost per task"] = {"use": "cost", "cost_unit": "usd_per_task"}
    registry = _registry(tmp_path, document)
    out = _parse(registry, {"Model": "m1", "Score": "0.5", "Score B": "", "Cost": "50", "Cost per task": "0.25",
                            "Cost per task B": "", "Tasks": "", "Run cost B": ""})
    keys = out.cost_frame()["row_key"].tolist()
    assert len(keys) == 2 and len(set(keys)) == 2


@pytest.mark.parametrize("change, fragment", [
    ({"cost_unit": "usd_per_run", "run_total_when": "Tasks"}, "run_total_when"),
    ({"cost_unit": "usd_per_task", "run_total_when": "Nowhere"}, "Nowhere"),
])
def test_a_malformed_run_total_when_is_named(tmp_path, change, fragment):
    document = copy.deepcopy(REGISTRY)
    document["files"]["epoch_hub"]["toy.csv"]["columns"]["Cost"].update(change)
    with pytest.raises(RegistryError, match=fragment) as error:
        _registry(tmp_path, document)
    assert "Cost" in str(error.value)
