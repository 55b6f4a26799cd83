"""Shared test fixtures: where the real data lives, and a fresh project state per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("ATLAS_SHARED_DATA", PROJECT_ROOT.parent / "shared" / "data"))
MIRROR = SHARED_DATA / "mirror"


def require_shared_data() -> Path:
    if not MIRROR.is_dir():
        pytest.skip(f"real data mirror not found at {MIRROR} (set ATLAS_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture
def atlas_env(tmp_path, monkeypatch):
    """A fresh ATLAS_HOME (DuckDB, snapshots) reading sources from the real mirror."""
    require_shared_data()
    home = tmp_path / "atlas_home"
    monkeypatch.setenv("ATLAS_HOME", str(home))
    monkeypatch.delenv("ATLAS_DUCKDB", raising=False)
    monkeypatch.setenv("ATLAS_MIRROR", str(MIRROR))
    return home
