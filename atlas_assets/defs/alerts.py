"""Alerts: a line in a local alerts log (ATLAS_HOME/alerts.log, JSON per line) for every failed run, naming
the failed steps and every check that did not pass in it (a failed blocking check fails its run, so it is
always reported; WARN checks that did not pass in a failed run are listed too). The daemon evaluates the
sensor (`dagster dev` starts one); a mail or chat hook would read the same lines."""

import json
from datetime import datetime, timezone

import dagster as dg

from atlas_assets import settings


def alerts_log_path():
    return settings.atlas_home() / "alerts.log"


def failure_alert(instance: dg.DagsterInstance, run: dg.DagsterRun, message: str | None) -> dict:
    """The alert of one failed run: its job, failed steps and the checks that did not pass."""
    records = instance.get_records_for_run(run.run_id).records
    failed_steps, failed_checks = [], []
    for record in records:
        event = record.event_log_entry.dagster_event
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.STEP_FAILURE:
            failed_steps.append(event.step_key)
        elif event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            evaluation = event.event_specific_data
            if not evaluation.passed:
                failed_checks.append({"check": evaluation.check_name,
                                      "asset": evaluation.asset_key.to_user_string(),
                                      "severity": evaluation.severity.value})
    return {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "job": run.job_name,
            "run_id": run.run_id, "partition": run.tags.get("dagster/partition"), "message": message,
            "failed_steps": failed_steps, "failed_checks": failed_checks}


def write_alert(alert: dict) -> None:
    path = alerts_log_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as log:
        log.write(json.dumps(alert, sort_keys=True) + "\n")


@dg.run_failure_sensor(
    name="run_failure_alerts",
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Writes one JSON line per failed run to ATLAS_HOME/alerts.log: job, partition, failed steps and "
    "every check that did not pass (a failed blocking check fails the run).",
)
def run_failure_alerts(context: dg.RunFailureSensorContext) -> None:
    message = context.failure_event.message if context.failure_event else None
    alert = failure_alert(context.instance, context.dagster_run, message)
    write_alert(alert)
    context.log.info(f"alert written to {alerts_log_path()}: {alert['failed_steps']} {alert['failed_checks']}")
