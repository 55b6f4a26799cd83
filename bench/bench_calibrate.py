"""Calibrate-in (issue 13) on the production fit: how many models it reaches, how fast, and how close it comes to
the fitted capability of models that ARE in the fit when it sees only one or two of their numbers.

    .venv/bin/python bench/bench_calibrate.py [--fit-dir var/model/fits/<name>] [--duckdb var/atlas.duckdb]
        [--scratch /tmp/calib] [--holdout-models 0 (all)] [--seed 20260401]

No Stan run. The DuckDB file may be in use by a running pipeline: it is opened read-only (retried on a lock)
and the two tables needed are copied once to --scratch as CSV, then read from there.

Sections:
1. candidates: models outside the fit with a result on a fitted family (from `family_observations`, stage 05),
   states, rows; what is not calibrated and why.
2. speed: all candidates, and per 50 models (random subsets).
3. the cut: reweighting the fit's draws by each model's marginal likelihood is the posterior a refit with the
   model would give (up to the reference standardisation); its effective share of draws and the shift of the
   display mean it implies.
4. holdout: fitted models' pinned states keep 1 or 2 of their observations (seeded), are calibrated in from the
   fit, and are compared with their fitted posterior (all their observations): error in display units, coverage
   of the fitted posterior mean by the calibrated 50% / 90% intervals, by fitted-capability band. Caveat: the
   fit's family parameters saw these models' other observations (no refit), so this is mildly optimistic.
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
from bench.fits import latest_passing_fit  # noqa: E402
from atlas_assets.outputs import calibrate as C  # noqa: E402

TABLES = {
    "family_observations": "SELECT model, reasoning_state, family, kind, u, correct, items, floor FROM family_observations",
    "coverage_audit": "SELECT model, family, reason FROM audit_exclusions WHERE stage = 'modeled_observations'",
}


def scratch_tables(db: Path, scratch: Path, attempts: int = 30) -> dict[str, pd.DataFrame]:
    """The tables of TABLES, copied once from a DuckDB file that another process may be writing."""
    import duckdb

    scratch.mkdir(parents=True, exist_ok=True)
    paths = {name: scratch / f"{name}.csv" for name in TABLES}
    if not all(p.exists() for p in paths.values()):
        for attempt in range(attempts):
            try:
                conn = duckdb.connect(str(db), read_only=True)
                break
            except duckdb.Error as error:  # a writer holds the lock: wait for it
                if attempt == attempts - 1:
                    raise
                print(f"  DuckDB busy ({error.__class__.__name__}), retrying", flush=True)
                time.sleep(2)
        try:
            for name, sql in TABLES.items():
                conn.execute(sql).df().to_csv(paths[name], index=False)
        finally:
            conn.close()
    out = {name: pd.read_csv(path) for name, path in paths.items()}
    for column in ("correct", "items"):
        out["family_observations"][column] = out["family_observations"][column].astype("Int64")
    return out


def table(frame: pd.DataFrame, floatfmt: str = ".3g") -> str:
    return frame.to_markdown(index=False, floatfmt=floatfmt)


def interval_stats(cal_display: np.ndarray, fitted_mean: np.ndarray) -> dict[str, np.ndarray]:
    q = np.quantile(cal_display, [0.05, 0.25, 0.5, 0.75, 0.95], axis=0)
    return {"cal_mean": cal_display.mean(axis=0), "cal_sd": cal_display.std(axis=0),
            "in_50": (fitted_mean >= q[1]) & (fitted_mean <= q[3]), "in_90": (fitted_mean >= q[0]) & (fitted_mean <= q[4])}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit-dir", type=Path)
    parser.add_argument("--duckdb", type=Path, default=None)
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/calib"))
    parser.add_argument("--holdout-models", type=int, default=0, help="fitted models in the holdout (0: all)")
    parser.add_argument("--seed", type=int, default=20260401)
    args = parser.parse_args(argv)

    from atlas_assets.model.fit_process import load_fit
    from atlas_assets.model.scores import rank_eligible
    from atlas_assets.outputs.config import load_outputs_config
    from atlas_assets.outputs.draws import from_fit

    fit_dir = args.fit_dir or latest_passing_fit()
    started = time.perf_counter()
    loaded = load_fit(fit_dir)
    max_draws = int(load_outputs_config()["draws"]["max_draws"])
    draws = from_fit(loaded).thin(max_draws)
    reasoning = C.reasoning_draws_from_fit(loaded).thin(max_draws)
    si, cfg = loaded.stan_input, loaded.config
    print(f"# Calibrate-in on {fit_dir.name}\n\nfit read in {time.perf_counter() - started:.1f} s: "
          f"{len(si.models)} models, {len(si.states)} states, {len(si.families)} families, {draws.n_draws} draws\n")
    tables = scratch_tables(args.duckdb or settings.atlas_home() / "atlas.duckdb", args.scratch)

    # 1. candidates
    fo = tables["family_observations"]
    cand = C.candidate_observations(fo, si.observations, si.families, tables["coverage_audit"])
    obs = cand.observations
    outside = fo[~fo["model"].isin(set(si.observations["model"]))]
    print("## 1. Candidates\n")
    print(f"- models in family_observations outside the fit: {outside['model'].nunique()} ({len(outside)} rows)")
    print(f"- candidates (a usable row on a fitted family): {obs['model'].nunique()} models, "
          f"{obs.groupby(['model', 'reasoning_state']).ngroups} states, {len(obs)} rows")
    per_model = obs.groupby("model").agg(rows=("u", "size"), families=("family", "nunique"),
                                         states=("reasoning_state", "nunique"))
    print(f"- rows per model: {per_model['rows'].value_counts().sort_index().to_dict()}; families per model: "
          f"{per_model['families'].value_counts().sort_index().to_dict()}; states per model: "
          f"{per_model['states'].value_counts().sort_index().to_dict()}")
    print(f"- likelihood pieces: {obs['piece'].value_counts().to_dict()}")
    reasons = obs.drop_duplicates("model")["outside_reason"].str.replace(r" \([^)]*\)", "", regex=True)
    print(f"- why outside the fit (models): {reasons.value_counts().to_dict()}")
    print("- not calibrated (rows of calibrated_exclusions):\n")
    print(table(cand.exclusions.groupby("reason").agg(entries=("model", "size"), models=("model", "nunique"))
                .reset_index()) + "\n")

    # 2. speed
    cal = C.calibrate(draws, reasoning, si.families, obs, seed=args.seed)
    rules = cfg["eligibility"]
    headlines = C.fitted_headline_display(draws, si.states, rank_eligible(si, cfg))
    states = C.calibrated_state_table(cal, draws, headlines, rules, float(cfg["display"]["interval"]),
                                      int(cfg["display"].get("top_k", 10)))
    models = obs["model"].unique()
    rng = np.random.default_rng(args.seed)
    subset_seconds = []
    for _ in range(3):
        pick = rng.choice(models, size=min(50, len(models)), replace=False)
        subset_seconds.append(C.calibrate(draws, reasoning, si.families, obs[obs["model"].isin(pick)],
                                          seed=args.seed).seconds)
    print("## 2. Speed (2 cores shared with other jobs)\n")
    print(f"- all {len(models)} models ({len(cal.states)} states): {cal.seconds:.1f} s "
          f"({1000 * cal.seconds / len(models):.0f} ms per model)")
    print(f"- 50 random models: {', '.join(f'{s:.1f}' for s in subset_seconds)} s (target <= 10 s)")
    multi = states.groupby("model").size()
    print(f"- models with per-model reasoning terms (several states): {int((multi > 1).sum())}")
    print(f"- calibrated states rank-eligible: {int(states['eligible'].sum())} of {len(states)}\n")
    print(table(states[["model", "reasoning_state", "n_obs", "families", "display_mean", "display_lower",
                        "display_upper", "feedback_ess_share"]].head(12), ".3g") + "\n")

    # 3. the cut vs reweighting (a refit's posterior up to the reference standardisation)
    shifts = states.assign(shift=(states["display_mean_reweighted"] - states["display_mean"]).abs(),
                           ess_share=states["feedback_ess_share"], sd=states["display_sd"])
    print("## 3. The cut: calibrated vs reweighted by the model's own marginal likelihood (~ a refit with it)\n")
    print(f"- effective share of draws: median {shifts['ess_share'].median():.3f}, 5th percentile "
          f"{shifts['ess_share'].quantile(0.05):.3f}, min {shifts['ess_share'].min():.3f}")
    print(f"- |shift of the display mean|: median {shifts['shift'].median():.2f}, 95th percentile "
          f"{shifts['shift'].quantile(0.95):.2f}, max {shifts['shift'].max():.2f} display units "
          f"(posterior sd: median {shifts['sd'].median():.2f})")
    print(table(shifts.sort_values("ess_share")[["model", "reasoning_state", "families", "ess_share", "display_mean",
                                                  "display_mean_reweighted", "sd"]].head(5)) + "\n")

    # 4. holdout on fitted models
    print("## 4. Holdout: fitted models' pinned states calibrated in from 1 or 2 of their observations\n")
    fitted_disp = draws.display(draws.phi)
    st = si.states.assign(fitted_mean=fitted_disp.mean(axis=0), fitted_sd=fitted_disp.std(axis=0))
    pins = st[st["pinned"] & (st["n_obs"] >= 3)]
    if args.holdout_models:
        pins = pins.sample(n=min(args.holdout_models, len(pins)), random_state=args.seed)
    fit_rows = C.likelihood_pieces(si.observations.drop(columns=["family_pos", "piece", "hurdle"]), si.families)
    fit_rows["state_pos"] = si.observations["state_pos"].to_numpy()
    band = pd.qcut(pins["fitted_mean"], 3, labels=["low third", "middle third", "top third"])
    results = []
    for keep in (1, 2):
        started = time.perf_counter()
        for _, pin in pins.iterrows():
            rows = fit_rows[fit_rows["state_pos"] == pin["state_pos"]]
            rows = rows.sample(n=keep, random_state=args.seed + int(pin["state_pos"]))
            fit = C.calibrate_model(draws, reasoning, si.families, rows, C.model_rng(args.seed, pin["model"]))
            s = interval_stats(draws.display(fit.phi[:, :1]), np.array([pin["fitted_mean"]]))
            results.append({"keep": keep, "model": pin["model"], "band": band[pin.name], "fitted_mean": pin["fitted_mean"],
                            "fitted_sd": pin["fitted_sd"], "n_obs_fitted": int(pin["n_obs"]),
                            "cal_mean": float(s["cal_mean"][0]), "cal_sd": float(s["cal_sd"][0]),
                            "in_50": bool(s["in_50"][0]), "in_90": bool(s["in_90"][0])})
        print(f"- keep {keep}: {len(pins)} models in {time.perf_counter() - started:.1f} s")
    res = pd.DataFrame(results)
    res["error"] = res["cal_mean"] - res["fitted_mean"]

    def summary(group: pd.DataFrame) -> pd.Series:
        return pd.Series({"models": len(group), "bias": group["error"].mean(), "MAE": group["error"].abs().mean(),
                          "RMSE": np.sqrt((group["error"] ** 2).mean()), "median cal sd": group["cal_sd"].median(),
                          "median fitted sd": group["fitted_sd"].median(), "coverage 50%": group["in_50"].mean(),
                          "coverage 90%": group["in_90"].mean(),
                          # the fitted posterior is the calibrated one updated by the other observations, so
                          # Var(fitted mean - calibrated mean) ~ cal_sd^2 - fitted_sd^2: z has sd ~1 if calibrated
                          # (robust sd, 1.4826 MAD: a few states have a fitted sd at or above the calibrated one)
                          "z sd": 1.4826 * np.median(np.abs(z := group["error"] / np.sqrt(
                              np.maximum(group["cal_sd"] ** 2 - group["fitted_sd"] ** 2, 1e-6)))),
                          "fitted sd >= cal sd": int((group["fitted_sd"] >= group["cal_sd"]).sum())})

    overall = res.groupby("keep").apply(summary, include_groups=False).reset_index()
    print("\nerror = calibrated display mean - fitted display mean; coverage = share of models whose fitted "
          "posterior mean lies in the calibrated interval (above nominal by construction: the fitted mean is less "
          "spread than a draw); z = error / sqrt(cal_sd^2 - fitted_sd^2), sd ~1 when the calibrated spread is right\n")
    print(table(overall, ".3f") + "\n")
    by_band = res.groupby(["keep", "band"], observed=True).apply(summary, include_groups=False).reset_index()
    print(table(by_band, ".3f") + "\n")
    baseline = np.abs(pins["fitted_mean"] - pins["fitted_mean"].mean()).mean()
    print(f"reference: MAE of the fitted states' own mean as the guess (no observation) = {baseline:.2f} display units")


if __name__ == "__main__":
    main()
