"""Fit stan/cost.stan through the project's engine interface, gate it, and write a self-contained fit folder.

    python -m atlas_assets.cost.fit --observations cost_observations.csv --out DIR [--engine pystan] \
        [--chains 4 --warmup 1000 --draws 1000 --seed N --adapt-delta 0.95 --max-treedepth 10] \
        [--stan-file COPY.stan] [--drop-runs 0.1 --drop-seed N] [--save-warmup]

Sampler options override config/cost.yaml's for this run; `--stan-file` fits another copy of the program (an
experiment: a running fit re-reads its file); `--drop-runs F --drop-seed N` fits the observations without a seeded
random share F of their runs, whole runs, the reference state's kept (a simulated refresh: heldout.drop_runs);
`--save-warmup` keeps the warmup's sampler statistics so the leapfrog count includes warmup.

Writes under DIR: posterior.nc (ArviZ), diagnostics.json (the capability fit's gates: R-hat, bulk/tail ESS,
divergences, E-BFMI, over state costs, benchmark levels, spreads and noise scales; the reference state's
cost is 0 by construction and is not gated), cost_observations.csv and cost_config.json (the exact inputs:
`load_cost_fit` rebuilds everything from them), index_states.csv / index_models.csv / index_benchmarks.csv /
index_evaluators.csv, fit_summary.json.

Run as a Dagster Pipes subprocess (defs/cost/assets.py) it logs through Pipes and reports its summary as
metadata; PyStan's worker pool is shut down before exit either way (DESIGN.md: PyStan workers otherwise
keep a step process alive).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from atlas_assets.cost.config import cost_stan_file, load_cost_config
from atlas_assets.cost.data import CostInput, build_cost_data

GATED = ("state_cost", "bench_ref", "lambda", "sigma")
REQUIRED_FILES = ("fit_summary.json", "diagnostics.json", "posterior.nc", "cost_observations.csv", "cost_config.json")


@dataclass
class LoadedCostFit:
    fit_dir: Path
    idata: Any
    cost_input: CostInput
    config: dict


def sample_cost_posterior(ci: CostInput, cfg: Mapping[str, Any], *, log: Callable[[str], None] = print,
                          engine: str | None = None, sampler: Mapping[str, Any] | None = None,
                          save_warmup: bool = False):
    """NUTS on the cost data (atlas_assets.model.engines.fit_model); returns the FitResult."""
    from atlas_assets.model.engines import fit_model

    smp = {**cfg["sampler"], **(sampler or {})}
    return fit_model(cost_stan_file(cfg), ci.data, chains=int(smp["chains"]), warmup=int(smp["warmup"]),
                     draws=int(smp["draws"]), seed=int(smp["seed"]), engine=engine or smp.get("engine", "auto"),
                     init=float(smp.get("init_radius", 0.5)), adapt_delta=float(smp["adapt_delta"]),
                     max_treedepth=int(smp["max_treedepth"]), log=log, coords=ci.coords(), dims=ci.dims(),
                     save_warmup=save_warmup)


def cost_diagnostics(idata, ci: CostInput, cfg: Mapping[str, Any]) -> dict:
    """The capability fit's gates over the gated cost parameters (the reference state, fixed at 0, left out)."""
    import arviz as az

    from atlas_assets.model.diagnostics import fit_diagnostics

    posterior = idata.posterior[[v for v in GATED if v in idata.posterior]]
    reference = ci.coords()["state"][int(ci.data["ref_state"]) - 1]
    posterior = posterior.drop_sel(state=[reference])
    gated = az.InferenceData(posterior=posterior, sample_stats=idata.sample_stats)
    out = fit_diagnostics(gated, cfg.get("diagnostics"), var_names=GATED,
                          max_treedepth=int(cfg["sampler"]["max_treedepth"]))
    out["reference_state"] = reference
    return out


