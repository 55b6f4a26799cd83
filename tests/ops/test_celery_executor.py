"""Past one machine: validation_job on dagster-celery (ATLAS_VALIDATION_EXECUTOR=celery, deploy/celery/celery.yaml).

The definitions load and validate with the Celery executor on validation_job (and only there); a wrong choice is
refused by name. Then a real run: Debian's redis-server (`make setup` installs it when missing) on 127.0.0.1 and
a free port as the broker and result backend, a real worker started with the project's worker command
(`dagster-celery worker start -A dagster_celery.app -y deploy/celery/celery.yaml`), and one partition of a job on
the project's validation executor launched through the Dagster CLI: its step runs in the worker, not in the run's
process, and the instance records it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import dagster as dg
import pytest

from atlas_assets.defs.executors import EXECUTOR_VARIABLE, validation_executor
from tests.integration.dagster_dev import free_port

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BIN = PROJECT_ROOT / ".venv" / "bin"
CELERY_YAML = PROJECT_ROOT / "deploy" / "celery" / "celery.yaml"
PROBE_LOCATION = Path(__file__).resolve().parent / "celery_location.py"
WORKER_NAME = "atlas-test"

pytestmark = pytest.mark.slow


def celery_env(tmp_path: Path, port: int) -> dict[str, str]:
    home = tmp_path / "dagster_home"
    home.mkdir(exist_ok=True)
    shutil.copy(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    return {**os.environ, "DAGSTER_HOME": str(home), "ATLAS_HOME": str(tmp_path / "atlas_home"),
            EXECUTOR_VARIABLE: "celery", "ATLAS_CELERY_BROKER": f"redis://127.0.0.1:{port}/0",
            "ATLAS_CELERY_BACKEND": f"redis://127.0.0.1:{port}/1", "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


def test_definitions_load_and_validate_with_the_celery_executor(tmp_path, monkeypatch):
    env = celery_env(tmp_path, 1)  # nothing listens: loading and validating must not need the broker
    # what `dagster definitions validate` checks, and what each job runs on, in one process
    probe = """
import json
import dagster as dg
from atlas_assets.definitions import defs
dg.Definitions.validate_loadable(defs)
jobs = {name: defs.resolve_job_def(name) for name in ("atlas_job", "cost_job", "validation_job", "publish_job")}
validation = jobs["validation_job"]
print(json.dumps({"executors": {name: job.executor_def.name for name, job in jobs.items()},
                  "partitions": len(validation.partitions_def.get_partition_keys()),
                  "run_config": dg.validate_run_config(validation, {})}, default=str))
"""
    shown = subprocess.run([str(BIN / "python"), "-c", probe], cwd=PROJECT_ROOT, env=env, capture_output=True,
                           text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr[-3000:]
    facts = json.loads(shown.stdout.strip().splitlines()[-1])
    assert facts["executors"] == {"atlas_job": "in_process", "cost_job": "in_process", "validation_job": "celery",
                                  "publish_job": "in_process"}
    assert facts["partitions"] > 1
    # the broker and backend resolved from the environment into the executor's config
    execution = facts["run_config"]["execution"]["celery"]
    assert (execution["broker"], execution["backend"]) == (env["ATLAS_CELERY_BROKER"], env["ATLAS_CELERY_BACKEND"])
    assert execution["config_source"]["task_acks_late"] is True  # deploy/celery/celery.yaml, as the workers read it

    monkeypatch.setenv(EXECUTOR_VARIABLE, "celry")
    with pytest.raises(ValueError, match=r"ATLAS_VALIDATION_EXECUTOR='celry': expected one of in_process, celery"):
        validation_executor()
    monkeypatch.delenv(EXECUTOR_VARIABLE)
    assert validation_executor() is None


def redis_server() -> str:
    found = shutil.which("redis-server") or ("/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None)
    if found:
        return found
    why = "redis-server not found: `make setup` installs Debian's redis-server with apt-get (as root)"
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


def wait_until(predicate, timeout: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise TimeoutError(f"{what} not within {timeout}s" + (f":\n{log.read_text(errors='replace')[-3000:]}" if log else ""))


def answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def test_a_partition_runs_on_a_celery_worker_through_a_real_redis_broker(tmp_path):
    port = free_port()
    env = celery_env(tmp_path, port)
    broker = subprocess.Popen([redis_server(), "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                               "--appendonly", "no", "--dir", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    worker_log = tmp_path / "worker.log"
    worker = None
    try:
        wait_until(lambda: answers(port), 20, "redis-server answering PING")
        # the instance's storage created once, before two processes open it (they raced to stamp its schema version)
        dg.DagsterInstance.from_config(env["DAGSTER_HOME"]).dispose()
        # the project's worker command; its own process group, so the celery process it starts stops with it
        with worker_log.open("wb") as log:
            worker = subprocess.Popen(
                [str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app", "-y", str(CELERY_YAML),
                 "-n", WORKER_NAME, "--", "--concurrency", "1"],
                cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        # launched while the worker starts: the step waits on the broker's queue until a worker takes it
        fold = "masked_0"
        run = subprocess.run([str(BIN / "dagster"), "job", "execute", "-f", str(PROBE_LOCATION), "-j", "probe_job",
                              "--tags", json.dumps({"dagster/partition": fold})], cwd=PROJECT_ROOT, env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, (run.stdout + run.stderr)[-3000:] + worker_log.read_text(errors="replace")[-3000:]
        assert b"ready." in worker_log.read_bytes()

        with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
            (record,) = instance.get_run_records()
            assert record.dagster_run.status == dg.DagsterRunStatus.SUCCESS
            assert record.dagster_run.tags["dagster/partition"] == fold
            events = [e for e in instance.all_logs(record.dagster_run.run_id)]
            handed = [e for e in events if e.message and "in celery worker" in e.message]
            assert handed, [e.message for e in events]
            worker_host = handed[0].dagster_event.engine_event_data.metadata["Celery worker"].value
            assert worker_host == f"{WORKER_NAME}@{socket.gethostname()}"
            materialization = instance.get_latest_materialization_event(dg.AssetKey("fold_probe"))
            metadata = materialization.asset_materialization.metadata
            assert materialization.asset_materialization.partition == fold == metadata["fold"].value
            # the step ran in the worker's process, not in the run's
            pids = {e.dagster_event.event_type: e.dagster_event.pid for e in events if e.dagster_event}
            assert pids[dg.DagsterEventType.STEP_START] == metadata["pid"].value != pids[dg.DagsterEventType.RUN_START]
        assert "fold_probe" in worker_log.read_text(errors="replace")
    finally:
        if worker is not None:
            stop(worker)
        stop(broker)
