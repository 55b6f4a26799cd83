"""Benchmark of the cleaning chain (sql/01..06) on synthetic raw panels shaped like the real one.

Prints figures; it is not a timed test.  Usage:
    .venv/bin/python bench/bench_clean_chain.py                 # 1x, 10x, 100x and ~1M rows
    .venv/bin/python bench/bench_clean_chain.py --scales 1 10   # a quick look

Shape of a 1x panel (the April mirror: ~5.9k raw rows, ~60 benchmarks, ~900 published
identifiers of ~600 models): each model is scored on a random ~10 of the benchmarks; one
model has 1-3 published identifiers (reasoning states, provider routes); ~10 % of cells are
reported 2-3 times (exact duplicates, near duplicates, conflicts, shot and protocol mixes);
agentic benchmarks carry several harnesses; a few benchmarks are lower-is-better, ratings,
diagnostics, undeclared or composite; a few published identifiers are unmapped. A panel k
times larger has k times the models and sqrt(k) times the benchmarks and families.

The chain runs on a DuckDB file (as in production) through atlas_assets.clean.run_chain, with
the production thresholds; loading the panel is not timed. Wall time and the process's CPU time
(all DuckDB threads) are printed: on a shared machine the wall time depends on what else runs.
The growth exponent is the slope of log(seconds) on log(rows) over the sizes run.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from atlas_assets.clean import CleaningConfig, run_chain
from atlas_assets.settings import SQL_DIR

BASE_ROWS = 5_900


def make_panel(scale: float, seed: int = 7) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    n_models = int(600 * scale)
    n_bench = int(round(60 * math.sqrt(scale)))
    per_model = 9.0  # scores per model -> ~5.9k rows at 1x once duplicates are added

    # --- benchmarks
    b_idx = np.arange(n_bench)
    kind_draw = rng.random(n_bench)
    direction = np.where(kind_draw < 0.05, "lower", np.where(kind_draw < 0.07, "zero_best", "higher"))
    kind = np.where((kind_draw > 0.95), "rating", np.where((kind_draw > 0.93) & (kind_draw <= 0.95), "unbounded", "bounded"))
    percent = rng.random(n_bench) < 0.4
    range_max = np.where(kind == "bounded", np.where(percent, 100.0, 1.0), np.nan)
    range_min = np.where(kind == "bounded", 0.0, np.nan)
    floor = np.where((kind == "bounded") & (rng.random(n_bench) < 0.4), rng.choice([0.25, 0.2, 0.5], n_bench), 0.0)
    items = np.where((kind == "bounded") & (rng.random(n_bench) < 0.6), rng.integers(100, 2000, n_bench), -1)
    n_families = max(1, int(n_bench * 0.75))
    family = np.where(b_idx < n_families, b_idx, rng.integers(0, n_families, n_bench))
    role = np.where(b_idx < n_families, "primary", np.where(rng.random(n_bench) < 0.8, "component", "diagnostic"))
    protocol = np.where(rng.random(n_bench) < 0.05, "consensus", "single")
    agentic = rng.random(n_bench) < 0.15
    composite = b_idx == n_bench - 1
    benchmarks = pd.DataFrame(
        {
            "benchmark": [f"bench_{i}" for i in b_idx],
            "name": [f"Bench {i}" for i in b_idx],
            "direction": direction,
            "range_min": range_min,
            "range_max": range_max,
            "unit": np.where(kind == "rating", "elo", np.where(kind == "unbounded", "minutes", np.where(percent, "percent", "fraction"))),
            "floor": floor,
            "items": pd.array(np.where(items > 0, items, 0), dtype="Int64").astype("object"),
            "family": [f"family_{f}" for f in family],
            "role": role,
            "kind": kind,
            "sampling_protocol": protocol,
            "category": "reasoning",
            "is_safety": rng.random(n_bench) < 0.02,
            "is_composite": composite,
            "contamination": "static",
            "notes": None,
            "reference": None,
        }
    )
    benchmarks.loc[items <= 0, "items"] = None
    difficulty = rng.normal(0, 1, n_bench)

    # --- models and their published identifiers
    ability = rng.normal(0, 1, n_models)
    ids_per_model = rng.choice([1, 2, 3], n_models, p=[0.6, 0.3, 0.1])
    id_model = np.repeat(np.arange(n_models), ids_per_model)
    id_rank = np.concatenate([np.arange(k) for k in ids_per_model])
    states = np.array(["default", "high", "low"])
    model_ids = pd.DataFrame(
        {
            "model_id": [f"model_{m}_{r}" for m, r in zip(id_model, id_rank)],
            "model": [f"model_{m}" for m in id_model],
            "reasoning_state": states[id_rank],
            "budget_tokens": None,
            "rule": "synthetic",
        }
    )
    unmapped = rng.random(len(model_ids)) < 0.05
    model_ids.loc[unmapped, "reasoning_state"] = None
    models = pd.DataFrame(
        {"model": [f"model_{m}" for m in range(n_models)], "display_name": None, "organization": None,
         "released_on": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 800, n_models), unit="D"),
         "n_identifiers": ids_per_model}
    )

    # --- one row per (identifier, benchmark) cell, then duplicates
    n_cells = int(n_models * per_model)
    cell_id = rng.integers(0, len(model_ids), n_cells)
    cell_b = rng.integers(0, n_bench, n_cells)
    cells = pd.DataFrame({"i": cell_id, "b": cell_b}).drop_duplicates()
    reps = rng.choice([1, 2, 3], len(cells), p=[0.9, 0.07, 0.03])
    rows = cells.loc[cells.index.repeat(reps)].reset_index(drop=True)
    n = len(rows)
    ib, ii = rows["b"].to_numpy(), rows["i"].to_numpy()
    p = 1 / (1 + np.exp(-(ability[id_model[ii]] + 0.3 * id_rank[ii] - difficulty[ib])))
    noise = rng.normal(0, 0.02, n) * (rng.random(n) < 0.7) + rng.normal(0, 0.15, n) * (rng.random(n) < 0.05)
    u = np.clip(floor[ib] + (1 - floor[ib]) * p + noise, 0, 1)
    u = np.where(rng.random(n) < 0.005, 0.0, u)  # refusals
    value = np.where(kind[ib] == "rating", 1000 + 400 * u, np.where(kind[ib] == "unbounded", 600 * u, u * np.nan_to_num(range_max[ib], nan=1.0)))
    value = np.where(direction[ib] == "lower", np.nan_to_num(range_max[ib], nan=1.0) - value, value)
    value = np.round(value, 4)
    harness = np.where(agentic[ib], np.array(["Agent A", "Agent B", "Agent C", "Agent D"])[rng.integers(0, 4, n)], None)
    proto_draw = rng.random(n)
    sampling = np.where(proto_draw < 0.6, None, np.where(proto_draw < 0.85, "single", np.where(proto_draw < 0.97, "average", "best_of_n")))
    shots = np.where(rng.random(n) < 0.3, rng.choice([0, 5, 5, 5], n), -1)
    raw = pd.DataFrame(
        {
            "row_key": [f"synthetic/f.csv#{k}/bench_{b}" for k, b in zip(range(1, n + 1), ib)],
            "source": "epoch_hub",
            "source_class": "evaluator_release",
            "snapshot_sha256": "0" * 64,
            "file": "f.csv",
            "row_number": np.arange(1, n + 1),
            "model_id": model_ids["model_id"].to_numpy()[ii],
            "model_name": None,
            "benchmark": [f"bench_{b}" for b in ib],
            "score_column": "score",
            "score": value,
            "stderr": np.where(rng.random(n) < 0.3, 0.02 * np.nan_to_num(range_max[ib], nan=1.0), np.nan),
            "ci_low": np.nan,
            "ci_high": np.nan,
            "shots": pd.array(np.where(shots >= 0, shots, 0), dtype="Int64"),
            "harness": harness,
            "sampling_protocol": sampling,
            "evaluated_on": None,
            "released_on": None,
            "organization": None,
            "origin": None,
            "origin_url": None,
        }
    )
    raw.loc[shots < 0, "shots"] = pd.NA
    return {"raw_scores": raw, "registry_benchmarks": benchmarks, "registry_model_ids": model_ids, "registry_models": models}


def load(conn: duckdb.DuckDBPyConnection, panel: dict[str, pd.DataFrame]) -> None:
    conn.execute((SQL_DIR / "00_source_tables.sql").read_text())
    for table, frame in panel.items():
        conn.register("_frame", frame)
        conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _frame")
        conn.unregister("_frame")


def run_once(scale: float, workdir: Path) -> dict[str, object]:
    panel = make_panel(scale)
    path = workdir / f"bench_{scale:g}.duckdb"
    path.unlink(missing_ok=True)
    conn = duckdb.connect(str(path))
    load(conn, panel)
    conn.execute("CHECKPOINT")
    started, cpu_started = time.perf_counter(), time.process_time()
    counts = run_chain(conn, CleaningConfig.load())
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    conn.close()
    path.unlink(missing_ok=True)
    rows = len(panel["raw_scores"])
    assert all(c.conserved for c in counts), [c.as_dict() for c in counts]
    return {
        "scale": scale,
        "raw_rows": rows,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "rows_per_s": rows / seconds,
        "modeled": counts[-1].rows_out,
        "iterations": len(counts[-1].extra.get("iterations", [])),
        **{f"t_{c.stage}": c.seconds for c in counts},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="*", default=[1, 10, 100, 1_000_000 / BASE_ROWS])
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for scale in args.scales:
            result = run_once(scale, Path(tmp))
            results.append(result)
            print(
                f"scale {scale:>7.1f}x  raw rows {result['raw_rows']:>9,}  chain {result['seconds']:7.2f} s "
                f"(cpu {result['cpu_seconds']:6.2f} s)  "
                f"{result['rows_per_s']:>10,.0f} rows/s  modeled {result['modeled']:>8,}  rounds {result['iterations']}",
                flush=True,
            )
    frame = pd.DataFrame(results)
    stage_cols = [c for c in frame.columns if c.startswith("t_")]
    print("\nper-stage seconds:")
    print(frame[["raw_rows", *stage_cols]].rename(columns=lambda c: c.removeprefix("t_")).round(3).to_string(index=False))
    if len(frame) >= 2:
        slope = np.polyfit(np.log(frame["raw_rows"]), np.log(frame["seconds"]), 1)[0]
        big = frame[frame["raw_rows"] >= 100_000]
        tail = np.polyfit(np.log(big["raw_rows"]), np.log(big["seconds"]), 1)[0] if len(big) >= 2 else float("nan")
        print(f"\ngrowth exponent (log seconds on log rows, all sizes): {slope:.2f}")
        print(f"growth exponent (sizes >= 100k rows): {tail:.2f}")
        cpu_slope = np.polyfit(np.log(frame["raw_rows"]), np.log(frame["cpu_seconds"]), 1)[0]
        print(f"growth exponent of CPU time (all sizes): {cpu_slope:.2f}")
    largest = frame.iloc[frame["raw_rows"].idxmax()]
    print(f"largest panel: {int(largest['raw_rows']):,} raw rows through the chain in {largest['seconds']:.2f} s (target <= 30 s at 1M)")


if __name__ == "__main__":
    main()
