"""config/outputs.yaml is validated like the other configs."""

import pytest

from atlas_assets.config_schema import ConfigError
from atlas_assets.outputs.config import OUTPUTS_CONFIG, load_outputs_config


def test_the_shipped_outputs_config_is_valid():
    cfg = load_outputs_config()
    assert cfg["reliability"]["grades"] == {"A": 0.85, "B": 0.70, "C": 0.50}
    assert cfg["dimensionality"]["min_shared_states"] == 12 and cfg["dimensionality"]["min_replicates"] >= 200


@pytest.mark.parametrize("override, message", [
    ({"reliability": {"grades": {"A": 0.6, "B": 0.7, "C": 0.5}}}, "fall from A to C"),
    ({"dimensionality": {"replicates": 100}}, "dimensionality.replicates"),
    ({"difficulty": {"evaluated_range_percentiles": [95, 5]}}, "low < high"),
    ({"reliability": {"probabilty": 0.9}}, "unknown key"),
    ({"draws": {"max_draws": "4000"}}, "draws.max_draws"),
])
def test_bad_values_are_errors_naming_the_key(override, message):
    with pytest.raises(ConfigError) as err:
        load_outputs_config(overrides=override)
    assert message in str(err.value) and "outputs.yaml" in str(err.value)


def test_a_typo_names_the_line(tmp_path):
    path = tmp_path / "outputs.yaml"
    path.write_text(OUTPUTS_CONFIG.read_text().replace("saturation_share:", "saturation_shar:"))
    with pytest.raises(ConfigError, match=r"line \d+: difficulty.saturation_shar: unknown key"):
        load_outputs_config(path)
