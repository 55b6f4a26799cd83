"""The publish configuration (atlas_assets/config/publish.yaml), validated against config_schema.PublishFile."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from atlas_assets.settings import CONFIG_DIR

PUBLISH_CONFIG = CONFIG_DIR / "publish.yaml"


def load_publish_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> dict:
    from atlas_assets.config_schema import PublishFile, load_validated

    return load_validated(Path(path) if path else PUBLISH_CONFIG, PublishFile, overrides)
