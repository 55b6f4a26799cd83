"""The PostgreSQL storage switch (deploy/dagster.postgres.yaml), against a real PostgreSQL server started here.

The test starts Debian's PostgreSQL server itself (`make setup` installs the package when missing) in a
temporary folder, on 127.0.0.1 and a free port, with password authentication; as root it runs the server as
the `postgres` user (the server refuses root). It then runs a small job (tests/ops/pool_location.py) and stops its
schedule through the Dagster CLI with that instance, and reads the run, its events, the pool and the schedule
state back, from Dagster and from the database itself.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from tests.integration.dagster_dev import free_port

PROJECT_ROOT = Path(__file__).resolve().parents[2]
VARIANT = PROJECT_ROOT / "deploy" / "dagster.postgres.yaml"
DAGSTER = PROJECT_ROOT / ".venv" / "bin" / "dagster"
SMALL_LOCATION = Path(__file__).resolve().parent / "pool_location.py"

pytestmark = pytest.mark.slow


def server_binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if found:
        return Path(found[-1]).parent
    if shutil.which("pg_ctl") and shutil.which("initdb"):
        return Path(shutil.which("pg_ctl")).parent
    why = "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin): `make setup` installs Debian's postgresql as root"
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


class PostgresServer:
    """One throwaway cluster: initdb, pg_ctl start/stop, as a non-root user."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.user = None if os.geteuid() != 0 else "postgres"
        if self.user is not None:
            try:
                pwd.getpwnam(self.user)
            except KeyError:
                pytest.skip("running as root and no `postgres` user to run the server as (Debian's package creates it)")
        self.root = Path(tempfile.mkdtemp(prefix="atlas-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.password = "atlas-test-password"
        if self.user is not None:
            shutil.chown(self.root, self.user, self.user)

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        command = [str(self.bindir / argv[0]), *argv[1:]]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=self.root)
        assert result.returncode == 0, f"{argv[0]} failed:\n{result.stdout}\n{result.stderr}"
        return result

    def start(self) -> "PostgresServer":
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self.user is not None:
            shutil.chown(pwfile, self.user, self.user)
        self.run("initdb", "-D", str(self.data), "-U", "atlas", f"--pwfile={pwfile}", "-A", "scram-sha-256",
                 "--no-sync", "-E", "UTF8")
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off"
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-o", options, "-w", "-t", "60", "start")
        return self

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def connect(self, db: str):
        import psycopg2

        return psycopg2.connect(host="127.0.0.1", port=self.port, user="atlas", password=self.password, dbname=db)


@pytest.fixture(scope="module")
def postgres():
    server = PostgresServer(server_binaries()).start()
    try:
        conn = server.connect("postgres")
        conn.autocommit = True
        with conn.cursor() as cursor:
            cursor.execute("CREATE DATABASE dagster")
        conn.close()
        yield server
    finally:
        server.stop()


def test_postgres_variant_differs_from_the_default_instance_only_in_storage():
    default = yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text())
    variant = yaml.safe_load(VARIANT.read_text())
    assert set(variant.pop("storage")) == {"postgres"}
    assert variant == default  # pools, run monitoring, retention: no drift between the two files


def test_a_job_runs_against_postgres_storage_and_reads_back(postgres, tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(VARIANT, home / "dagster.yaml")
    env = {**os.environ, "DAGSTER_HOME": str(home), "ATLAS_HOME": str(tmp_path / "atlas_home"),
           "DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": str(postgres.port), "DAGSTER_PG_DB": "dagster",
           "DAGSTER_PG_USERNAME": "atlas", "DAGSTER_PG_PASSWORD": postgres.password}
    env.pop("ATLAS_DUCKDB", None)

    # a small job through the CLI: one asset in the `duckdb` pool, so its slot claim goes through PostgreSQL too
    run = subprocess.run([str(DAGSTER), "asset", "materialize", "-f", str(SMALL_LOCATION), "--select", "quick_writer"],
                         cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    # a schedule (RUNNING by default), stopped through the CLI: its state lands in the schedule storage
    stop = subprocess.run([str(DAGSTER), "schedule", "stop", "quick_schedule", "-f", str(SMALL_LOCATION)],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert stop.returncode == 0, (stop.stdout + stop.stderr)[-4000:]

    # read back through Dagster, in a fresh process with the same instance
    reader = subprocess.run([str(PROJECT_ROOT / ".venv" / "bin" / "python"), "-c", READ_BACK], cwd=PROJECT_ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert reader.returncode == 0, reader.stderr[-4000:]
    found = yaml.safe_load(reader.stdout)
    assert found["storages"] == ["PostgresRunStorage", "PostgresEventLogStorage", "PostgresScheduleStorage"]
    assert len(found["runs"]) == 1
    [(run_id, status)] = found["runs"].items()
    assert status == "SUCCESS"
    assert found["materialized"] == ["quick_writer"]
    assert found["pool"] == {"slot_count": 1, "active_slot_count": 0}  # the pool's limit, from dagster.yaml
    assert found["schedules"] == {"quick_schedule": "STOPPED"}

    # and the rows are in PostgreSQL itself, not in SQLite files under DAGSTER_HOME
    with postgres.connect("dagster") as conn, conn.cursor() as cursor:
        cursor.execute("SELECT run_id, status FROM runs")
        assert cursor.fetchall() == [(run_id, "SUCCESS")]
        cursor.execute("SELECT count(*) FROM event_logs WHERE run_id = %s AND dagster_event_type = 'ASSET_MATERIALIZATION'", [run_id])
        assert cursor.fetchone()[0] == 1
        cursor.execute("SELECT instigator_type, status FROM instigators")
        assert cursor.fetchall() == [("SCHEDULE", "STOPPED")]
        cursor.execute("SELECT concurrency_key, count(*) FROM concurrency_slots GROUP BY 1")
        assert cursor.fetchall() == [("duckdb", 1)]
    assert not list(home.rglob("*.db")), sorted(str(p) for p in home.rglob("*.db"))


READ_BACK = """
import yaml
import dagster as dg
from dagster._core.scheduler.instigation import InstigatorType

instance = dg.DagsterInstance.get()
runs = instance.get_runs()
events = instance.get_records_for_run(runs[0].run_id).records if runs else []
materialized = [record.event_log_entry.dagster_event.asset_key.to_user_string() for record in events
                if record.event_log_entry.dagster_event is not None
                and record.event_log_entry.dagster_event.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION]
pool = instance.event_log_storage.get_concurrency_info("duckdb")
print(yaml.safe_dump({
    "storages": [type(instance.run_storage).__name__, type(instance.event_log_storage).__name__,
                 type(instance.schedule_storage).__name__],
    "runs": {run.run_id: run.status.value for run in runs},
    "materialized": materialized,
    "pool": {"slot_count": pool.slot_count, "active_slot_count": pool.active_slot_count},
    "schedules": {state.name: state.status.value for state in instance.all_instigator_state(instigator_type=InstigatorType.SCHEDULE)},
}))
"""
