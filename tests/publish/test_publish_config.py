"""publish.yaml is validated like every config: a typo or a wrong type names file, key and line."""

from __future__ import annotations

import pytest

from atlas_assets.config_schema import ConfigError
from atlas_assets.publish.config import PUBLISH_CONFIG, load_publish_config


def test_the_packaged_publish_config_validates():
    cfg = load_publish_config()
    assert cfg["required_validation"] == [] and cfg["report"]["leaderboard_models"] == 40


def test_a_typo_names_file_key_and_line(tmp_path):
    path = tmp_path / "publish.yaml"
    path.write_text(PUBLISH_CONFIG.read_text().replace("leaderboard_models:", "leaderbord_models:"))
    with pytest.raises(ConfigError) as error:
        load_publish_config(path)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "leaderbord_models" in text)
    assert f"line {line}: report.leaderbord_models: unknown key" in str(error.value)


def test_an_unknown_validation_table_cannot_be_required():
    with pytest.raises(ConfigError, match="required_validation.0"):
        load_publish_config(overrides={"required_validation": ["validation_metricz"]})
