"""Held-out check of the cost model on the current cost observations: masked-run k-fold RMSE in log10 dollars per
task against the benchmark-mean baseline (atlas_assets/cost/heldout.py), plus 90% predictive coverage.

    ATLAS_HOME=var python bench/bench_cost_heldout.py [--folds 5] [--chains 2 --warmup 500 --draws 500] [--out FILE]

Reads `cost_observations` from ATLAS_HOME's DuckDB (read-only; materialize cost_observations first), prints one
JSON summary and writes the per-row predictions beside it (--out, default ATLAS_HOME/model/cost_heldout.csv).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import duckdb

from atlas_assets import settings
from atlas_assets.cost.config import load_cost_config
from atlas_assets.cost.heldout import masked_run_cv


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--folds", type=int)
    p.add_argument("--seed", type=int)
    for k in ("chains", "warmup", "draws"):
        p.add_argument(f"--{k}", type=int)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    cfg = load_cost_config()
    with duckdb.connect(str(settings.duckdb_path()), read_only=True) as conn:
        observations = conn.execute("SELECT * FROM cost_observations").df()
    sampler = {k: getattr(args, k) for k in ("chains", "warmup", "draws") if getattr(args, k) is not None}
    t0 = time.perf_counter()
    rows, summary = masked_run_cv(observations, cfg, folds=args.folds, seed=args.seed, sampler=sampler,
                                  log=lambda m: print(m, file=sys.stderr, flush=True))
    summary["wall_seconds"] = round(time.perf_counter() - t0, 1)
    out = Path(args.out) if args.out else settings.atlas_home() / "model" / "cost_heldout.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(out, index=False)
    summary["predictions"] = str(out)
    print(json.dumps(summary, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
