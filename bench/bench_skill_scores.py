"""Skill scores per category (issue 12) on the production fit: the learned category deviations, how many state x
category skills are published, and held-out prediction within a category against the general capability.

    .venv/bin/python bench/bench_skill_scores.py [--fit-dir var/model/fits/<name>] [--duckdb var/atlas.duckdb]
        [--draws 1000] [--seed 20260401] [--exact-sample 20]

No Stan run (the calibrate-in machinery per posterior draw, outputs/skill_scores.py). Sections:
1. categories of the fitted families, and tau_c per category (empirical Bayes on its grid).
2. coverage: states x categories published (>= min_families families), by category.
3. held-out: leave-one-family-out over states with >= 3 families in a category; the cell predicted from the skill
   (without the cell), the general capability (every other result of the state, tau = 0) and the category alone;
   RMSE (points), CRPS, 50/90% coverage on identical cells, overall and per category. The family parameters are
   the main fit's (they saw the cell): the same for every method.
4. the Gaussian summary of the rest posterior against the exact grid mixture on --exact-sample state x categories.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT_ROOT))

from atlas_assets import settings  # noqa: E402
from atlas_assets.outputs import skill_scores as S  # noqa: E402
from bench.fits import latest_passing_fit  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit-dir", type=Path)
    parser.add_argument("--duckdb", type=Path)
    parser.add_argument("--draws", type=int, default=None, help="default: outputs.yaml skill_scores.max_draws")
    parser.add_argument("--seed", type=int, default=20260401)
    parser.add_argument("--exact-sample", type=int, default=20)
    args = parser.parse_args(argv)

    import duckdb

    from atlas_assets.model.fit_process import load_fit
    from atlas_assets.outputs.config import load_outputs_config
    from atlas_assets.outputs.draws import from_fit

    cfg = load_outputs_config()
    scfg = cfg["skill_scores"]
    fit_dir = args.fit_dir or latest_passing_fit()
    loaded = load_fit(fit_dir)
    draws = from_fit(loaded).thin(args.draws or int(scfg["max_draws"]))
    si = loaded.stan_input
    with duckdb.connect(str(args.duckdb or settings.atlas_home() / "atlas.duckdb"), read_only=True) as conn:
        registry = conn.execute("SELECT family, role, category FROM registry_benchmarks").df()
    membership = S.family_categories(registry, si.families["family"], scfg.get("also_in"))
    print(f"# Skill scores on {fit_dir.name}\n\n{len(si.states)} states, {len(si.families)} families, "
          f"{draws.n_draws} draws\n")

    print("## 1. Categories and deviations\n")
    started = time.perf_counter()
    pieces = S.fit_pieces(si.observations, si.families)
    evidence = S.category_evidence(pieces, membership, si.states)
    taus = S.deviation_sds(pieces, membership, evidence, draws, si.families, S.Prior.population(draws), scfg)
    per_cat = membership.groupby("category")["family"].agg(lambda f: ", ".join(sorted(f)))
    taus["families"] = taus["category"].map(per_cat)
    taus["deviation_sd_display"] = taus["deviation_sd"] * float(np.mean(draws.scale))
    print(taus[["category", "families", "deviation_sd", "deviation_sd_display", "basis"]].to_markdown(
        index=False, floatfmt=".3g"))
    print(f"\n(tau chosen in {time.perf_counter() - started:.0f} s)\n")
    for row in taus.itertuples():
        if row.log_score_by_sd:
            print(f"- {row.category}: {row.log_score_by_sd}")

    print("\n## 2. Coverage\n")
    started = time.perf_counter()
    table, _ = S.skill_scores(draws, si.families, si.observations, si.states, membership, scfg,
                              float(cfg["draws"]["interval"]), args.seed, taus)
    seconds = time.perf_counter() - started
    pub = table[table["status"] == S.PUBLISHED]
    print(f"- rows {len(table)} (states x categories); published {len(pub)} skill scores of "
          f"{pub['state_pos'].nunique()} states in {pub['category'].nunique()} categories ({seconds:.0f} s)")
    print(f"- states with a skill in >= 2 categories: {(pub.groupby('state_pos').size() >= 2).sum()}")
    one = table[(table["n_families"] == 1)]
    print(f"- 'not enough data' with exactly 1 family in the category: {len(one)}")
    by = pub.groupby("category").agg(states=("state_pos", "size"), mean_width=(
        "display_upper", "mean")).reset_index()
    by["mean_width"] = pub.groupby("category").apply(
        lambda g: (g["display_upper"] - g["display_lower"]).mean(), include_groups=False).to_numpy()
    by["mean_abs_deviation"] = pub.groupby("category")["deviation_mean"].apply(lambda d: d.abs().mean()).to_numpy()
    print(by.to_markdown(index=False, floatfmt=".3g"))

    print("\n## 3. Held-out within a category (leave one family out, states with >= 3 in the category)\n")
    started = time.perf_counter()
    cells = S.heldout_within_category(draws, si.families, si.observations, si.states, membership, taus, args.seed)
    metrics = S.heldout_metrics(cells)
    print(f"{cells[['model', 'reasoning_state', 'category', 'family']].drop_duplicates().shape[0]} cells "
          f"({time.perf_counter() - started:.0f} s)\n")
    cols = ["category", "method", "n_cells", "rmse_points", "crps", "coverage_50", "coverage_90", "spearman"]
    print(metrics[cols].sort_values(["category", "method"]).to_markdown(index=False, floatfmt=".4g"))

    print("\n## 4. Gaussian summary of the rest posterior vs the exact grid mixture\n")
    rng = np.random.default_rng(args.seed)
    pick = evidence[(evidence["n_families"] >= 2) & (evidence["n_families_outside"] >= 1)]
    pick = pick.iloc[rng.choice(len(pick), size=min(args.exact_sample, len(pick)), replace=False)]
    in_cat = membership.dropna(subset=["category"]).groupby("category")["family"].agg(set)
    prior = S.Prior.population(draws)
    diffs = []
    for row in pick.itertuples():
        rest_rows, cat_rows = S._split(pieces, int(row.state_pos), in_cat[row.category])
        rest = S.rest_posterior(rest_rows, draws, si.families, prior)
        tau = float(taus.set_index("category").loc[row.category, "deviation_sd"])
        out = [S.skill_posterior(rest, cat_rows, tau, draws, si.families, np.random.default_rng(1), exact)[0]
               for exact in (False, True)]
        d = [draws.display(x) for x in out]
        diffs.append((d[0].mean() - d[1].mean(), d[0].std() / d[1].std()))
    diffs = np.array(diffs)
    print(f"- {len(diffs)} state x categories: |mean difference| max {np.abs(diffs[:, 0]).max():.3f} display units "
          f"(median {np.median(np.abs(diffs[:, 0])):.3f}); sd ratio {diffs[:, 1].min():.3f}-{diffs[:, 1].max():.3f}")


if __name__ == "__main__":
    main()
