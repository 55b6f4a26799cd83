"""Full validation on a production fit (the real panel after `make run`): wall time per fold and study, and the
model-vs-baselines table of every study.

    .venv/bin/python bench/bench_validation.py [--fit-dir var/model/fits/<name>] [--folds forward,masked_0]
        [--out /tmp/atlas-bench-validation] [--set refit.draws=500 ...]

The folds run in this process one after another (in-process refits, warm from the production fit), exactly
the computation of the `validation_fold` partitions without Dagster around it. Refits are reused from
`--out` when split, production fit and settings are unchanged: pass a fresh --out to time them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT_ROOT))

from atlas_assets import settings  # noqa: E402
from bench.fits import latest_passing_fit  # noqa: E402
from atlas_assets.validation.config import load_validation_config  # noqa: E402
from atlas_assets.validation.folds import run_fold  # noqa: E402
from atlas_assets.validation.splits import fold_keys  # noqa: E402
from atlas_assets.validation.summary import CELL_STUDIES, cell_shares, held_out_skill, validation_metrics  # noqa: E402


def parse_set(values: list[str]) -> dict:
    out: dict = {}
    for item in values:
        key, value = item.split("=", 1)
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = json.loads(value) if value[:1] in "0123456789-[{tf" else value
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit-dir", type=Path, default=None)
    parser.add_argument("--folds", default=None)
    parser.add_argument("--out", type=Path, default=Path("/tmp/atlas-bench-validation"))
    parser.add_argument("--set", action="append", default=[], help="validation.yaml override, e.g. refit.draws=500")
    args = parser.parse_args()
    fit_dir = args.fit_dir or latest_passing_fit()
    cfg = load_validation_config(overrides=parse_set(args.set))
    keys = args.folds.split(",") if args.folds else fold_keys(cfg)
    print(f"production fit: {fit_dir}\nfolds: {len(keys)}  refit: {cfg['refit']}", flush=True)
    results, rows = [], []
    t_all = time.perf_counter()
    for key in keys:
        t0 = time.perf_counter()
        result = run_fold(key, fit_dir, cfg, args.out / fit_dir.name, log=lambda m: print("  " + m, flush=True))
        info = result.info
        rows.append({"fold": key, "wall_s": round(time.perf_counter() - t0, 1), "sample_s": info["sample_seconds"],
                     "leapfrog": info["leapfrog"], "max_rhat": round(info["max_rhat"], 4),
                     "min_ess_bulk": round(info["min_ess_bulk"]), "divergences": info["divergences"],
                     "n_train": info["n_train"], "n_heldout": info["n_heldout"], "n_scored": info["n_scored"],
                     "eci_s": info.get("eci_form_seconds"), "reused": info["reused"]})
        print(pd.DataFrame([rows[-1]]).to_string(index=False), flush=True)
        results.append(result)
    total = time.perf_counter() - t_all
    timing = pd.DataFrame(rows)
    timing["study"] = timing["fold"].str.replace(r"_\d+$", "", regex=True)
    predictions = pd.concat([r.predictions for r in results], ignore_index=True) if results else pd.DataFrame()
    ranks = pd.concat([r.family_ranks for r in results], ignore_index=True)
    sensitivity = pd.concat([r.sensitivity for r in results], ignore_index=True)
    metrics = validation_metrics(predictions, ranks, sensitivity, cfg)
    unscored = pd.concat([r.unscored for r in results], ignore_index=True)
    metrics = cell_shares(metrics, pd.DataFrame([r.info for r in results]), predictions, unscored)
    reliability = None
    try:
        import duckdb

        with duckdb.connect(str(settings.duckdb_path()), read_only=True) as conn:
            reliability = conn.execute("SELECT family, reliability_mean FROM reliability_grades").df()
    except Exception as exc:  # the bench still prints the rest
        print(f"(no reliability_grades table: {exc})")
    skill, rho = held_out_skill(predictions, reliability) if len(predictions) else (pd.DataFrame(), float("nan"))
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 40)
    print("\n== time per fold ==\n" + timing.to_string(index=False))
    print("\n== time per study (s) ==\n" + timing.groupby("study")[["wall_s", "sample_s", "leapfrog"]].sum().to_string())
    print(f"\ntotal wall time: {total:.0f} s for {len(keys)} folds")
    cols = ["study", "method", "n_cells", "share_predicted", "rmse_points", "mae_points", "crps", "spearman",
            "coverage_50", "coverage_90", "coverage_95", "z_sd"]
    # each cell study, and each path of one (forward_thin:fit, forward_thin:calibrate_in, ...)
    cells = metrics[metrics["study"].str.split(":").str[0].isin(CELL_STUDIES)].reindex(columns=cols)
    if len(cells):
        print("\n== held-out cells: model vs baselines (bounded families, points = 100 x unit) ==")
        print(cells.round(4).to_string(index=False))
        if len(unscored):
            print("\n== held-out cells not scored, by reason ==")
            print(unscored.groupby(["study", "path", "reason"], dropna=False).size().rename("cells").to_string())
        for study, r in metrics[metrics["study"].isin(CELL_STUDIES)].groupby("study"):
            m = r.set_index("method")
            if {"atlas", "eci_form"} <= set(m.index):
                print(f"{study}: RMSE model / ECI form = {m.at['atlas', 'rmse'] / m.at['eci_form', 'rmse']:.3f}")
    other = metrics[~metrics["study"].str.split(":").str[0].isin(CELL_STUDIES)].dropna(axis=1, how="all")
    if len(other):
        print("\n== whole families and sensitivity ==\n" + other.round(4).to_string(index=False))
    if len(skill):
        print(f"\nheld-out skill vs reliability: Spearman {rho:.3f} over {skill['reliability_mean'].notna().sum()} families")
    args.out.mkdir(parents=True, exist_ok=True)
    metrics.to_csv(args.out / "validation_metrics.csv", index=False)
    timing.to_csv(args.out / "validation_timing.csv", index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
