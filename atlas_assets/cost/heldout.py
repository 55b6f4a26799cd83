"""Held-out check of the cost model: masked-run k-fold RMSE in log10 dollars against the benchmark-mean baseline.

Whole runs (every row reporting one run) are assigned to k folds at random; each fold refits stan/cost.stan on
the other runs, with parameters for every state, model, benchmark and evaluator of the full data (a state whose
only runs are held out is predicted from its model, its setting and the population), and predicts each held-out
row by its posterior mean log10 cost bench_ref_j + lambda_j (state_cost_s + harness offset). The reference
state's runs are never held out (it defines the scale). The baseline predicts a held-out row by the weighted
mean log10 cost of its benchmark's training rows. Both are scored on the same rows, weighted 1 / rows of the
run (a run counts once), with the 90% predictive interval's coverage (Student-t noise of the row's evaluator).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from atlas_assets.cost.data import build_cost_data
from atlas_assets.cost.fit import sample_cost_posterior


def assign_folds(observations: pd.DataFrame, cfg: Mapping[str, Any], folds: int, seed: int) -> pd.Series:
    """Fold number (0..k-1) per row, by run; -1 for the reference state's rows (always trained on)."""
    ref = cfg["reference"]
    is_ref = (observations.model == ref["model"]) & (observations.reasoning_state == ref["reasoning_state"])
    runs = sorted(observations.loc[~is_ref, "run_id"].unique())
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(runs))
    fold_of_run = {runs[i]: int(k % folds) for k, i in enumerate(order)}
    return observations.run_id.map(fold_of_run).fillna(-1).astype(int).where(~is_ref, -1)


def drop_runs(observations: pd.DataFrame, cfg: Mapping[str, Any], fraction: float, seed: int) -> pd.DataFrame:
    """The observations without a seeded random `fraction` of their runs (whole runs: every row reporting one run
    goes together, so each remaining run still weighs 1): a simulated refresh, to check the sampler settings on
    data they were not tuned on. The reference state's runs are never dropped (without them the cost scale is
    undefined and the fit is refused, no substitute); the count is round(fraction x the other runs)."""
    if not 0 <= fraction < 1:
        raise ValueError(f"fraction of runs to drop must be in [0, 1), not {fraction}")
    ref = cfg["reference"]
    is_ref = (observations.model == ref["model"]) & (observations.reasoning_state == ref["reasoning_state"])
    runs = sorted(set(observations.loc[~is_ref, "run_id"]) - set(observations.loc[is_ref, "run_id"]))
    rng = np.random.default_rng(seed)
    dropped = set(rng.choice(np.array(runs, dtype=object), size=int(round(fraction * len(runs))), replace=False))
    return observations.loc[~observations.run_id.isin(dropped)].reset_index(drop=True)


def _weighted_rmse(error: np.ndarray, weight: np.ndarray) -> float:
    return float(np.sqrt(np.sum(weight * error ** 2) / np.sum(weight)))


def _weighted_coverage(y: np.ndarray, lower: np.ndarray, upper: np.ndarray, weight: np.ndarray) -> float:
    """Share of held-out runs (rows weighted 1 / rows of their run) inside their 90% predictive interval."""
    return float(np.sum(weight * ((y >= lower) & (y <= upper))) / np.sum(weight))


