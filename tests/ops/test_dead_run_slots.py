"""A killed run frees its `duckdb` pool slot by itself once the daemon runs (dagster.yaml: ProcessCheckedRunLauncher
+ run monitoring + free_slots_after_run_end_seconds).

A CLI run of tests/ops/pool_location.py takes the pool's one slot and is killed with SIGKILL: it stays
STARTED and keeps the slot (the problem): the next pool run waits. With `dagster-daemon run` started on the same
instance, run monitoring finds the run's process gone, fails the run, the slot is freed and the waiting run
goes through.
The instance is the project's dagster.yaml with only the two monitoring intervals shortened.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from atlas_assets.defs.alerts import ProcessCheckedRunLauncher, run_process
from dagster._core.launcher import WorkerStatus

PROJECT_ROOT = Path(__file__).resolve().parents[2]
LOCATION = Path(__file__).resolve().parent / "pool_location.py"
BIN = PROJECT_ROOT / ".venv" / "bin"

pytestmark = pytest.mark.slow


def wait_for(what: str, condition, timeout: float, logs: list[Path] = ()) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    tails = "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for p in logs if p.exists())
    raise AssertionError(f"{what}: not within {timeout}s\n{tails}")


def start(argv: list[str], env: dict, log: Path) -> subprocess.Popen:
    # dagster processes started from a non-interactive shell ignore SIGINT unless it is reset to the default
    return subprocess.Popen(argv, cwd=PROJECT_ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), start_new_session=True)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@pytest.fixture
def instance_env(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    config = yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text())
    assert config["run_launcher"] == {"module": "atlas_assets.defs.alerts", "class": "ProcessCheckedRunLauncher"}
    assert config["run_monitoring"]["enabled"] and config["run_monitoring"]["free_slots_after_run_end_seconds"] > 0
    config["run_monitoring"].update(poll_interval_seconds=1, free_slots_after_run_end_seconds=1)
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "DAGSTER_HOME": str(home), "ATLAS_TEST_RELEASE_FILE": str(tmp_path / "release")}
    return env, home, tmp_path


def test_a_killed_run_is_failed_by_run_monitoring_and_frees_its_pool_slot(instance_env, monkeypatch):
    env, home, tmp_path = instance_env
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    instance = dg.DagsterInstance.get()
    assert isinstance(instance.run_launcher, ProcessCheckedRunLauncher)
    slots = lambda: instance.event_log_storage.get_concurrency_info("duckdb")  # noqa: E731

    cli_log = tmp_path / "cli.log"
    cli = start([str(BIN / "dagster"), "asset", "materialize", "-f", str(LOCATION), "--select", "slow_writer"], env, cli_log)
    try:
        wait_for("the CLI run holds the duckdb slot", lambda: slots().active_slot_count == 1, 120, [cli_log])
        [run] = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.STARTED
        pid, _ = run_process(instance, run.run_id)
        assert pid == cli.pid  # the CLI runs the steps in its own process
        assert instance.run_launcher.check_run_worker_health(run).status == WorkerStatus.RUNNING
    finally:
        os.killpg(cli.pid, signal.SIGKILL)
        cli.wait(timeout=30)

    # the problem: the dead run is still STARTED and still holds the slot
    time.sleep(2)
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED
    assert slots().active_run_ids == {run.run_id}
    health = instance.run_launcher.check_run_worker_health(run)
    assert health.status == WorkerStatus.FAILED and f"run process {pid} is gone" in health.msg

    # the next writer queues behind the dead run's slot
    quick_log = tmp_path / "quick.log"
    quick = start([str(BIN / "dagster"), "asset", "materialize", "-f", str(LOCATION), "--select", "quick_writer"], env, quick_log)
    daemon_log = tmp_path / "daemon.log"
    daemon = None
    try:
        wait_for("the next run waits for the slot", lambda: "blocked by limit for pool duckdb" in quick_log.read_text(), 120, [quick_log])
        assert quick.poll() is None
        daemon = start([str(BIN / "dagster-daemon"), "run", "-f", str(LOCATION)], env, daemon_log)
        wait_for("run monitoring fails the dead run",
                 lambda: instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE, 120, [daemon_log])
        failure = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE).records
        assert f"run process {pid} is gone" in failure[0].event_log_entry.dagster_event.message
        # the slot is freed and the waiting run takes it and finishes
        assert quick.wait(timeout=120) == 0, quick_log.read_text()[-3000:]
        latest = instance.get_runs(limit=1)[0]
        assert latest.run_id != run.run_id and latest.status == dg.DagsterRunStatus.SUCCESS
        # a run that ended before its process exited is never failed after the fact (monitoring listed it as
        # STARTED a moment before): its process is gone, but its health is its recorded end
        listed_as_started = latest.with_status(dg.DagsterRunStatus.STARTED)
        assert instance.run_launcher.check_run_worker_health(listed_as_started).status == WorkerStatus.SUCCESS
        assert slots().active_slot_count == 0 and slots().slot_count == 1  # nothing held, the pool intact
    finally:
        if quick.poll() is None:
            os.killpg(quick.pid, signal.SIGKILL)
            quick.wait(timeout=10)
        if daemon is not None:
            stop(daemon)


def test_a_run_whose_process_id_was_reused_counts_as_dead(instance_env, monkeypatch):
    """A pid recorded before this process started belongs to a dead run, even though the id is alive now."""
    from atlas_assets.defs.alerts import process_alive

    assert process_alive(os.getpid(), time.time())
    started_long_ago = time.time() - 10 * 24 * 3600
    assert not process_alive(os.getpid(), started_long_ago)  # this process started after that record: a reused id
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_for("the child exits", lambda: Path(f"/proc/{zombie.pid}/stat").read_text().split()[2] == "Z", 30)
    assert not process_alive(zombie.pid, time.time())  # exited, not yet reaped: gone
    zombie.wait()
    assert not process_alive(zombie.pid, time.time())
