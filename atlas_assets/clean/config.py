"""The cleaning chain's thresholds, read from atlas_assets/config/cleaning.yaml.

The YAML is grouped by stage for readers; the SQL sees one flat namespace of
DuckDB session variables (`getvariable('consensus_span_fraction')`), so every
key must be unique across groups. `CleaningConfig.variables()` is what the
runner binds before each stage.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from atlas_assets.settings import CONFIG_DIR

DEFAULT_PATH = CONFIG_DIR / "cleaning.yaml"


@dataclass(frozen=True)
class CleaningConfig:
    # protocol screen
    floor_guard_fraction: float = 0.5
    floor_guard_min_items: float = 1.0
    bounds_guard_max_share: float = 0.25
    range_slack_fraction: float = 1e-6
    # duplicate resolution
    consensus_span_fraction: float = 0.02
    stderr_multiplier: float = 2.0
    # harness pooling
    conflict_blocks_state: bool = True
    # families
    primary_min_models: int = 5
    primary_min_share: float = 0.5
    # coverage
    min_models_per_family: int = 5
    min_families_per_model: int = 3
    zero_variance_epsilon: float = 1e-9
    max_iterations: int = 50
    # drift (checks only; not bound into SQL but harmless if it were)
    conflict_share_jump: float = 0.02
    kept_share_drop: float = 0.05

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> CleaningConfig:
        flat: dict[str, Any] = {}
        for group, values in (data or {}).items():
            if isinstance(values, dict):
                for key, value in values.items():
                    if key in flat:
                        raise ValueError(f"cleaning config key {key!r} appears in more than one group")
                    flat[key] = value
            else:
                flat[group] = values
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(flat) - set(known))
        if unknown:
            raise ValueError(f"unknown cleaning config keys: {unknown}")
        typed = {}
        for key, value in flat.items():
            default = known[key].default
            typed[key] = type(default)(value)
        return cls(**typed)

    @classmethod
    def load(cls, path: Path | str | None = None) -> CleaningConfig:
        path = Path(path) if path else DEFAULT_PATH
        return cls.from_mapping(yaml.safe_load(path.read_text()))

    def replace(self, **changes: Any) -> CleaningConfig:
        return dataclasses.replace(self, **changes)

    def variables(self) -> dict[str, Any]:
        """Session variables bound before a stage runs (name -> Python value)."""
        return dataclasses.asdict(self)

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.variables(), sort_keys=True).encode()).hexdigest()[:16]


def load_config(path: Path | str | None = None) -> CleaningConfig:
    return CleaningConfig.load(path)
