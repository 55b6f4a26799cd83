"""Full validation on a production fit (the real panel after `make run`): wall time per fold and study, and the
model-vs-baselines table of every study.

    .venv/bin/python bench/bench_validation.py [--fit-dir var/model/fits/<name>] [--folds forward,masked_0]
        [--out /tmp/atlas-bench-validation] [--set refit.draws=500 ...] [--seeds 20260501,1,2]

The folds run in this process one after another (in-process refits, warm from the production fit), exactly
the computation of the `validation_fold` partitions without Dagster around it. Refits are reused from
`--out` when split, production fit and settings are unchanged: pass a fresh --out to time them.

`--seeds` runs the folds once per split seed (validation.yaml `seed`: which models are new-and-thinned, which cells
are hidden, and the predictive draws), each under `--out/seed-<seed>/`, then prints the cell studies' metrics per
seed and their mean and spread over seeds: one split of a few hundred cells moves a 90% coverage by several points,
so a coverage figure is judged on the mean over seeds.
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


def cell_study_rows(metrics: pd.DataFrame) -> pd.DataFrame:
    """The rows of the cell studies (and of their paths, `forward_thin:fit`, ...)."""
    return metrics[metrics["study"].str.split(":").str[0].isin(CELL_STUDIES)]


SEED_COLUMNS = ["n_cells", "rmse_points", "crps", "coverage_50", "coverage_90", "coverage_95", "z_sd"]


def across_seeds(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Cell studies' metrics over split seeds: per study (and path) and method, the mean of each metric over the
    seeds, the sd and range of the 90% coverage, and the cell-weighted pooled 90% coverage."""
    cells = cell_study_rows(per_seed).dropna(subset=["coverage_90"])
    grouped = cells.groupby(["study", "method"], sort=False)
    out = grouped[SEED_COLUMNS].mean()
    out["seeds"] = grouped.size()
    out["cov90_sd"] = grouped["coverage_90"].std(ddof=1)
    out["cov90_min"] = grouped["coverage_90"].min()
    out["cov90_max"] = grouped["coverage_90"].max()
    out["cov90_pooled"] = grouped.apply(lambda g: (g["coverage_90"] * g["n_cells"]).sum() / g["n_cells"].sum())
    return out.reset_index()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit-dir", type=Path, default=None)
    parser.add_argument("--folds", default=None)
    parser.add_argument("--out", type=Path, default=Path("/tmp/atlas-bench-validation"))
    parser.add_argument("--set", action="append", default=[], help="validation.yaml override, e.g. refit.draws=500")
    parser.add_argument("--seeds", default=None, help="comma-separated split seeds: run the folds once per seed")
    args = parser.parse_args()
    fit_dir = args.fit_dir or latest_passing_fit()
    overrides = parse_set(args.set)
    if not args.seeds:
        run_once(args, fit_dir, load_validation_config(overrides=overrides), args.out)
        return 0
    per_seed = []
    for seed in [int(x) for x in args.seeds.split(",")]:
        print(f"\n######## split seed {seed} ########", flush=True)
        cfg = load_validation_config(overrides={**overrides, "seed": seed})
        per_seed.append(run_once(args, fit_dir, cfg, args.out / f"seed-{seed}").assign(seed=seed))
    per_seed = pd.concat(per_seed, ignore_index=True)
    per_seed.to_csv(args.out / "validation_metrics_by_seed.csv", index=False)
    cells = cell_study_rows(per_seed)
    print("\n== 90% coverage per split seed (bounded cells) ==")
    print(cells.pivot_table(index=["study", "method"], columns="seed", values="coverage_90", sort=False).round(3).to_string())
    summary = across_seeds(per_seed)
    print(f"\n== over {per_seed['seed'].nunique()} split seeds: mean of each metric, spread of the 90% coverage ==")
    print(summary.round(4).to_string(index=False))
    summary.to_csv(args.out / "validation_metrics_over_seeds.csv", index=False)
    return 0


def run_once(args, fit_dir: Path, cfg: dict, out: Path) -> pd.DataFrame:
    """The folds on one configuration: prints the time and metric tables, writes them under `out`, returns the
    metrics."""
    keys = args.folds.split(",") if args.folds else fold_keys(cfg)
    print(f"production fit: {fit_dir}\nfolds: {len(keys)}  refit: {cfg['refit']}", flush=True)
    results, rows = [], []
    t_all = time.perf_counter()
    for key in keys:
        t0 = time.perf_counter()
        result = run_fold(key, fit_dir, cfg, out / fit_dir.name, log=lambda m: print("  " + m, flush=True))
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
    cells = cell_study_rows(metrics).reindex(columns=cols)
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
    out.mkdir(parents=True, exist_ok=True)
    metrics.to_csv(out / "validation_metrics.csv", index=False)
    predictions.to_csv(out / "validation_predictions.csv", index=False)
    timing.to_csv(out / "validation_timing.csv", index=False)
    return metrics


if __name__ == "__main__":
    sys.exit(main())
