"""Where the project keeps its state, resolved once from the environment.

Everything a run writes lives under ATLAS_HOME (default: ./var beside the package):
the DuckDB file, the content-addressed raw downloads, fitted posteriors and
published artifacts. ATLAS_MIRROR, when set, maps every source URL
https://HOST/PATH to $ATLAS_MIRROR/HOST/PATH for offline runs.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PACKAGE_ROOT = Path(__file__).resolve().parent
SQL_DIR = PROJECT_ROOT / "sql"
STAN_DIR = PROJECT_ROOT / "stan"
CONFIG_DIR = PACKAGE_ROOT / "config"


def model_config_path() -> Path:
    """The capability model's configuration: ATLAS_MODEL_CONFIG names another file (a test or a study
    of an alternative specification); it is part of the specification fingerprint either way."""
    value = os.environ.get("ATLAS_MODEL_CONFIG", "").strip()
    return Path(value).resolve() if value else CONFIG_DIR / "model.yaml"


def validation_config_path() -> Path:
    """The validation studies' configuration: ATLAS_VALIDATION_CONFIG names another file (a small study in
    tests); part of the publication's fingerprint either way."""
    value = os.environ.get("ATLAS_VALIDATION_CONFIG", "").strip()
    return Path(value).resolve() if value else CONFIG_DIR / "validation.yaml"


def reference_scale_dir() -> Path:
    """Where frozen reference scales live (outputs.yaml `reference_scale`): ATLAS_REFERENCE_SCALES names another
    folder (tests); the package's are part of the publication's fingerprint."""
    value = os.environ.get("ATLAS_REFERENCE_SCALES", "").strip()
    return Path(value).resolve() if value else CONFIG_DIR / "reference_scales"


def atlas_home() -> Path:
    return Path(os.environ.get("ATLAS_HOME", PROJECT_ROOT / "var")).resolve()


def duckdb_path() -> Path:
    return Path(os.environ.get("ATLAS_DUCKDB", atlas_home() / "atlas.duckdb")).resolve()


def snapshot_dir() -> Path:
    return atlas_home() / "snapshots"


def mirror_root() -> Path | None:
    value = os.environ.get("ATLAS_MIRROR", "").strip()
    return Path(value).resolve() if value else None
