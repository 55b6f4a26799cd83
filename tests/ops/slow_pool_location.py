"""A code location for the dead-run test: one asset in the project's `duckdb` pool that holds its slot for a
while (it waits for a file that never comes, up to 10 minutes), and one quick asset in the same pool."""

import os
import time
from pathlib import Path

import dagster as dg


@dg.asset(pool="duckdb")
def slow_writer(context: dg.AssetExecutionContext) -> None:
    release = Path(os.environ["ATLAS_TEST_RELEASE_FILE"])
    context.log.info(f"holding the duckdb slot until {release} exists")
    deadline = time.monotonic() + 600
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.2)


@dg.asset(pool="duckdb")
def quick_writer() -> None:
    pass


defs = dg.Definitions(assets=[slow_writer, quick_writer], executor=dg.in_process_executor)