def run_cost_fit(observations: pd.DataFrame, out_dir: str | Path, cfg: Mapping[str, Any] | None = None, *,
                 log: Callable[[str], None] = print, engine: str | None = None, save_warmup: bool = False) -> dict:
    """Build data, fit, gate, write the folder; returns the summary dict (`passes` says whether it may publish)."""
    t0 = time.perf_counter()
    cfg = dict(cfg) if cfg is not None else load_cost_config()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ci = build_cost_data(observations, cfg)
    d = ci.data
    log(f"cost data: {d['N']} rows ({ci.observations.run_id.nunique()} runs), {d['S']} states, {d['M']} models, "
        f"{d['J']} benchmarks, {d['E']} evaluators, {d['H']} harnessed states")
    observations.to_csv(out / "cost_observations.csv", index=False)
    (out / "cost_config.json").write_text(json.dumps(cfg, indent=1, default=_json_default))
    for name, frame in (("states", ci.states), ("models", ci.models), ("benchmarks", ci.benchmarks),
                        ("evaluators", ci.evaluators)):
        frame.to_csv(out / f"index_{name}.csv", index=False)
    res = sample_cost_posterior(ci, cfg, log=log, engine=engine, save_warmup=save_warmup)
    res.idata.to_netcdf(str(out / "posterior.nc"))
    diag = cost_diagnostics(res.idata, ci, cfg)
    diag.update(engine=res.engine, compile_seconds=res.compile_seconds, compiled_from_cache=res.compiled_from_cache,
                sample_seconds=res.sample_seconds, n_gradient_evals=res.n_gradient_evals, stan_sha256=res.stan_sha256,
                settings=res.settings, sampler_messages=res.messages[:20], wall_seconds=time.perf_counter() - t0)
    (out / "diagnostics.json").write_text(json.dumps(diag, indent=2, default=_json_default))
    summary = {
        "passes": diag["passes"], "max_rhat": diag["max_rhat"], "min_ess_bulk": diag["min_ess_bulk"],
        "min_ess_tail": diag["min_ess_tail"], "divergences": diag["divergences"], "min_ebfmi": diag["min_ebfmi"],
        "engine": res.engine, "sample_seconds": round(res.sample_seconds, 1),
        "sampler": {k: cfg["sampler"][k] for k in ("chains", "warmup", "draws", "seed", "adapt_delta", "max_treedepth")},
        # leapfrog steps (gradient evaluations) do not depend on the machine's load, seconds do
        "leapfrog_sampling": int(res.idata.sample_stats["n_steps"].values.sum()),
        "leapfrog_total": res.n_gradient_evals if save_warmup else None,
        "mean_leapfrog_per_draw": diag["mean_leapfrog_per_draw"], "step_size_per_chain": diag["step_size_per_chain"],
        "treedepth_hits": diag["treedepth_hits"],
        "wall_seconds": round(diag["wall_seconds"], 1), "n_rows": d["N"], "n_runs": int(ci.observations.run_id.nunique()),
        "n_states": d["S"], "n_models": d["M"], "n_benchmarks": d["J"], "n_evaluators": d["E"],
        "stan_sha256": res.stan_sha256, "out_dir": str(out),
    }
    (out / "fit_summary.json").write_text(json.dumps(summary, indent=2, default=_json_default))
    from atlas_assets.model.diagnostics import format_summary

    log(f"cost fit {'passes' if diag['passes'] else 'FAILS'} its gates: {format_summary(diag)}")
    return summary


def load_cost_fit(fit_dir: str | Path) -> LoadedCostFit:
    import arviz as az

    fit_dir = Path(fit_dir)
    cfg = json.loads((fit_dir / "cost_config.json").read_text())
    obs = pd.read_csv(fit_dir / "cost_observations.csv")
    return LoadedCostFit(fit_dir, az.from_netcdf(str(fit_dir / "posterior.nc")), build_cost_data(obs, cfg), cfg)


class UnpublishableCostFit(RuntimeError):
    pass


