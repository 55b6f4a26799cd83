"""Storage and concurrency faults around the real epoch_hub source asset: the DuckDB file locked by another
writer, two refreshes started at once, the disk filling up while a snapshot is written (a real, small tmpfs
mounted over the snapshot folder), and a fetch log whose last line was torn by such a failure.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tests.faults.harness import (EPOCH_PATH, GOOD_EPOCH, GOOD_EPOCH_ZIP, Home, Ledger, body, files_with_bytes, sha,
                                  zip_of)
from atlas_assets.settings import PROJECT_ROOT

HOLDER = """
import duckdb, sys, time, pathlib
conn = duckdb.connect(sys.argv[1])
conn.execute("CREATE TABLE IF NOT EXISTS holder_was_here AS SELECT 1 AS x")
pathlib.Path(sys.argv[2]).write_text("locked")
time.sleep(float(sys.argv[3]))
conn.close()
"""


def hold_lock(home: Home, seconds: float, tmp_path: Path) -> subprocess.Popen:
    """Another process with the DuckDB file open for writing (DuckDB allows one writing process)."""
    ready = tmp_path / f"locked-{time.monotonic_ns()}"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(home.duckdb), str(ready), str(seconds)])
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert holder.poll() is None and time.monotonic() < deadline, "the lock holder did not start"
        time.sleep(0.05)
    return holder


def test_a_writer_waits_for_another_writers_lock_then_lands(home, epoch, server, tmp_path):
    before = Ledger.take(home)
    newer = zip_of({**GOOD_EPOCH, "toy_mc.csv": GOOD_EPOCH["toy_mc.csv"] + "model-7,0.5,0.7,2025-01-01,Org,0.01,2026-01-01\n"})
    server.routes[EPOCH_PATH] = body(newer)
    holder = hold_lock(home, 1.5, tmp_path)
    outcome = home.run(epoch, checks=())  # DuckDBResource retries a held lock with backoff
    holder.wait(timeout=30)
    assert outcome.success and outcome.latest_attempt()["sha256"] == sha(newer)
    assert len(outcome.staged()) == len(before.staged["epoch_hub"]) + 1
    before.assert_kept(home, staged_unchanged=("swe_bench",))


def test_a_lock_that_is_never_released_fails_naming_the_file_and_loses_nothing(home, epoch, server, tmp_path,
                                                                            monkeypatch):
    import dagster_duckdb.resource as duckdb_resource

    # the resource retries for ~100 s; the same retries, quicker
    monkeypatch.setattr(duckdb_resource, "backoff",
                        functools.partial(duckdb_resource.backoff, delay_generator=(0.05 for _ in range(20))))
    before = Ledger.take(home)
    holder = hold_lock(home, 60, tmp_path)
    try:
        outcome = home.run(epoch, checks=())
        assert not outcome.success
        text = " ".join(str(e.event_specific_data.error) for e in outcome.result.get_step_failure_events())
        assert str(home.duckdb) in text and "lock" in text.lower() and f"PID {holder.pid}" in text, text
    finally:
        holder.kill()
        holder.wait(timeout=30)
    # the download itself was stored (raw data is kept as soon as it is had); no table was touched
    before.assert_kept(home)
    home.rerun_good(epoch)


REFRESH = """
import sys
from tests.faults.harness import Home, REGISTRY, local_source
from atlas_assets.defs.ingest import assets
from atlas_assets.registry.benchmarks import load_benchmark_registry
registry = load_benchmark_registry(REGISTRY)
assets.load_benchmark_registry = lambda: registry
outcome = Home(__import__("pathlib").Path(sys.argv[1])).run(local_source("epoch_hub", sys.argv[2]), checks=())
print("SUCCESS" if outcome.success else "FAILED")
"""


@pytest.mark.slow  # two fresh Python processes importing Dagster and the project
def test_two_refreshes_started_at_once_both_land_once(home, epoch, server):
    before = Ledger.take(home)
    newer = zip_of({**GOOD_EPOCH, "toy_mc.csv": GOOD_EPOCH["toy_mc.csv"] + "model-7,0.5,0.7,2025-01-01,Org,0.01,2026-01-01\n"})
    server.routes[EPOCH_PATH] = body(newer)
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    runs = [subprocess.Popen([sys.executable, "-c", REFRESH, str(home.root), epoch.url], cwd=PROJECT_ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [out.strip().splitlines()[-1] for out, _ in outputs] == ["SUCCESS", "SUCCESS"], [e[-2000:] for _, e in outputs]

    after = before.assert_kept(home, staged_unchanged=("swe_bench",))
    # one stored copy of the new snapshot, two recorded retrievals of it, and its rows staged once
    assert set(after.snapshots) - set(before.snapshots) == {f"{sha(newer)[:2]}/{sha(newer)}"}
    new_lines = after.fetch_log[len(before.fetch_log):]
    assert len(new_lines) == 2 and all(sha(newer) in line for line in new_lines)
    attempts = home.query("SELECT sha256, status FROM source_snapshots WHERE source = 'epoch_hub' ORDER BY rowid")
    assert attempts[-2:] == [(sha(newer), "parsed"), (sha(newer), "parsed")]
    staged = home.query("SELECT row_key, count(*) FROM raw_scores__epoch_hub GROUP BY 1 HAVING count(*) > 1")
    assert staged == [] and len(home.query("SELECT * FROM raw_scores__epoch_hub")) == len(before.staged["epoch_hub"]) + 1


def incompressible_export(size: int) -> bytes:
    """A good export plus a stored (not deflated) unregistered member of random bytes: a big download."""
    import io

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as handle:
        for name, data in GOOD_EPOCH.items():
            handle.writestr(zipfile.ZipInfo(name, date_time=(2026, 4, 1, 0, 0, 0)), data)
        handle.writestr(zipfile.ZipInfo("appendix.bin", date_time=(2026, 4, 1, 0, 0, 0)), os.urandom(size))
    return buffer.getvalue()


@pytest.fixture
def small_disk(home):
    """The snapshot folder on a 128 kB tmpfs (mounted over it, its files copied in)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    saved = files_with_bytes(home.snapshots)
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(home.snapshots)],
                           capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.strip()}")
    try:
        for name, content in saved.items():
            path = home.snapshots / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            if "sha256" in path.parts:
                path.chmod(0o444)
        yield home.snapshots
    finally:
        subprocess.run(["umount", "-l", str(home.snapshots)], check=True)


