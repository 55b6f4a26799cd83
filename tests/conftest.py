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


@pytest.fixture(scope="session")
def ui_server(tmp_path_factory):
    """One real `dagster dev` for the whole session (tests/ui/server.py: the project's location and the test
    location `broken_input`, a temporary instance and ATLAS_HOME, sources from the real mirror, a small
    simulated panel for a fit), started the first time a test asks for it: starting one costs ~30 s."""
    require_shared_data()
    from tests.ui.server import UIServer, small_fit_state

    work = tmp_path_factory.mktemp("ui")
    home = work / "atlas_home"
    model_yaml = small_fit_state(work, home)
    server = UIServer(work, {"ATLAS_HOME": str(home), "ATLAS_MIRROR": str(MIRROR), "ATLAS_MODEL_CONFIG": str(model_yaml)})
    yield server.start()
    server.stop()