def masked_run_cv(observations: pd.DataFrame, cfg: Mapping[str, Any], *, folds: int | None = None,
                  seed: int | None = None, sampler: Mapping[str, Any] | None = None, engine: str | None = None,
                  log: Callable[[str], None] = print) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(per held-out row predictions, summary: RMSE of the model and the baseline, coverage, per fold figures)."""
    from atlas_assets.cost.fit import cost_diagnostics
    from atlas_assets.model.scores import draws_of

    vcfg = cfg["validation"]
    folds = int(folds or vcfg["folds"])
    seed = int(vcfg["seed"] if seed is None else seed)
    obs = observations.reset_index(drop=True).copy()
    obs["fold"] = assign_folds(obs, cfg, folds, seed)
    rows, per_fold = [], []
    for k in range(folds):
        train, test = obs[obs.fold != k], obs[obs.fold == k].copy()
        ci = build_cost_data(train, cfg, index_from=obs)
        res = sample_cost_posterior(ci, cfg, engine=engine, sampler={**vcfg["sampler"], "seed": seed + k,
                                                                      **(sampler or {})}, log=lambda m: None)
        diag = cost_diagnostics(res.idata, ci, cfg)
        state_pos = dict(zip(zip(ci.states.model, ci.states.reasoning_state), ci.states.state_pos))
        s = np.array([state_pos[(m, r)] for m, r in zip(test.model, test.reasoning_state)])
        j = test.benchmark.map(dict(zip(ci.benchmarks.benchmark, ci.benchmarks.bench_pos))).to_numpy(int)
        e = test.evaluator.map(dict(zip(ci.evaluators.evaluator, ci.evaluators.eval_pos))).to_numpy(int)
        h = np.where(test.harnessed.astype(bool), ci.states.harness_pos.to_numpy()[s], 0)
        cost, ref, lam = (draws_of(res.idata, n) for n in ("state_cost", "bench_ref", "lambda"))
        harness = draws_of(res.idata, "harness_full") if "harness_full" in res.idata.posterior else np.zeros((len(cost), 1))
        mu = ref[:, j] + lam[:, j] * (cost[:, s] + harness[:, h])
        sigma = draws_of(res.idata, "sigma")[:, e]
        rng = np.random.default_rng(seed + 100 + k)
        predictive = mu + sigma * rng.standard_t(float(cfg["likelihood"]["student_t_df"]), size=mu.shape)
        lo, hi = np.quantile(predictive, [0.05, 0.95], axis=0)
        w_train = train.weight.to_numpy(float)
        by_bench = (train.assign(_wy=train.weight * train.log10_usd).groupby("benchmark")[["_wy", "weight"]].sum())
        bench_mean = (by_bench._wy / by_bench.weight).to_dict()
        overall = float(np.sum(w_train * train.log10_usd) / np.sum(w_train))
        test["pred_model"] = mu.mean(axis=0)
        test["pred_baseline"] = test.benchmark.map(bench_mean).fillna(overall).to_numpy(float)
        test["lower_90"], test["upper_90"] = lo, hi
        test["state_trained"] = [bool((train.model.eq(m) & train.reasoning_state.eq(r)).any())
                                 for m, r in zip(test.model, test.reasoning_state)]
        rows.append(test)
        y, w = test.log10_usd.to_numpy(float), test.weight.to_numpy(float)
        per_fold.append({"fold": k, "rows": len(test), "runs": int(test.run_id.nunique()),
                         "rmse_model": _weighted_rmse(y - test.pred_model.to_numpy(), w),
                         "rmse_baseline": _weighted_rmse(y - test.pred_baseline.to_numpy(), w),
                         "coverage_90": _weighted_coverage(y, lo, hi, w),
                         "max_rhat": diag["max_rhat"], "divergences": diag["divergences"],
                         "sample_seconds": round(res.sample_seconds, 1)})
        log(f"fold {k}: {per_fold[-1]}")
    out = pd.concat(rows, ignore_index=True)
    y, w = out.log10_usd.to_numpy(float), out.weight.to_numpy(float)
    seen = out.state_trained.to_numpy(bool)
    summary = {
        "folds": folds, "rows": len(out), "runs": int(out.run_id.nunique()),
        "rmse_model": _weighted_rmse(y - out.pred_model.to_numpy(), w),
        "rmse_baseline": _weighted_rmse(y - out.pred_baseline.to_numpy(), w),
        "rmse_model_state_seen": _weighted_rmse((y - out.pred_model.to_numpy())[seen], w[seen]) if seen.any() else None,
        "rmse_model_state_unseen": _weighted_rmse((y - out.pred_model.to_numpy())[~seen], w[~seen]) if (~seen).any() else None,
        "runs_state_unseen": int(out.loc[~seen, "run_id"].nunique()),
        "coverage_90": _weighted_coverage(y, out.lower_90.to_numpy(float), out.upper_90.to_numpy(float), w),
        "per_fold": per_fold,
    }
    return out, summary
