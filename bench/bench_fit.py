"""Fit benchmark for stan/atlas.stan (prints figures; exit 1 when the fit fails).

    .venv/bin/python bench/bench_fit.py                       # simulated real-size panel
    .venv/bin/python bench/bench_fit.py --observations modeled_observations.parquet
    .venv/bin/python bench/bench_fit.py --recovery            # + 90% coverage per class
    .venv/bin/python bench/bench_fit.py --cold                # drop the compiled model first
    .venv/bin/python bench/bench_fit.py --override '{"parametrization": {"b": "centered"}}'
    .venv/bin/python bench/bench_fit.py --override '{"sampler": {"precondition": {"mode": "pilot", ...}}}'
    .venv/bin/python bench/bench_fit.py --observations ... --warm-from var/model/fits/<earlier fit>
    .venv/bin/python bench/bench_fit.py --observations ... --eci-only   # the ECI-form baseline alone
    .venv/bin/python bench/bench_fit.py --scaling 1,2,4      # simulated panels at 1x, 2x, 4x the real size
    .venv/bin/python bench/bench_fit.py --observations ... --curvature 500   # + where the step size is capped

Figures: compile time (cold or cached), sampling wall time, gradient
evaluations (leapfrog steps incl. warmup), min bulk/tail ESS over theta, phi,
beta, b, ESS per second, divergences, tree-depth hits, E-BFMI, peak memory
(this process and its children: PyStan's workers are shut down before
reading it). --override takes a JSON dict merged into model.yaml, which is
how parametrization alternatives are measured (see docs/model.md).

ECI-form baseline (atlas_assets/validation/eci_form.py), on the same
observations: one least-squares fit (seconds, function evaluations) and a
--eci-boot-replicate bootstrap (seconds, point fit included), then the ratio
Stan sampling seconds / ECI-form bootstrap seconds (issue 8 wants <= 1).
--eci-only runs just that part, without compiling or sampling Stan.

--curvature N (CmdStan, a preconditioned fit): at N evenly spaced draws of
the main fit, the largest eigenvalue of the potential's Hessian in the
sampler's coordinates (atlas_assets/model/curvature.py): its quantiles, the
share of draws where the adapted step size is unstable (eps^2 lam > 4), the
largest stable step at the 99th percentile, and the named parameters the
stiffest directions move. Leapfrog counts and these do not depend on load.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from atlas_assets.model.diagnostics import fit_diagnostics  # noqa: E402
from atlas_assets.model.engines import select_engine, shutdown_pystan_workers  # noqa: E402
from atlas_assets.model.fit_process import sample_posterior  # noqa: E402
from atlas_assets.model.simulate import REAL_SIZE, simulate_panel, simulated_references  # noqa: E402
from atlas_assets.model.stan_data import (  # noqa: E402
    build_stan_data,
    load_model_config,
    stan_file,
    state_labels,
)
from atlas_assets.validation.eci_form import bootstrap_eci_form, fit_eci_form  # noqa: E402


def coverage_table(idata, si, truth, level: float = 0.9) -> list[dict]:
    post = idata.posterior
    a = (1 - level) / 2
    fam = si.families.family.tolist()
    bfam = si.families.loc[si.families.bounded_pos >= 0].sort_values("bounded_pos").family.tolist()
    classes = {
        "theta (model)": ("theta", truth.theta[si.models.model].to_numpy()),
        "phi (state)": ("phi", truth.phi[state_labels(si.states)].to_numpy()),
        "b (difficulty)": ("b", truth.b[fam].to_numpy()),
        "beta (discrimination)": ("beta", truth.beta[fam].to_numpy()),
        "kappa (dispersion)": ("kappa", truth.kappa[bfam].to_numpy()),
        "shared effect": ("shared_effect", truth.shared_effect[si.settings.setting].to_numpy()),
    }
    rows = []
    for label, (name, true) in classes.items():
        v = post[name].values
        d = v.reshape((-1,) + v.shape[2:])
        lo, hi = np.quantile(d, [a, 1 - a], axis=0)
        cov = (true >= lo) & (true <= hi)
        n = len(true)
        tol = 2.576 * np.sqrt(level * (1 - level) / n)
        rows.append({
            "class": label, "n": n, "coverage": float(cov.mean()),
            "ok_99pct_binomial": bool(abs(cov.mean() - level) <= tol + 0.5 / n),
            "corr_mean_truth": float(np.corrcoef(d.mean(0), true)[0, 1]) if n > 2 else float("nan"),
            "mean_abs_error": float(np.abs(d.mean(0) - true).mean()),
        })
    return rows


def eci_form_figures(obs, n_boot: int, seed: int) -> dict:
    """Time one ECI-form least-squares fit and an n_boot-replicate bootstrap on `obs`."""
    fit = fit_eci_form(obs)
    boot = bootstrap_eci_form(obs, n_boot=n_boot, seed=seed)
    nfev = np.array([r.nfev for r in boot.replicates])
    return {
        "eci_anchor": fit.anchor,
        "eci_fit_seconds": round(fit.seconds, 3),
        "eci_fit_nfev": fit.nfev,
        "eci_fit_converged": fit.converged,
        "eci_bootstrap_replicates": n_boot,
        "eci_bootstrap_seconds": round(boot.seconds, 2),
        "eci_bootstrap_nfev_median_max": [int(np.median(nfev)), int(nfev.max())],
        "eci_bootstrap_converged": int(sum(r.converged for r in boot.replicates)),
    }


def scaling_figures(factors: list[float], cfg: dict, seed: int) -> list[dict]:
    """Cold production fits of simulated panels at `factors` x the real size (models, families and observations
    scaled together); per panel: observations, leapfrog steps, sampling seconds, ms per gradient, min ESS. The
    exponent of sampling seconds in observations (log-log slope) is printed by the caller."""
    rows = []
    for factor in factors:
        size = {k: int(round(v * factor)) for k, v in REAL_SIZE.items()}
        obs, truth = simulate_panel(seed=seed, config=cfg, **size)
        run_cfg = {**cfg, "display": {**cfg["display"], "reference": simulated_references(obs, truth)}}
        si = build_stan_data(obs, run_cfg)
        t0 = time.perf_counter()
        res, info = sample_posterior(si, run_cfg, log=_quiet_log)
        wall = time.perf_counter() - t0
        diag = fit_diagnostics(res.idata, run_cfg["diagnostics"], max_treedepth=int(run_cfg["sampler"]["max_treedepth"]))
        tuning = info.get("main_tuning") or {}
        rows.append({"factor": factor, "observations": si.data["N"], "parameters": int(si.data["S"] + 3 * si.data["J"]),
                     "coordinates": info.get("P"), "map": info.get("form"),
                     "leapfrog": res.n_gradient_evals, "pilot_leapfrog": info.get("pilot_gradient_evals"),
                     "pilot_rounds": info.get("pilot_rounds"),
                     "tuning_leapfrog": tuning.get("gradient_evals"), "step_size": tuning.get("step_size"),
                     "sample_seconds": round(res.sample_seconds, 1),
                     # sampling plus everything around it: the map's construction, the gradients of the stiffness
                     # step, reading the draws (compilation is cached)
                     "wall_seconds": round(wall, 1),
                     "ms_per_gradient_cpu": round(1000 * res.sample_seconds * min(2, int(run_cfg["sampler"]["chains"]))
                                                  / res.n_gradient_evals, 3),
                     "mean_tree_depth": round(diag["mean_tree_depth"], 2),
                     "min_ess_bulk": round(diag["min_ess_bulk"]), "max_rhat": round(diag["max_rhat"], 4),
                     "divergences": diag["divergences"], "passes": diag["passes"]})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def _quiet_log(msg: str) -> None:
    """Print engine messages, and progress only every 500 iterations."""
    if "iteration" in msg:
        try:
            it = int(msg.split("iteration ")[1].split("/")[0])
        except (IndexError, ValueError):
            it = 0
        if it % 500:
            return
    print(msg, flush=True)


def curvature_figures(res, si, cfg, n_draws: int, step_sizes) -> dict:
    """Largest Hessian eigenvalue of the potential at `n_draws` draws of the main fit, in its sampled coordinates;
    printed, and returned for --json."""
    from atlas_assets.model import curvature, precondition
    from atlas_assets.model.engines import log_density_gradients

    pc = res.preconditioner
    if pc is None or res.engine != "cmdstanpy":
        print("curvature: needs a preconditioned fit under CmdStan (batched gradients)")
        return {}
    data = {**si.data, **pc.data()}
    sampled = res.idata.posterior["pc_z"].values
    sampled = sampled.reshape(-1, sampled.shape[-1])
    rows = np.linspace(0, len(sampled) - 1, min(n_draws, len(sampled))).round().astype(int)
    lam, direction = curvature.largest_curvature(
        lambda points: log_density_gradients(stan_file(cfg), data, points, engine="cmdstanpy")[1], sampled[rows])
    step = float(np.median(step_sizes))
    q = np.quantile(lam, [0.5, 0.9, 0.99, 1.0])
    figures = {"draws": len(rows), "largest_eigenvalue_q50_q90_q99_max": [round(float(v), 1) for v in q],
               "median_step_size": round(step, 4), "unstable_share_at_that_step": curvature.unstable_share(lam, step),
               "largest_stable_step_at_q99": round(float(2 / np.sqrt(q[2])), 3)}
    for k, v in figures.items():
        print(f"curvature: {k:34s} {v}")
    names = precondition.coordinate_names(si, centred=pc.centring is not None)
    moved = curvature.in_posterior_sds(pc, direction)
    figures["stiffest"] = []
    for i in np.argsort(-lam)[:5]:
        lead = curvature.leading_coordinates(names, moved[i])
        figures["stiffest"].append({"eigenvalue": round(float(lam[i]), 1), "moves": lead})
        print(f"curvature: eigenvalue {lam[i]:7.1f} along {lead}")
    return figures


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--observations", help="modeled_observations parquet/csv (default: simulate)")
    p.add_argument("--seed", type=int, default=1, help="simulation seed (also the ECI-form bootstrap seed)")
    p.add_argument("--recovery", action="store_true", help="print 90%% coverage of the simulated truth")
    p.add_argument("--chains", type=int)
    p.add_argument("--warmup", type=int)
    p.add_argument("--draws", type=int)
    p.add_argument("--engine", default=None)
    p.add_argument("--cold", action="store_true", help="delete the cached compiled model first")
    p.add_argument("--override", default="{}", help="JSON merged into model.yaml")
    p.add_argument("--json", help="also write the figures to this JSON file")
    p.add_argument("--warm-from", default=None, help="an earlier fit folder: precondition and initialise from it")
    p.add_argument("--eci-only", action="store_true", help="only the ECI-form least-squares baseline (no Stan fit)")
    p.add_argument("--eci-boot", type=int, default=100, help="ECI-form bootstrap replicates (default 100)")
    p.add_argument("--scaling", default=None, help="comma-separated size factors of simulated panels, e.g. 1,2,4")
    p.add_argument("--curvature", type=int, default=0,
                   help="draws of the main fit at which to find the stiffest direction (0: off)")
    args = p.parse_args(argv)

    over = json.loads(args.override)
    smp = over.setdefault("sampler", {})
    for k in ("chains", "warmup", "draws"):
        if getattr(args, k) is not None:
            smp[k] = getattr(args, k)
    cfg = load_model_config(overrides=over)
    if args.scaling:
        rows = scaling_figures([float(f) for f in args.scaling.split(",")], cfg, args.seed)
        shutdown_pystan_workers()
        n = np.log([r["observations"] for r in rows])
        for key in ("sample_seconds", "wall_seconds", "leapfrog", "ms_per_gradient_cpu"):
            slope = np.polyfit(n, np.log([r[key] for r in rows]), 1)[0] if len(rows) > 1 else float("nan")
            print(f"exponent of {key} in observations: {slope:.2f}")
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2))
        return 0
    truth = None
    if args.observations:
        from atlas_assets.model.fit_process import read_table

        obs = read_table(args.observations)
    else:
        obs, truth = simulate_panel(seed=args.seed, config=cfg, **REAL_SIZE)
    si = build_stan_data(obs, cfg)
    d = si.data
    print(f"panel: N={d['N']} obs, M={d['M']} models (M_ref={d['M_ref']}), S={d['S']} states, J={d['J']} families; "
          f"pieces: bb={d['N_bb']} bbz={d['N_bbz']} beta={d['N_bt']} one={d['N_one']} zero={d['N_zero']} "
          f"rating={d['N_rt']}; A={d['A']} D={d['D']}")
    # the baseline first: cheap, and its figures survive a failed Stan fit
    eci = eci_form_figures(obs, n_boot=args.eci_boot, seed=args.seed)
    for k, v in eci.items():
        print(f"{k:32s} {v}")
    if args.eci_only:
        if args.json:
            Path(args.json).write_text(json.dumps(eci, indent=2, default=str))
        return 0
    sf = stan_file(cfg)
    engine = select_engine(args.engine or cfg["sampler"].get("engine", "auto"))
    if args.cold and engine == "pystan":
        import httpstan.cache
        import httpstan.models

        name = httpstan.models.calculate_model_name(sf.read_text())
        try:
            httpstan.cache.delete_model_directory(name)
            print(f"deleted cached build {name}")
        except Exception as exc:
            print(f"no cached build to delete ({exc})")
    print(f"parametrization: {cfg.get('parametrization')}")
    s = cfg["sampler"]
    t0 = time.perf_counter()
    ok = True
    try:
        # the production path: plain, pilot-preconditioned or warm (--warm-from), as configured
        res, precondition_info = sample_posterior(si, cfg, log=_quiet_log, engine=engine, warm_from=args.warm_from)
    except Exception as exc:  # report and fail
        print(f"FIT FAILED: {exc!r}")
        ok = False
    finally:
        shutdown_pystan_workers()
    wall = time.perf_counter() - t0
    self_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if not ok:
        return 1
    diag = fit_diagnostics(res.idata, cfg["diagnostics"], max_treedepth=int(s["max_treedepth"]))
    ess_s = diag["min_ess_bulk"] / res.sample_seconds
    figures = {
        "engine": res.engine,
        "precondition": precondition_info,
        "compile_seconds": round(res.compile_seconds, 2),
        "compiled_from_cache": res.compiled_from_cache,
        "sample_seconds": round(res.sample_seconds, 1),
        "wall_seconds": round(wall, 1),
        "gradient_evals_total": res.n_gradient_evals,
        "gradient_evals_sampling": int(res.idata.sample_stats["n_steps"].sum()),
        "ms_per_gradient_cpu_estimate": round(1000 * res.sample_seconds * min(2, int(s["chains"])) / res.n_gradient_evals, 3),
        "step_size_per_chain": [round(x, 4) for x in diag["step_size_per_chain"]],
        "mean_acceptance_per_chain": [round(float(x), 3) for x in
                                      res.idata.sample_stats["acceptance_rate"].mean("draw").values],
        "mean_tree_depth": round(diag["mean_tree_depth"], 2),
        "max_tree_depth": diag["max_tree_depth"],
        "treedepth_hits": diag["treedepth_hits"],
        "divergences": diag["divergences"],
        "min_ess_bulk": round(diag["min_ess_bulk"], 1),
        "min_ess_tail": round(diag["min_ess_tail"], 1),
        "min_ess_bulk_per_second": round(ess_s, 2),
        "max_rhat": round(diag["max_rhat"], 4),
        "ebfmi_per_chain": [round(x, 3) for x in diag["ebfmi_per_chain"]],
        "worst_ess_bulk": diag["worst_ess_bulk"][:3],
        "worst_rhat": diag["worst_rhat"][:3],
        "passes_diagnostics": diag["passes"],
        "peak_rss_mb_self": round(self_mb, 0),
        "peak_rss_mb_children": round(child_mb, 0),
        **eci,
        # issue 8: Stan sampling should cost no more than the baseline's bootstrap
        "stan_sampling_over_eci_bootstrap": round(res.sample_seconds / eci["eci_bootstrap_seconds"], 2),
    }
    for k, v in figures.items():
        print(f"{k:32s} {v}")
    if args.curvature:
        figures["curvature"] = curvature_figures(res, si, cfg, args.curvature, diag["step_size_per_chain"])
    if args.recovery and truth is not None:
        print("\n90% interval coverage of the simulated truth")
        rows = coverage_table(res.idata, si, truth)
        for r in rows:
            print(f"  {r['class']:24s} n={r['n']:4d} coverage={r['coverage']:.3f} "
                  f"{'ok' if r['ok_99pct_binomial'] else 'OUT OF 99% BINOMIAL BAND'} "
                  f"corr={r['corr_mean_truth']:.3f} MAE={r['mean_abs_error']:.3f}")
        figures["recovery"] = rows
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
