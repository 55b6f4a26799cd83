"""The one Definitions object: every stage's assets and checks, the shared resources, the jobs and schedule."""

from __future__ import annotations

import dagster as dg

from atlas_assets.defs import clean, cost, ingest, model, outputs, publish, registry, validation
from atlas_assets.defs.alerts import run_failure_alerts
from atlas_assets.defs.executors import validation_executor
from atlas_assets.resources import build_resources

# Stage packages in pipeline order; each module inside defines assets and the checks beside them.
STAGES = {
    "registry": registry, "ingest": ingest, "clean": clean, "model": model, "outputs": outputs, "cost": cost,
    "validation": validation, "publish": publish,
}

stage_assets = [
    asset for group, package in STAGES.items() for asset in dg.load_assets_from_package_module(package, group_name=group)
]
stage_checks = [check for package in STAGES.values() for check in dg.load_asset_checks_from_package_module(package)]

# The main job: everything up to the outputs, in dependency order. The validation folds are partitioned
# (one run per study x fold: validation_job), and the summary and publication need all of them (publish_job).
folds = dg.AssetSelection.assets("validation_fold")
# The cost model is its own job: a cost fit that fails its gates blocks the cost tables only, and must not stop
# the capability refresh, its validation and its publication (make run runs it and reports a failure).
cost_group = dg.AssetSelection.groups("cost")
atlas_job = dg.define_asset_job(
    "atlas_job",
    selection=dg.AssetSelection.all() - folds.downstream() - cost_group,
    description="Scrape every source, rebuild the registry and the cleaned matrix, fit the model, compute its outputs.",
)
cost_job = dg.define_asset_job(
    "cost_job",
    selection=cost_group,
    description="The cost model on the latest ingest and capability fit: cost observations, the cost fit and its gates, "
    "cost index and the capability-vs-cost frontier.",
)
# In process by default; on Celery workers with ATLAS_VALIDATION_EXECUTOR=celery (deploy/celery/, README).
validation_job = dg.define_asset_job(
    "validation_job",
    selection=folds,
    executor_def=validation_executor(),
    description="One validation fold (a partition): refit without its held-out cells and score model and baselines.",
)
# Intraday (issue 13): the first results of models outside the fit (new, or below the coverage filter) are
# calibrated in against the current fit in seconds; the fit itself (group model) is never run by this job, so a
# change of the fit's own inputs waits for the nightly refresh, which refits only then.
calibrate_job = dg.define_asset_job(
    "calibrate_job",
    selection=dg.AssetSelection.groups("registry", "ingest", "clean") | dg.AssetSelection.assets("calibrated_states"),
    description="Scrape, registry and cleaning, then calibrate-in of every model outside the current fit "
    "(calibrated_states): no refit.",
)
publish_job = dg.define_asset_job(
    "publish_job",
    selection=folds.downstream() - folds,
    description="Summarize every fold of the current fit, publish one fingerprinted version, build the report.",
)

nightly_refresh = dg.ScheduleDefinition(
    name="nightly_refresh",
    job=atlas_job,
    cron_schedule="0 3 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Nightly refresh of every asset; sources answer conditional requests, and a step whose inputs and "
    "specification are unchanged reuses its last result and says why (atlas_assets/defs/refresh.py).",
)

nightly_cost_refresh = dg.ScheduleDefinition(
    name="nightly_cost_refresh",
    job=cost_job,
    cron_schedule="0 4 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="The cost model after the nightly refresh (an unchanged cost input and specification reuses its fit).",
)

intraday_calibrate = dg.ScheduleDefinition(
    name="intraday_calibrate",
    job=calibrate_job,
    cron_schedule="0 9,15,21 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Between nightly refreshes: new results of models outside the fit are calibrated in (seconds, no "
    "refit); an unchanged source or table is reused and says why.",
)

defs = dg.Definitions(
    # Steps run in the run's own process: a step process costs ~5 s of imports here, DuckDB admits one
    # writer anyway, and the Stan fit runs in a process of its own (Dagster Pipes). The "duckdb" pool
    # still serializes writers across concurrent runs (the nightly schedule vs a UI launch).
    executor=dg.in_process_executor,
    assets=stage_assets,
    asset_checks=stage_checks,
    jobs=[atlas_job, cost_job, validation_job, publish_job, calibrate_job],
    schedules=[nightly_refresh, nightly_cost_refresh, intraday_calibrate],
    sensors=[run_failure_alerts],
    resources=build_resources(),
)
