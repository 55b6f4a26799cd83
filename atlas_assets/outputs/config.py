"""The outputs configuration (atlas_assets/config/outputs.yaml), validated against config_schema.OutputsFile."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from atlas_assets.settings import CONFIG_DIR

OUTPUTS_CONFIG = CONFIG_DIR / "outputs.yaml"


def load_outputs_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> dict:
    from atlas_assets.config_schema import OutputsFile, load_validated

    return load_validated(Path(path) if path else OUTPUTS_CONFIG, OutputsFile, overrides)
