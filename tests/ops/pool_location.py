"""A small code location for the operations tests: one asset in the project's `duckdb` pool that holds its slot
(it waits for a file that never comes, up to 10 minutes: the dead-run test kills it), one quick asset in the
same pool and a schedule for it (the PostgreSQL storage test)."""

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


quick_schedule = dg.ScheduleDefinition(name="quick_schedule", target=[quick_writer], cron_schedule="0 3 * * *",
                                       default_status=dg.DefaultScheduleStatus.RUNNING)

defs = dg.Definitions(assets=[slow_writer, quick_writer], schedules=[quick_schedule], executor=dg.in_process_executor)