def require_publishable_cost_fit(fit_dir: Path, current_spec_sha256: str | None = None) -> dict:
    """The cost fit's diagnostics when it may be published (complete, every gate passed, made under the cost
    specification in force); raises UnpublishableCostFit naming the gate or the specification otherwise."""
    from atlas_assets.model.diagnostics import failure_reasons
    from atlas_assets.model.publishable import GATE_NAMES

    fit_dir = Path(fit_dir)
    missing = [name for name in REQUIRED_FILES if not (fit_dir / name).exists()]
    if missing:
        raise UnpublishableCostFit(f"cost fit {fit_dir} is incomplete (missing {missing}): nothing published")
    diagnostics = json.loads((fit_dir / "diagnostics.json").read_text())
    failing = failure_reasons(diagnostics)
    failing.update({gate: "not evaluated" for gate in GATE_NAMES if gate not in (diagnostics.get("checks") or {})})
    if failing or diagnostics.get("passes") is not True:
        detail = "; ".join(f"{GATE_NAMES.get(g, g)} failed: {why}" for g, why in failing.items())
        raise UnpublishableCostFit(f"cost fit {fit_dir.name} failed its convergence gates ({detail or 'passes is not true'}): "
                                   "nothing published, the last good cost tables stay in place")
    if current_spec_sha256 is not None:
        path = fit_dir / "fingerprint.json"
        made_under = json.loads(path.read_text()).get("spec_sha256") if path.exists() else None
        if made_under != current_spec_sha256:
            raise UnpublishableCostFit(f"cost fit {fit_dir.name} was made under cost specification {str(made_under)[:16]}, "
                                       f"the one in force is {current_spec_sha256[:16]}: materialize cost_fit first")
    return diagnostics


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--observations", required=True, help="cost_observations as csv")
    p.add_argument("--out", required=True)
    p.add_argument("--config", default=None)
    p.add_argument("--engine", default=None, choices=["auto", "pystan", "cmdstanpy"])
    for k in ("chains", "warmup", "draws", "seed", "max-treedepth"):
        p.add_argument(f"--{k}", type=int)
    p.add_argument("--adapt-delta", type=float)
    p.add_argument("--stan-file", default=None, help="fit this copy of the program instead of config's stan_file")
    p.add_argument("--drop-runs", type=float, default=0.0, help="drop this share of the runs (simulated refresh)")
    p.add_argument("--drop-seed", type=int, default=None, help="seed of the runs dropped (required with --drop-runs)")
    p.add_argument("--save-warmup", action="store_true", help="keep warmup sampler stats (leapfrog count with warmup)")
    args = p.parse_args(argv)
    names = ("chains", "warmup", "draws", "seed", "adapt_delta", "max_treedepth")
    overrides: dict[str, Any] = {"sampler": {k: getattr(args, k) for k in names if getattr(args, k) is not None}}
    if args.stan_file:
        overrides["stan_file"] = str(Path(args.stan_file).resolve())
    cfg = load_cost_config(args.config, {k: v for k, v in overrides.items() if v} or None)
    obs = pd.read_csv(args.observations)
    if args.drop_runs:
        if args.drop_seed is None:
            p.error("--drop-runs needs --drop-seed (the simulated refresh is a seeded draw)")
        from atlas_assets.cost.heldout import drop_runs

        before = obs.run_id.nunique()
        obs = drop_runs(obs, cfg, args.drop_runs, args.drop_seed)
        print(f"dropped {before - obs.run_id.nunique()} of {before} runs (seed {args.drop_seed}): "
              f"{len(obs)} rows, {obs.run_id.nunique()} runs left", file=sys.stderr)

    from dagster_pipes import PipesEnvVarParamsLoader, open_dagster_pipes

    from atlas_assets.model.engines import shutdown_pystan_workers
    from atlas_assets.model.fit_process import _pipes_metadata

    if PipesEnvVarParamsLoader().is_dagster_pipes_process():
        with open_dagster_pipes() as pipes:
            try:
                summary = run_cost_fit(obs, args.out, cfg, log=pipes.log.info, engine=args.engine,
                                       save_warmup=args.save_warmup)
                try:
                    pipes.report_asset_materialization(metadata=_pipes_metadata(summary))
                except Exception as exc:  # noqa: BLE001 - launched outside an asset
                    pipes.log.warning(f"could not report materialization: {exc}")
            finally:
                shutdown_pystan_workers()
    else:
        logger = logging.getLogger("atlas.cost")
        logger.setLevel(logging.INFO)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
        try:
            run_cost_fit(obs, args.out, cfg, log=logger.info, engine=args.engine, save_warmup=args.save_warmup)
        finally:
            shutdown_pystan_workers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
