"""Fixtures of the fault suite: one local HTTP server and one seeded home per session, a fresh copy per case."""

from __future__ import annotations

import pytest

from atlas_assets.defs.ingest import assets as ingest_assets
from atlas_assets.registry.benchmarks import load_benchmark_registry
from tests.faults.harness import (EPOCH_PATH, REGISTRY, SWE_PATH, Home, LocalServer, copy_home, good_routes,
                                  local_source, seed_home)


@pytest.fixture(scope="session")
def server():
    local = LocalServer()
    yield local
    local.close()


@pytest.fixture(scope="session")
def fixture_registry():
    return load_benchmark_registry(REGISTRY)


def _isolate(patch: pytest.MonkeyPatch, root, registry) -> None:
    patch.setenv("ATLAS_HOME", str(root))
    patch.delenv("ATLAS_DUCKDB", raising=False)
    patch.delenv("ATLAS_MIRROR", raising=False)
    patch.delenv("ATLAS_MAX_SNAPSHOT_AGE_DAYS", raising=False)
    patch.setattr(ingest_assets, "load_benchmark_registry", lambda: registry)


@pytest.fixture(scope="session")
def template(tmp_path_factory, server, fixture_registry) -> Home:
    root = tmp_path_factory.mktemp("fault_template") / "home"
    with pytest.MonkeyPatch.context() as patch:
        return seed_home(root, server, lambda: _isolate(patch, root, fixture_registry))


@pytest.fixture
def home(template, tmp_path, monkeypatch, server, fixture_registry) -> Home:
    """A copy of the seeded home, the environment pointing at it, the server answering well."""
    fresh = copy_home(template, tmp_path / "home")
    _isolate(monkeypatch, fresh.root, fixture_registry)
    good_routes(server)
    return fresh


@pytest.fixture
def epoch(server):
    return local_source("epoch_hub", server.url(EPOCH_PATH))


@pytest.fixture
def swe_bench(server):
    return local_source("swe_bench", server.url(SWE_PATH))
