"""A second code location for the browser test: the project's own registry check fed a broken registry.

`broken_input/registry_benchmarks` writes the real benchmark registry into this location's own DuckDB file,
then breaks it the way a bad edit would (one benchmark's floor set to 1.5, outside [0, 1)). The
real blocking check `registry_benchmarks_expectations` judges it, and the real source asset
`epoch_hub_scores`, which depends on the registry, is downstream of it: it must not run. Keys carry the
`broken_input` prefix so nothing collides with the `atlas_assets` location served beside it.
"""

from __future__ import annotations

import dagster as dg
from dagster_duckdb import DuckDBResource

from atlas_assets import settings
from atlas_assets.defs.ingest.assets import SOURCES, build_source_asset
from atlas_assets.defs.registry.checks import registry_benchmarks_expectations
from atlas_assets.ingest.fetch import SourceFetcher
from atlas_assets.registry.benchmarks import load_benchmark_registry
from atlas_assets.storage import ensure_source_tables, replace_rows

PREFIX = "broken_input"
GROUP = "broken_input"
BROKEN_FLOOR = 1.5


@dg.asset(name="registry_benchmarks", pool="duckdb", description="The real benchmark registry with one floor out of range.")
def broken_registry_benchmarks(duckdb: DuckDBResource) -> dg.MaterializeResult:
    registry = load_benchmark_registry()
    with duckdb.get_connection() as conn:
        ensure_source_tables(conn)
        replace_rows(conn, "registry_benchmarks", registry.benchmarks)
        first = conn.execute("SELECT benchmark FROM registry_benchmarks ORDER BY benchmark LIMIT 1").fetchone()[0]
        conn.execute("UPDATE registry_benchmarks SET floor = ? WHERE benchmark = ?", [BROKEN_FLOOR, first])
    return dg.MaterializeResult(metadata={"broken_benchmark": first, "broken_floor": BROKEN_FLOOR})


def _prefixed(definition: dg.AssetsDefinition) -> dg.AssetsDefinition:
    keys = {dg.AssetKey(name) for name in ("registry_benchmarks", "epoch_hub_scores")}
    replacements = {key: key.with_prefix(PREFIX) for key in keys}
    own = {key: GROUP for key in definition.keys if key in replacements}
    return definition.with_attributes(asset_key_replacements=replacements, group_names_by_key=own)


epoch_spec = next(spec for spec in SOURCES if spec.name == "epoch_hub")
home = settings.atlas_home() / PREFIX
home.mkdir(parents=True, exist_ok=True)

defs = dg.Definitions(
    executor=dg.in_process_executor,
    assets=[_prefixed(broken_registry_benchmarks), _prefixed(build_source_asset(epoch_spec))],
    asset_checks=[_prefixed(registry_benchmarks_expectations)],
    resources={
        "duckdb": DuckDBResource(database=str(home / "broken_input.duckdb")),
        "fetcher": SourceFetcher(snapshot_dir=str(home / "snapshots"), mirror=str(settings.mirror_root() or "") or None),
    },
)
