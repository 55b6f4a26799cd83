"""Alerts: a line in a local alerts log (ATLAS_HOME/alerts.log, JSON per line) for every failed run, naming
the failed steps and every check that did not pass in it (a failed blocking check fails its run, so it is
always reported; WARN checks that did not pass in a failed run are listed too). The daemon evaluates the
sensor (`dagster dev` starts one); a mail or chat hook would read the same lines. A failed scrape is an ERROR
check that does not fail its run (the last good snapshot stays in use): the check writes its own line.

Dead runs: a run whose process was killed (a CLI run, or a run the daemon launched) stays STARTED and keeps
its `duckdb` pool slot. Dagster's run monitoring fails such runs only when the run launcher can tell a dead
worker, which the default launcher cannot; `ProcessCheckedRunLauncher` (dagster.yaml `run_launcher`) can:
it finds the run's process id in its event log and looks the process up on this machine. Run monitoring
then fails the run (and the sensor above reports it), and `free_slots_after_run_end_seconds` frees its slots.
"""

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
from dagster._core.launcher import CheckRunHealthResult, DefaultRunLauncher, WorkerStatus

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


def scrape_alert(context: dg.AssetCheckExecutionContext, asset: str, message: str) -> dict:
    """The alert of a failed scrape (an ERROR check that does not fail its run), in the same shape."""
    return {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "job": context.run.job_name,
            "run_id": context.run.run_id, "partition": None, "message": message, "failed_steps": [],
            "failed_checks": [{"check": "scrape_succeeded", "asset": asset, "severity": "ERROR"}]}


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


# A process that started this long after the run recorded its id is another process under a reused id.
PID_REUSE_SLACK_SECONDS = 2.0


def run_process(instance: dg.DagsterInstance, run_id: str) -> tuple[int, float] | None:
    """The process that executes a run, from its event log: (pid, when it was recorded), or None if not yet known.
    The first engine event with a `pid` is the run worker ("Started process for run", or the CLI's
    "Executing steps in process")."""
    for record in instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT).records:
        event = record.event_log_entry.dagster_event
        pid = event.engine_event_data.metadata.get("pid") if event and event.engine_event_data else None
        if pid is not None:
            return int(pid.value), record.event_log_entry.timestamp
    return None


def _process_start_time(pid: int) -> tuple[str, float] | None:
    """(state, start time as epoch seconds) of a process from /proc, or None where /proc cannot tell."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
    except (OSError, IndexError, StopIteration, ValueError):
        return None
    return fields[0], boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def process_alive(pid: int, recorded_at: float) -> bool:
    """Whether the process that recorded `pid` at `recorded_at` still runs on this machine: not gone, not a zombie,
    and not a newer process that reuses the id."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    found = _process_start_time(pid)
    if found is None:
        return True
    state, started = found
    return state not in ("Z", "X") and started <= recorded_at + PID_REUSE_SLACK_SECONDS


class ProcessCheckedRunLauncher(DefaultRunLauncher):
    """Dagster's default launcher, plus a worker health check for run monitoring: a STARTED run whose process is
    gone from this machine is reported FAILED (whoever started it: the daemon, the UI or the CLI). A run whose
    process is not known yet counts as running. Process ids are looked up on the machine that runs the daemon:
    with runs on several hosts, use a launcher of the platform that runs them (docker, k8s) instead."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        found = run_process(self._instance, run.run_id)
        if found is None:
            return CheckRunHealthResult(WorkerStatus.RUNNING, "no run process recorded yet")
        pid, recorded_at = found
        if process_alive(pid, recorded_at):
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"run process {pid} is running", run_worker_id=str(pid))
        # A run records its end before its process exits: read the status again, so that a run that finished
        # since monitoring listed it as STARTED is not failed after the fact.
        current = self._instance.get_run_by_id(run.run_id)
        if current is not None and current.is_finished:
            return CheckRunHealthResult(WorkerStatus.SUCCESS, f"run ended {current.status.value}", run_worker_id=str(pid))
        return CheckRunHealthResult(WorkerStatus.FAILED, f"run process {pid} is gone (killed or crashed) on "
                                    f"{os.uname().nodename}", run_worker_id=str(pid))