def test_disk_full_while_writing_a_snapshot(home, epoch, server, small_disk):
    before = Ledger.take(home)
    big = incompressible_export(300_000)
    server.routes[EPOCH_PATH] = body(big)
    outcome = home.run(epoch, checks=())
    assert not outcome.success  # not bad input: the run must fail, loudly
    text = " ".join(str(e.event_specific_data.error) for e in outcome.result.get_step_failure_events())
    assert "No space left on device" in text and epoch.url in text and str(home.snapshots) in text, text
    # no partial snapshot left behind, nothing half-recorded, every earlier snapshot intact
    assert not [p for p in small_disk.rglob(".incoming-*")]
    before.assert_kept(home)
    assert Ledger.take(home).fetch_log == before.fetch_log and Ledger.take(home).attempts == before.attempts
    # room again (the source serves its usual export): the re-run lands
    server.routes[EPOCH_PATH] = body(GOOD_EPOCH_ZIP)
    home.rerun_good(epoch)


def test_a_torn_last_line_of_the_fetch_log_costs_no_retrieval(home, epoch, server):
    """A process killed (or a disk filled) while appending leaves half a line: the next retrieval must still be
    recorded whole and every earlier one still read."""
    before = Ledger.take(home)
    log = home.snapshots / "fetch_log.jsonl"
    with log.open("a") as handle:
        handle.write('{"bytes": 1234, "error": null, "etag": null, "last_modif')  # torn, no newline
    torn = log.read_text()
    newer = zip_of({**GOOD_EPOCH, "toy_mc.csv": GOOD_EPOCH["toy_mc.csv"] + "model-7,0.5,0.7,2025-01-01,Org,0.01,2026-01-01\n"})
    server.routes[EPOCH_PATH] = body(newer)
    outcome = home.run(epoch, checks=())
    assert outcome.success and outcome.latest_attempt()["sha256"] == sha(newer)
    text = log.read_text()
    assert text.startswith(torn)  # the torn fragment is kept as it was (evidence), not rewritten
    from atlas_assets.ingest.snapshots import SnapshotStore

    history = SnapshotStore(home.snapshots).history(epoch.url)
    assert [h.sha256 for h in history][-2:] == [sha(GOOD_EPOCH_ZIP), sha(newer)]
    assert SnapshotStore(home.snapshots).last_good(epoch.url).sha256 == sha(newer)
    before.assert_kept(home, staged_unchanged=("swe_bench",))
