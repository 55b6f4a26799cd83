"""Resources, configured in one place and shared by every stage."""

from __future__ import annotations

import dagster as dg
from dagster_duckdb import DuckDBResource

from atlas_assets import settings
from atlas_assets.ingest.fetch import SourceFetcher


def build_resources() -> dict[str, object]:
    settings.atlas_home().mkdir(parents=True, exist_ok=True)
    return {
        # One DuckDB file holds every table; writers are serialized by the "duckdb" pool.
        "duckdb": DuckDBResource(database=str(settings.duckdb_path())),
        "fetcher": SourceFetcher.from_environment(),
        # The Stan fit runs in its own process and reports back through Dagster Pipes.
        "pipes_subprocess_client": dg.PipesSubprocessClient(),
    }
