"""The cleaning chain's thresholds, read from atlas_assets/config/cleaning.yaml.

The YAML is grouped by stage for readers; the SQL sees one flat namespace of
DuckDB session variables (`getvariable('consensus_span_fraction')`), so every
key must be unique across groups. `CleaningConfig.variables()` is what the
runner binds before each stage.

The file is validated against `atlas_assets.config_schema.CleaningFile` (strict
types, closed groups): a typo, an unknown key, a key in the wrong group, a
duplicated key or a quoted "false" is a `ConfigError` naming file, key and line.
`replace(...)` re-validates the flat values against the same schema.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atlas_assets.config_schema import CLEANING_GROUPS, CleaningFile, ConfigError, load_validated, validate_data
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
    # preference when one best report is needed (seed 002): verification class, then newer evaluation,
    # then source trust (SQL: list_position(getvariable(...), value))
    verification_order: list[str] = field(
        default_factory=lambda: ["independent", "community", "vendor_reported", "unverified"])
    source_trust_order: list[str] = field(
        default_factory=lambda: ["arc_prize", "aider", "tau2_bench", "swe_bench", "epoch_hub"])
    # harness pooling
    conflict_blocks_state: bool = True
    harness_pooling: str = "median_all"  # median_all (seed 000) | most_models_setup (seed 001)
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

    def __post_init__(self) -> None:
        # the same schema as the file, on the flat values (also catches bad `replace(...)` values)
        values = dataclasses.asdict(self)
        grouped = {
            group: {key: values[key] for key in model.model_fields} for group, model in CLEANING_GROUPS.items()
        }
        missing = set(values) - {key for keys in grouped.values() for key in keys}
        if missing:  # a field of this class that the schema does not know
            raise ConfigError(f"CleaningConfig fields missing from config_schema.CleaningFile: {sorted(missing)}")
        validate_data(grouped, CleaningFile, source="CleaningConfig")

    @classmethod
    def from_mapping(cls, data: dict[str, Any], *, source: str = "cleaning config") -> CleaningConfig:
        """From the grouped mapping of cleaning.yaml (validated against the schema)."""
        validate_data(data, CleaningFile, source=source)
        return cls._from_groups(data)

    @classmethod
    def _from_groups(cls, data: dict[str, Any]) -> CleaningConfig:
        return cls(**{key: value for values in data.values() for key, value in values.items()})

    @classmethod
    def load(cls, path: Path | str | None = None) -> CleaningConfig:
        path = Path(path) if path else DEFAULT_PATH
        return cls._from_groups(load_validated(path, CleaningFile))

    def replace(self, **changes: Any) -> CleaningConfig:
        return dataclasses.replace(self, **changes)

    def variables(self) -> dict[str, Any]:
        """Session variables bound before a stage runs (name -> Python value)."""
        return dataclasses.asdict(self)

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.variables(), sort_keys=True).encode()).hexdigest()[:16]


def load_config(path: Path | str | None = None) -> CleaningConfig:
    return CleaningConfig.load(path)
