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
    ({"result_dates": {"window_days": 0}}, "result_dates.window_days"),
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


@pytest.mark.parametrize("section", ["family_quality", "active_panel"])
def test_a_second_window_of_recent_results_is_refused(tmp_path, section):
    """The dating window is one key, result_dates.window_days, read by the active panel and the live pool alike: a
    window of their own (the keys the two had before) is an unknown key, not a silent second window."""
    key = "live_window_days" if section == "family_quality" else "window_days"
    text = OUTPUTS_CONFIG.read_text()
    text = (text.replace("family_quality:\n", f"family_quality:\n  {key}: 180\n") if section == "family_quality"
            else text + f"\n{section}:\n  {key}: 180\n")
    path = tmp_path / "outputs.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"line \d+: {section}(\.{key})?: unknown key"):
        load_outputs_config(path)
