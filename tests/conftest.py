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
def real_run(tmp_path_factory):
    """Registry, ingest and clean materialized once per session on the real mirror, checks included: the
    real-data tests that only read its tables share it (each real-data run costs ~40 s); a test that writes
    starts from a copy (`copy_real_run`). Yields (ATLAS_HOME, the run's result)."""
    import dagster as dg

    require_shared_data()
    home = tmp_path_factory.mktemp("real_run") / "atlas_home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATLAS_HOME", str(home))
        mp.delenv("ATLAS_DUCKDB", raising=False)
        mp.setenv("ATLAS_MIRROR", str(MIRROR))
        # the stage assets and checks of the one Definitions, with resources built now (the module-level
        # `defs` binds its DuckDB path when first imported, possibly elsewhere)
        from atlas_assets import definitions
        from atlas_assets.resources import build_resources

        with dg.DagsterInstance.ephemeral() as instance:
            result = dg.materialize(
                [*definitions.stage_assets, *definitions.stage_checks],
                resources=build_resources(),
                selection=dg.AssetSelection.groups("registry", "ingest", "clean"),
                instance=instance,
                raise_on_error=False,
            )
    return home, result


def copy_real_run(real_run, home: Path) -> Path:
    """A private copy of the shared real run's ATLAS_HOME (DuckDB and snapshots), as a good earlier run."""
    import shutil

    shutil.copytree(real_run[0], home)
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
