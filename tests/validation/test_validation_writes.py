"""A fold's write waits out another process's lock on the DuckDB file instead of failing the fold."""

import subprocess
import sys
import time

import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.validation.assets import write_slice


def test_a_fold_write_retries_while_another_process_holds_the_file(tmp_path):
    path = tmp_path / "atlas.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time\n"
                               f"c = duckdb.connect({str(path)!r}); print('held', flush=True); time.sleep(3)"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    started = time.perf_counter()
    frames = {"validation_folds": pd.DataFrame({"fold": ["masked_0"], "n_train": [10], "fit": ["f"]})}
    write_slice(DuckDBResource(database=str(path)), frames, "masked_0")
    waited = time.perf_counter() - started
    holder.wait(timeout=10)
    import duckdb

    with duckdb.connect(str(path), read_only=True) as conn:
        assert conn.execute("SELECT fold, n_train FROM validation_folds").fetchall() == [("masked_0", 10)]
    assert waited > 1.0  # it did wait for the holder (the lock was real), then wrote
