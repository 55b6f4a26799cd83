"""Issue 7 item 15: model.yaml and cleaning.yaml are validated against a schema. A typo or an
unknown key is an error naming the file, the key and its line; a quoted "false" is not True."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from atlas_assets.clean.config import DEFAULT_PATH as CLEANING_YAML
from atlas_assets.clean.config import CleaningConfig
from atlas_assets.model.stan_data import load_model_config
from atlas_assets.settings import CONFIG_DIR

MODEL_YAML = CONFIG_DIR / "model.yaml"


def edited(tmp_path: Path, source: Path, old: str, new: str) -> tuple[Path, int]:
    """A copy of `source` with one line's text replaced; returns the path and the 1-based line."""
    lines = source.read_text().splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if old in line]
    assert len(hits) == 1, (old, hits)
    lines[hits[0]] = lines[hits[0]].replace(old, new)
    path = tmp_path / source.name
    path.write_text("".join(lines))
    return path, hits[0] + 1


def error_of(excinfo) -> str:
    return str(excinfo.value)


# --- cleaning.yaml ---------------------------------------------------------------------------------


def test_the_shipped_cleaning_config_is_valid():
    config = CleaningConfig.load()
    assert config.conflict_blocks_state is True and config.harness_pooling == "median_all"


def test_a_typo_in_cleaning_yaml_names_file_key_and_line(tmp_path):
    path, line = edited(tmp_path, CLEANING_YAML, "floor_guard_fraction: 0.5", "floor_guard_fracton: 0.5")
    with pytest.raises(ValueError) as excinfo:
        CleaningConfig.load(path)
    message = error_of(excinfo)
    assert "cleaning.yaml" in message and "protocol_screen.floor_guard_fracton" in message
    assert re.search(rf"\bline {line}\b", message), message


def test_a_quoted_false_is_not_true(tmp_path):
    path, line = edited(tmp_path, CLEANING_YAML, "conflict_blocks_state: true", 'conflict_blocks_state: "false"')
    with pytest.raises(ValueError) as excinfo:
        CleaningConfig.load(path)
    message = error_of(excinfo)
    assert "pooling.conflict_blocks_state" in message and re.search(rf"\bline {line}\b", message), message


def test_a_key_in_the_wrong_group_or_an_unknown_group_is_an_error(tmp_path):
    path, line = edited(tmp_path, CLEANING_YAML, "drift:", "drfit:")
    with pytest.raises(ValueError) as excinfo:
        CleaningConfig.load(path)
    assert "drfit" in error_of(excinfo) and re.search(rf"\bline {line}\b", error_of(excinfo))


def test_a_value_out_of_its_domain_is_an_error(tmp_path):
    path, line = edited(tmp_path, CLEANING_YAML, "harness_pooling: median_all", "harness_pooling: mean")
    with pytest.raises(ValueError) as excinfo:
        CleaningConfig.load(path)
    assert "pooling.harness_pooling" in error_of(excinfo) and re.search(rf"\bline {line}\b", error_of(excinfo))
    path, line = edited(tmp_path, CLEANING_YAML, "min_models_per_family: 5", "min_models_per_family: 5.5")
    with pytest.raises(ValueError) as excinfo:
        CleaningConfig.load(path)
    assert "coverage.min_models_per_family" in error_of(excinfo)


def test_a_duplicated_key_is_an_error(tmp_path):
    text = CLEANING_YAML.read_text().replace("  max_iterations: 50\n", "  max_iterations: 50\n  max_iterations: 5\n")
    path = tmp_path / "cleaning.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match="max_iterations"):
        CleaningConfig.load(path)


def test_replace_validates_too():
    with pytest.raises(ValueError, match="harness_pooling"):
        CleaningConfig.load().replace(harness_pooling="mean")


# --- model.yaml ------------------------------------------------------------------------------------


def test_the_shipped_model_config_is_valid_and_loads_unchanged():
    assert load_model_config() == yaml.safe_load(MODEL_YAML.read_text())


def test_a_typo_in_model_yaml_names_file_key_and_line(tmp_path):
    path, line = edited(tmp_path, MODEL_YAML, "  chains: 4", "  chians: 4")
    with pytest.raises(ValueError) as excinfo:
        load_model_config(path)
    message = error_of(excinfo)
    assert "model.yaml" in message and "sampler.chians" in message
    assert re.search(rf"\bline {line}\b", message), message


def test_a_quoted_false_in_model_yaml_is_an_error(tmp_path):
    path, line = edited(tmp_path, MODEL_YAML, "emit_observation_draws: false", 'emit_observation_draws: "false"')
    with pytest.raises(ValueError) as excinfo:
        load_model_config(path)
    message = error_of(excinfo)
    assert "sampler.emit_observation_draws" in message and re.search(rf"\bline {line}\b", message), message


def test_a_nested_typo_and_a_bad_choice_are_errors(tmp_path):
    path, line = edited(tmp_path, MODEL_YAML, "  hurdle_b: {scale: 1.0}", "  hurdle_b: {scal: 1.0}")
    with pytest.raises(ValueError) as excinfo:
        load_model_config(path)
    assert "priors.hurdle_b.scal" in error_of(excinfo) and re.search(rf"\bline {line}\b", error_of(excinfo))
    path, line = edited(tmp_path, MODEL_YAML, "  engine: auto", "  engine: gpu")
    with pytest.raises(ValueError) as excinfo:
        load_model_config(path)
    assert "sampler.engine" in error_of(excinfo) and re.search(rf"\bline {line}\b", error_of(excinfo))


def test_overrides_are_validated_too():
    assert load_model_config(overrides={"sampler": {"chains": 1}})["sampler"]["chains"] == 1
    with pytest.raises(ValueError, match=r"override: sampler\.chain\b"):
        load_model_config(overrides={"sampler": {"chain": 1}})


def test_named_reference_states_are_accepted():
    cfg = load_model_config(
        overrides={"display": {"reference": {"low": {"model": "claude-3.5-sonnet", "reasoning_state": "default"}}}}
    )
    assert cfg["display"]["reference"]["low"]["model"] == "claude-3.5-sonnet"
