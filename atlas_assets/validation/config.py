"""The validation configuration (atlas_assets/config/validation.yaml), validated against config_schema.ValidationFile."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from atlas_assets import settings


def load_validation_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> dict:
    from atlas_assets.config_schema import ValidationFile, load_validated

    return load_validated(Path(path) if path else settings.validation_config_path(), ValidationFile, overrides)
