"""Fixtures of the publish tests: one synthetic fit per session, a fresh ATLAS_HOME per test."""

from __future__ import annotations

import pytest

from tests.publish.fixtures import SPEC_SHA256, build_bundle, make_home


@pytest.fixture(scope="session")
def bundle(tmp_path_factory):
    return build_bundle(tmp_path_factory.mktemp("publish_fit"))


@pytest.fixture
def home(tmp_path, monkeypatch, bundle):
    """A fresh ATLAS_HOME holding the fixture fit and its tables. The specification now in force is pinned
    to the one the fixture fit was made under: the real fingerprint hashes every file of the package, which
    other work in this tree edits while tests run."""
    home = tmp_path / "atlas_home"
    monkeypatch.setenv("ATLAS_HOME", str(home))
    monkeypatch.delenv("ATLAS_DUCKDB", raising=False)
    monkeypatch.setattr("atlas_assets.defs.outputs.assets.specification_fingerprint", lambda: SPEC_SHA256)
    make_home(home, bundle)
    return home
