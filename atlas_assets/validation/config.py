"""The validation configuration (atlas_assets/config/validation.yaml), validated against config_schema.ValidationFile."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from atlas_assets.settings import CONFIG_DIR

VALIDATION_CONFIG = CONFIG_DIR / "validation.yaml"


def load_validation_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> dict:
    from atlas_assets.config_schema import ValidationFile, load_validated

    return load_validated(Path(path) if path else VALIDATION_CONFIG, ValidationFile, overrides)
