"""Stan data for stan/cost.stan from cost_observations, with the index maps that name every parameter.

    ci = build_cost_data(observations, cfg)            # CostInput: .data, .states, .models, .benchmarks, .evaluators
    ci = build_cost_data(train, cfg, index_from=full)  # held-out fits: the index of the full data, rows of train

States are (model, reasoning_state); a state's setting is its reasoning state. Settings on the ladder get
an ordered effect, settings off it a free one, the default setting 0 (config/cost.yaml `reasoning`); any
other setting is refused (CostDataError naming it and its rows). Each model has exactly one pinned state
(no deviation of its own): its default when observed, else its most-reported state (runs), ties by
`pin_preference`. The reference state (config `reference`, GPT-5 high) has state_cost 0; it must be in
the data (no substitute). Benchmarks are grouped in suites by their registry family; a family with one
benchmark is its own suite. Evaluators index the noise scales; every state with a harnessed run gets one
harness offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd

REQUIRED_COLUMNS = ("model", "reasoning_state", "benchmark", "suite", "evaluator", "harnessed", "log10_usd",
                    "weight", "run_id")


class CostDataError(ValueError):
    """The cost observations cannot be fitted as they are; the message names the rows and fields."""


@dataclass
class CostInput:
    data: dict[str, Any]
    states: pd.DataFrame        # state_pos, model, reasoning_state, setting_kind, pinned, is_reference, n_rows, n_runs, harness_pos
    models: pd.DataFrame        # model_pos, model, pinned_state
    benchmarks: pd.DataFrame    # bench_pos, benchmark, suite, suite_pos, n_runs
    evaluators: pd.DataFrame    # eval_pos, evaluator, n_rows
    observations: pd.DataFrame  # the rows fitted, in Stan order, with their positions
    settings: dict[str, list[str]] = field(default_factory=dict)  # ladder / off_ladder levels present

    def coords(self) -> dict[str, list[str]]:
        return {
            "state": [f"{m}|{r}" for m, r in zip(self.states.model, self.states.reasoning_state)],
            "model": list(self.models.model),
            "benchmark": list(self.benchmarks.benchmark),
            "evaluator": list(self.evaluators.evaluator),
        }

    def dims(self) -> dict[str, list[str]]:
        return {"state_cost": ["state"], "cost_index": ["state"], "setting_effect": ["state"],
                "deviation": ["state"], "model_base": ["model"], "bench_ref": ["benchmark"],
                "log_lambda": ["benchmark"], "lambda": ["benchmark"], "sigma": ["evaluator"],
                "state_cost_rel": ["state"], "setting_rel": ["state"], "deviation_rel": ["state"],
                "model_base_rel": ["model"], "loglambda_rel": ["benchmark"], "lambda_rel": ["benchmark"]}


def _check_columns(obs: pd.DataFrame) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in obs.columns]
    if missing:
        raise CostDataError(f"cost observations lack columns {missing}")
    for column in ("log10_usd", "weight"):
        values = pd.to_numeric(obs[column], errors="coerce")
        bad = obs.loc[~np.isfinite(values.to_numpy(dtype=float))]
        if column == "weight":
            bad = pd.concat([bad, obs.loc[values <= 0]])
        if len(bad):
            first = bad.iloc[0]
            raise CostDataError(f"cost observation {first.get('row_key', bad.index[0])}: field {column!r} is "
                                f"{first[column]!r}, not a finite{' positive' if column == 'weight' else ''} number "
                                f"({len(bad)} rows)")


def _state_table(index_obs: pd.DataFrame, count_obs: pd.DataFrame, cfg: Mapping[str, Any]) -> pd.DataFrame:
    reasoning = cfg["reasoning"]
    ladder, off, default = list(reasoning["ladder"]), list(reasoning["off_ladder"]), reasoning["default"]
    states = index_obs[["model", "reasoning_state"]].drop_duplicates().sort_values(["model", "reasoning_state"])
    unknown = sorted(set(states.reasoning_state) - set(ladder) - set(off) - {default})
    if unknown:
        rows = index_obs.loc[index_obs.reasoning_state.isin(unknown)]
        raise CostDataError(f"reasoning states {unknown} are neither on the ladder {ladder}, off it {off}, nor "
                            f"{default!r} (config/cost.yaml reasoning); {len(rows)} cost rows, e.g. "
                            f"{rows.iloc[0].get('row_key', rows.index[0])}")
    runs = count_obs.groupby(["model", "reasoning_state"]).agg(n_rows=("run_id", "size"), n_runs=("run_id", "nunique"))
    states = states.merge(runs, on=["model", "reasoning_state"], how="left").fillna({"n_rows": 0, "n_runs": 0})
    states["setting_kind"] = np.where(states.reasoning_state.isin(ladder), "ladder",
                                      np.where(states.reasoning_state.isin(off), "off_ladder", "default"))
    preference = {s: i for i, s in enumerate(reasoning["pin_preference"])}
    states["_default"] = states.reasoning_state == default
    states["_pref"] = states.reasoning_state.map(lambda s: preference.get(s, len(preference)))
    ranked = states.sort_values(["model", "_default", "n_runs", "_pref", "reasoning_state"],
                                ascending=[True, False, False, True, True])
    pinned = ranked.groupby("model").head(1)
    states["pinned"] = states.set_index(["model", "reasoning_state"]).index.isin(
        pinned.set_index(["model", "reasoning_state"]).index)
    return states.drop(columns=["_default", "_pref"]).reset_index(drop=True)


def build_cost_data(observations: pd.DataFrame, cfg: Mapping[str, Any], *,
                    index_from: pd.DataFrame | None = None) -> CostInput:
    """Stan data for the rows of `observations`; parameters for every state, model, benchmark and evaluator of
    `index_from` (default: the observations themselves), so states without rows get their prior predictive."""
    obs = observations.reset_index(drop=True).copy()
    _check_columns(obs)
    index_obs = obs if index_from is None else index_from.reset_index(drop=True)
    _check_columns(index_obs)
    if obs.empty:
        raise CostDataError("no cost observations to fit")
    ref = cfg["reference"]
    states = _state_table(index_obs, obs, cfg)
    is_ref = (states.model == ref["model"]) & (states.reasoning_state == ref["reasoning_state"])
    if not is_ref.any() or states.loc[is_ref, "n_runs"].iloc[0] == 0:
        raise CostDataError(f"the reference state {ref['model']}|{ref['reasoning_state']} (config/cost.yaml "
                            "reference) has no reported cost: the cost scale is undefined (no substitute)")
    states["is_reference"] = is_ref
    states["state_pos"] = np.arange(len(states))

    models = pd.DataFrame({"model": sorted(states.model.unique())})
    models["model_pos"] = np.arange(len(models))
    models = models.merge(states.loc[states.pinned, ["model", "reasoning_state"]].rename(
        columns={"reasoning_state": "pinned_state"}), on="model")
    model_pos = dict(zip(models.model, models.model_pos))
    states["model_pos"] = states.model.map(model_pos)
    ref_state = int(states.loc[is_ref, "state_pos"].iloc[0])
    ref_model = int(states.loc[is_ref, "model_pos"].iloc[0])

    ladder_present = [s for s in cfg["reasoning"]["ladder"] if s in set(states.reasoning_state)]
    off_present = [s for s in cfg["reasoning"]["off_ladder"] if s in set(states.reasoning_state)]
    ladder_pos = {s: i + 1 for i, s in enumerate(ladder_present)}
    off_pos = {s: i + 1 for i, s in enumerate(off_present)}
    states["ladder_pos"] = states.reasoning_state.map(ladder_pos).fillna(0).astype(int)
    states["off_pos"] = states.reasoning_state.map(off_pos).fillna(0).astype(int)
    dev = np.zeros(len(states), dtype=int)
    dev[~states.pinned.to_numpy()] = np.arange(1, int((~states.pinned).sum()) + 1)
    states["dev_pos"] = dev

    harnessed_states = index_obs.loc[index_obs.harnessed.astype(bool), ["model", "reasoning_state"]].drop_duplicates()
    key = states.set_index(["model", "reasoning_state"]).index
    states["harness_pos"] = 0
    mask = key.isin(harnessed_states.set_index(["model", "reasoning_state"]).index)
    states.loc[mask, "harness_pos"] = np.arange(1, int(mask.sum()) + 1)

    benchmarks = index_obs[["benchmark", "suite"]].drop_duplicates("benchmark").sort_values("benchmark").reset_index(drop=True)
    benchmarks["bench_pos"] = np.arange(len(benchmarks))
    suite_sizes = benchmarks.suite.value_counts()
    multi = sorted(suite_sizes[suite_sizes >= 2].index)
    benchmarks["suite_pos"] = benchmarks.suite.map({s: i + 1 for i, s in enumerate(multi)}).fillna(0).astype(int)
    benchmarks = benchmarks.merge(obs.groupby("benchmark").run_id.nunique().rename("n_runs"), on="benchmark",
                                  how="left").fillna({"n_runs": 0})

    evaluators = pd.DataFrame({"evaluator": sorted(index_obs.evaluator.unique())})
    evaluators["eval_pos"] = np.arange(len(evaluators))
    evaluators = evaluators.merge(obs.groupby("evaluator").size().rename("n_rows"), on="evaluator",
                                  how="left").fillna({"n_rows": 0})

    state_pos = dict(zip(zip(states.model, states.reasoning_state), states.state_pos))
    obs["state_pos"] = [state_pos[(m, r)] for m, r in zip(obs.model, obs.reasoning_state)]
    obs["bench_pos"] = obs.benchmark.map(dict(zip(benchmarks.benchmark, benchmarks.bench_pos)))
    obs["eval_pos"] = obs.evaluator.map(dict(zip(evaluators.evaluator, evaluators.eval_pos)))
    harness_of_state = states.harness_pos.to_numpy()
    obs["harness_pos"] = np.where(obs.harnessed.astype(bool), harness_of_state[obs.state_pos.to_numpy()], 0)
    if obs[["bench_pos", "eval_pos"]].isna().any().any():
        raise CostDataError("cost observations name benchmarks or evaluators outside the index (index_from)")

    anchors = _anchors(obs, states, models, benchmarks, ref_model, cfg)
    priors = cfg["priors"]
    data = {
        "N": len(obs), "S": len(states), "M": len(models), "J": len(benchmarks), "E": len(evaluators),
        "y": obs.log10_usd.to_numpy(dtype=float), "w": obs.weight.to_numpy(dtype=float),
        "obs_state": obs.state_pos.to_numpy(int) + 1, "obs_bench": obs.bench_pos.to_numpy(int) + 1,
        "obs_eval": obs.eval_pos.to_numpy(int) + 1, "obs_harness": obs.harness_pos.to_numpy(int),
        "state_model": states.model_pos.to_numpy(int) + 1,
        "L": len(ladder_present), "K": len(off_present),
        "state_ladder": states.ladder_pos.to_numpy(int), "state_off": states.off_pos.to_numpy(int),
        "D": int((~states.pinned).sum()), "state_dev": states.dev_pos.to_numpy(int),
        "H": int((states.harness_pos > 0).sum()),
        "ref_state": ref_state + 1, "ref_model": ref_model + 1,
        "free_model": np.array([p + 1 for p in models.model_pos if p != ref_model], dtype=int),
        **anchors,
        "G": len(multi), "bench_suite": benchmarks.suite_pos.to_numpy(int),
        "bench_centred": _bench_centred(benchmarks, cfg),
        # a member of a multi-benchmark suite has its log spread non-centred on the suite, whatever its runs
        "spread_centred": _bench_centred(benchmarks, cfg) * (benchmarks.suite_pos.to_numpy(int) == 0),
        # costs are sampled in the units of the benchmark with the most runs (ties: first by name), whose
        # spread is 1 while sampling; the published scale is sum-zero (stan/cost.stan, docs/cost.md)
        "scale_bench": int(benchmarks.n_runs.to_numpy(float).argmax()) + 1,
        "nu": float(cfg["likelihood"]["student_t_df"]),
        "ref_mu_loc": float(priors["ref_mu"]["loc"]), "ref_mu_scale": float(priors["ref_mu"]["scale"]),
        "ref_suite_sd_scale": float(priors["ref_suite_sd"]["scale"]),
        "ref_within_sd_scale": float(priors["ref_within_sd"]["scale"]),
        "loglambda_suite_sd_scale": float(priors["loglambda_suite_sd"]["scale"]),
        "loglambda_within_sd_scale": float(priors["loglambda_within_sd"]["scale"]),
        "base_mu_scale": float(priors["base_mu"]["scale"]), "base_sd_scale": float(priors["base_sd"]["scale"]),
        "setting_scale": float(priors["setting_effect"]["scale"]), "dev_sd_scale": float(priors["dev_sd"]["scale"]),
        "harness_sd_scale": float(priors["harness_sd"]["scale"]), "sigma_scale": float(priors["sigma"]["scale"]),
    }
    return CostInput(data=data, states=states, models=models, benchmarks=benchmarks, evaluators=evaluators,
                     observations=obs, settings={"ladder": ladder_present, "off_ladder": off_present})


def _bench_centred(benchmarks: pd.DataFrame, cfg: Mapping[str, Any]) -> np.ndarray:
    """1 where a benchmark's level and log spread are sampled centred (at least `parametrization.
    benchmark_centred_min_runs` runs in the fitted rows), 0 where non-centred on its suite: a benchmark with a
    handful of runs is mostly its suite, and centred it made a funnel with the within-suite sd (docs/cost.md)."""
    min_runs = int((cfg.get("parametrization") or {}).get("benchmark_centred_min_runs", 0))
    return (benchmarks.n_runs.to_numpy(float) >= max(min_runs, 1)).astype(int)


def _anchors(obs: pd.DataFrame, states: pd.DataFrame, models: pd.DataFrame, benchmarks: pd.DataFrame,
             ref_model: int, cfg: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Per free model (Stan order of `free_model`), the run its base is anchored on: a run of its best-measured
    state (most runs in the fit; ties: the pinned state, then `pin_preference`, then by name) on that state's
    best-measured benchmark (most runs in the fit; then the first by run id), with that run's weighted mean log10
    cost, benchmark, evaluator, state and harness index. The base's coordinate then has the noise of that run
    (sigma / lambda) as its scale. Anchored on its pinned state's run, a model whose pinned state was costed once
    on a noisy benchmark (claude-opus-4-5's `default`: one SWE-bench run, sigma 0.27, lambda_rel 0.32) while 27
    ARC-AGI runs (sigma 0.06) of its other states pin its base had that coordinate pinned to ~1/40 of its scale,
    coupled to SWE-bench's level and spread: the stiffest direction of the posterior (docs/cost.md). (Anchored on
    its first run by id, likewise: a SWE-bench run of a model costed 20 times on ARC-AGI.)
    Models without a run in `obs`, and every model when `parametrization.base` is 'centered', are centred.
    (Anchoring only the models seen in one run was measured worse: docs/cost.md.)"""
    anchored = (cfg.get("parametrization") or {}).get("base", "anchored") == "anchored"
    free = [int(p) for p in models.model_pos if p != ref_model]
    out = {"anchored": np.zeros(len(free)), "anchor_y": np.zeros(len(free)), "anchor_bench": np.ones(len(free), int),
           "anchor_eval": np.ones(len(free), int), "anchor_state": np.ones(len(free), int),
           "anchor_harness": np.zeros(len(free), int)}
    if not free:
        return out
    preference = {s: i for i, s in enumerate(cfg["reasoning"]["pin_preference"])}
    ranked = states.assign(_pin=~states.pinned.astype(bool),
                           _pref=states.reasoning_state.map(lambda r: preference.get(r, len(preference))))
    ranked = ranked.sort_values(["model_pos", "n_runs", "_pin", "_pref", "reasoning_state"],
                                ascending=[True, False, True, True, True])
    best_state = ranked.groupby("model_pos").state_pos.first()
    pinned_state = states.loc[states.pinned].set_index("model_pos")["state_pos"]
    bench_runs = benchmarks.sort_values("bench_pos").n_runs.to_numpy(float)
    rows = obs.assign(_w=obs.weight.astype(float), _wy=obs.weight.astype(float) * obs.log10_usd.astype(float))
    for k, m in enumerate(free):
        s = int(best_state.loc[m]) if anchored else int(pinned_state.loc[m])
        mine = rows.loc[rows.state_pos == s]
        if not anchored or mine.empty:
            out["anchor_state"][k] = int(pinned_state.loc[m]) + 1
            continue  # centred (no run to anchor on, e.g. every run held out)
        out["anchor_state"][k] = s + 1
        runs = mine.groupby("run_id").bench_pos.first().rename("bench_pos").reset_index()
        runs["bench_runs"] = bench_runs[runs.bench_pos.to_numpy(int)]
        best = runs.sort_values(["bench_runs", "run_id"], ascending=[False, True]).run_id.iloc[0]
        run = mine.loc[mine.run_id == best]
        out["anchored"][k] = 1.0
        out["anchor_y"][k] = float(run._wy.sum() / run._w.sum())
        out["anchor_bench"][k] = int(run.bench_pos.iloc[0]) + 1
        out["anchor_eval"][k] = int(run.eval_pos.iloc[0]) + 1
        out["anchor_harness"][k] = int(run.harness_pos.iloc[0])
    return out
