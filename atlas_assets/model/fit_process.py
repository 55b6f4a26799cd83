"""Run the capability fit in its own process.

    python -m atlas_assets.model.fit_process \
        --observations modeled_observations.parquet --out DIR \
        [--config atlas_assets/config/model.yaml] [--engine pystan] \
        [--chains 4 --warmup 1000 --draws 1000 --seed N] [--require-pass]

Writes under DIR:
    posterior.nc            ArviZ InferenceData (posterior, sample_stats, ...)
    diagnostics.json        diagnostics.fit_diagnostics + timings + engine
    state_scores.{parquet,csv}, model_scores.*, reasoning_effects.*,
    family_parameters.*     score tables (scores.py)
    index_states.csv, index_models.csv, index_families.csv,
    index_observations.csv  the index maps naming every Stan parameter
    modeled_observations.csv, model_config.json
                            the exact inputs, so a fit folder is self-contained
                            (`load_fit` rebuilds everything from it)
    fit_summary.json        the small dict also reported as metadata

Launched by `dagster.PipesSubprocessClient` it reports progress through
`context.log.info` and the final metadata through
`context.report_asset_materialization`; otherwise it logs to stderr.
PyStan's worker pool is shut down before exit so the process ends cleanly
(DESIGN.md: PyStan workers otherwise keep a step process alive).

The same steps are available in-process as `run_fit(...)` (pure paths in,
paths and summary out) for callers that already run in their own process.
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

from atlas_assets.model.diagnostics import fit_diagnostics, format_summary
from atlas_assets.model.engines import fit_model, select_engine, shutdown_pystan_workers
from atlas_assets.model.scores import (
    add_observation_draws,
    family_parameters,
    make_display_scale,
    model_scores,
    reasoning_effects,
    resolve_reference_states,
    state_scores,
)
from atlas_assets.model.stan_data import build_stan_data, load_model_config, stan_file


def read_table(path: str | Path) -> pd.DataFrame:
    """Read parquet (via DuckDB; pyarrow is not a dependency) or CSV."""
    path = Path(path)
    if path.suffix == ".csv":
        return pd.read_csv(path)
    import duckdb

    con = duckdb.connect()
    try:
        return con.execute("SELECT * FROM read_parquet(?)", [str(path)]).df()
    finally:
        con.close()


@dataclass
class LoadedFit:
    """A finished fit folder read back: posterior, the Stan input it was fitted to, its config and
    display scale. What every downstream output and validation study starts from."""

    fit_dir: Path
    idata: Any
    stan_input: Any
    config: dict
    scale: Any


def load_fit(fit_dir: str | Path) -> LoadedFit:
    """Read a fit folder written by `run_fit` (callers check `publishable.require_publishable_fit` first)."""
    import arviz as az

    fit_dir = Path(fit_dir)
    config = json.loads((fit_dir / "model_config.json").read_text())
    observations = pd.read_csv(fit_dir / "modeled_observations.csv")
    stan_input = build_stan_data(observations, config)
    idata = az.from_netcdf(str(fit_dir / "posterior.nc"))
    return LoadedFit(fit_dir, idata, stan_input, config, make_display_scale(idata, stan_input, config))


def write_table(df: pd.DataFrame, stem: Path) -> None:
    """Write `stem`.parquet (via DuckDB) and `stem`.csv."""
    import duckdb

    df = df.copy()
    for c in df.columns:
        if df[c].dtype == object:
            df[c] = df[c].map(lambda v: None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v))
    df.to_csv(stem.with_suffix(".csv"), index=False)
    con = duckdb.connect()
    try:
        con.register("t", df)
        con.execute(f"COPY t TO '{stem.with_suffix('.parquet')}' (FORMAT PARQUET)")
    finally:
        con.close()


def sample_posterior(si, cfg: Mapping[str, Any], *, log: Callable[[str], None] = print, engine: str | None = None,
                     warm_from: str | Path | None = None):
    """NUTS on the Stan input, with the configured preconditioning; returns (FitResult, info).

    - `sampler.precondition.mode: pilot`: a short pilot fit on the same data, then the main fit through the
      affine map of its posterior (precondition.py) with a short warmup, started from pilot draws;
    - `warm_from` (an earlier fit folder, e.g. the production fit for a validation fold or last night's
      fit): the same, with the earlier posterior carried to this data by name and no pilot;
    - otherwise the plain program (diagonal metric from the identity).
    Leapfrog steps and seconds of the pilot are added to the result's, so budgets count everything."""
    from atlas_assets.model import precondition

    smp = cfg["sampler"]
    pcfg = smp.get("precondition") or {"mode": "none"}
    common = dict(engine=engine or smp.get("engine", "auto"), adapt_delta=float(smp["adapt_delta"]),
                  max_treedepth=int(smp["max_treedepth"]), log=log, coords=si.coords(), dims=si.dims(),
                  save_warmup=True)
    chains, draws, seed = int(smp["chains"]), int(smp["draws"]), int(smp["seed"])
    source = None
    pilot = None
    fallback = None
    premade = None
    if warm_from is not None:
        earlier = load_fit(warm_from)
        source = (earlier.idata.posterior, earlier.stan_input, f"earlier fit {Path(warm_from).name}")
        _, matched = precondition.transported_draws(earlier.idata.posterior, earlier.stan_input, si, max_draws=2)
        can_place = select_engine(common["engine"]) == "cmdstanpy"
        placed = matched | precondition.standard_normal_mask(si.data)
        from atlas_assets.model.placement import PlacementError, new_reference_models

        new_references = len(new_reference_models(earlier.stan_input, si))
        if new_references:
            # the reference block is then placed through the new models' own capabilities: they count, not the
            # Helmert coordinates they move
            placed = placed.copy()
            placed[:precondition.block_sizes(si.data)["theta_ref_raw"]] = True
        fallback = declined_warm_start(pcfg, placed, Path(warm_from).name, can_place=can_place,
                                       extra_new=new_references)
        if not fallback and placing_new_coordinates(pcfg, placed, can_place, extra_new=new_references):
            # new coordinates, placed by their conditional posterior before the map is built (model/placement.py);
            # where that fails the pilot route runs instead
            try:
                premade = _map_from(*source, si, cfg, pcfg, common, log, place_seed=seed)
            except PlacementError as err:
                fallback = f"pilot: placing the {int(np.sum(~placed)) + new_references} new coordinates failed ({err})"
        if fallback:
            log(f"warm start declined: {fallback}")
            source, warm_from, earlier = None, None, None
    if source is None and pcfg.get("mode") == "pilot":
        # the pilot's draws only shape the main fit's coordinates (the main fit is gated, the pilot is not): a
        # looser acceptance target and a lower tree-depth cap keep its early warmup, where the step size is still
        # far too small, from running 1,023-step trajectories
        pilot_common = {**common, "adapt_delta": float(pcfg.get("pilot_adapt_delta", common["adapt_delta"])),
                        "max_treedepth": int(pcfg.get("pilot_max_treedepth", common["max_treedepth"]))}

        warmup_pilot = pilot_warmup(pcfg, sum(precondition.block_sizes(si.data).values()))

        def run_pilot(data: dict, init, round_no: int, **sampler_args):
            return fit_model(stan_file(cfg), data, chains=int(pcfg["pilot_chains"]), warmup=warmup_pilot,
                             draws=int(pcfg["pilot_draws"]), seed=seed + 7918 + round_no, init=init,
                             **sampler_args, **pilot_common)

        log(f"pilot fit: {pcfg['pilot_chains']} chains x ({warmup_pilot} + {pcfg['pilot_draws']})")
        pilot = run_pilot(si.data, float(smp.get("init_radius", 0.5)), 1)
        source = (pilot.idata.posterior, si, "pilot fit")
    if source is None:
        res = fit_model(stan_file(cfg), si.data, chains=chains, warmup=int(smp["warmup"]), draws=draws, seed=seed,
                        init=float(smp.get("init_radius", 0.5)), **common)
        return res, {"mode": "none"}
    posterior, earlier_si, label = source
    rounds = int(pcfg.get("pilot_rounds", 1)) if pilot is not None else 1
    extra_pilots = []
    for round_no in range(1, rounds + 1):
        pc, info = premade if premade is not None else _map_from(posterior, earlier_si, label, si, cfg, pcfg, common, log)
        typical = (info.get("stiffness") or {}).get("typical", True)
        if typical or round_no == rounds:
            break
        # the pilot stopped short of the typical set (its draws' gradients have a mean, measured: a 2x simulated
        # panel's pilot left the main fit at step size 0.014 and tree depth 10): another pilot round, started from
        # those draws through their map, with a diagonal metric to rescale what the map got wrong
        log(f"pilot draws not typical of the posterior: pilot round {round_no + 1} through their map")
        # the first step size is the whitened scale's (~0.1-0.2), not Stan's default 1: from such draws a unit step
        # can leap where the beta tail of an exact 1 overflows, an error that ends a chain before its first draw
        # (measured: a 4x simulated panel's third round; docs/model.md, stop 23)
        again = run_pilot({**si.data, **pc.data()}, pc.inits(int(pcfg["pilot_chains"])), round_no + 1, metric="diag_e",
                          adapt={"step_size": float(pcfg.get("round_step_size", 0.2))})
        extra_pilots.append(again)
        posterior, earlier_si, label = again.idata.posterior, si, f"pilot fit (round {round_no + 1})"
    if fallback:
        info["warm_declined"] = fallback
    if pilot is not None:
        info["pilot_rounds"] = 1 + len(extra_pilots)
    data = {**si.data, **pc.data()}
    warmup = int(pcfg.get("main_warmup", smp["warmup"])) if pcfg.get("mode") == "pilot" or warm_from else int(smp["warmup"])
    adapt = main_adaptation(pcfg, earlier.idata if warm_from is not None else None)
    if adapt:
        info["main_adapt"] = adapt
    metric, warmup, note = main_metric(pcfg, pc.matched | precondition.standard_normal_mask(si.data), warmup,
                                       typical=typical)
    if note:
        info["unmatched" if typical else "untypical"] = note
        log(f"main fit: {note}")
    res = None
    if warm_from is not None:
        adapt, warmup, kept = kept_step_size(pcfg, adapt, warmup, earlier.idata, metric, common["engine"],
                                             common["adapt_delta"])
        if kept:
            info["main_adapt"] = adapt
            log(f"main fit: {kept}")
    else:
        res = tuned_main_fit(data, pc.inits(chains), warmup, adapt, metric, cfg, pcfg, common, info, log)
    if res is None:
        res = fit_model(stan_file(cfg), data, chains=chains, warmup=warmup, draws=draws, seed=seed,
                        init=pc.inits(chains), adapt=adapt, metric=metric, **common)
    res, pc = _again_while_failing(res, pc, si, cfg, pcfg, common, info, log)
    if pilot is not None:
        pilots = [pilot, *extra_pilots]
        pilot_steps = sum(int(p.n_gradient_evals or 0) for p in pilots)
        pilot_seconds = sum(p.sample_seconds for p in pilots)
        res.n_gradient_evals = int(res.n_gradient_evals or 0) + pilot_steps
        res.sample_seconds += pilot_seconds
        res.compile_seconds += pilot.compile_seconds
        info.update(pilot_gradient_evals=pilot_steps, pilot_seconds=round(pilot_seconds, 1), pilot_warmup=warmup_pilot)
    res.settings = {**res.settings, "main_warmup": warmup, "precondition": info}
    res.preconditioner = pc
    return res, info


def _again_while_failing(res, pc, si, cfg: Mapping[str, Any], pcfg: Mapping[str, Any], common: Mapping[str, Any],
                         info: dict, log: Callable[[str], None]):
    """(result, map): a main fit that fails its gates is followed by another, warm from its own draws, at most
    `refit_on_failure` times; the last one is the result and is gated. A failed main fit's 4,000 draws make a far
    better map than a pilot's 400: measured, one cold fit in four failed (2 divergences, or R-hat 1.0114) after a
    pilot whose map came out distorted, on the real panel and seeds the settings were not tuned on (docs/model.md,
    stop 28). The draws of a failed fit only shape and start the next one, as a pilot's do. Leapfrog steps and
    seconds of every fit are added to the result's, so budgets count everything. CmdStan only: PyStan samples the
    main fit on a diagonal metric without the stiffness correction, a route this was not measured on."""
    from atlas_assets.model import precondition

    rounds = int(pcfg.get("refit_on_failure", 0)) if select_engine(common["engine"]) == "cmdstanpy" else 0
    smp = cfg["sampler"]
    chains, draws, seed = int(smp["chains"]), int(smp["draws"]), int(smp["seed"])
    failed = []
    for round_no in range(1, rounds + 1):
        diag = fit_diagnostics(res.idata, cfg.get("diagnostics"), max_treedepth=int(smp["max_treedepth"]))
        if diag["passes"]:
            break
        failed.append({"failures": diag["failures"], "gradient_evals": int(res.n_gradient_evals or 0),
                       "sample_seconds": round(res.sample_seconds, 1)})
        log(f"main fit failed its gates ({'; '.join(diag['failures'].values())}): main fit again, warm from its "
            f"draws ({round_no} of at most {rounds})")
        pc, again_info = _map_from(res.idata.posterior, si, "failed main fit", si, cfg, pcfg, common, log)
        typical = (again_info.get("stiffness") or {}).get("typical", True)
        metric, warmup, _ = main_metric(pcfg, pc.matched | precondition.standard_normal_mask(si.data),
                                        int(pcfg.get("main_warmup", 150)), typical=typical)
        again = fit_model(stan_file(cfg), {**si.data, **pc.data()}, chains=chains, warmup=warmup, draws=draws,
                          seed=seed + 104_729 * round_no, init=pc.inits(chains),
                          adapt=main_adaptation(pcfg, res.idata), metric=metric, **common)
        again.n_gradient_evals = int(again.n_gradient_evals or 0) + int(res.n_gradient_evals or 0)
        again.sample_seconds += res.sample_seconds
        again.compile_seconds += res.compile_seconds
        res = again
    if failed:
        info["failed_main_fits"] = failed
    return res, pc


def _map_from(posterior, earlier_si, label: str, si, cfg: Mapping[str, Any], pcfg: Mapping[str, Any],
              common: Mapping[str, Any], log: Callable[[str], None], place_seed: int | None = None):
    """The affine map of `posterior` carried to this data, shrunk along its stiff directions (CmdStan); (map, info).
    `place_seed`: the coordinates new since `posterior` are first placed by their conditional posterior
    (model/placement.py; PlacementError where that fails)."""
    from atlas_assets.model import precondition

    form = pcfg.get("map") or {}
    max_draws = int(pcfg.get("max_draws", 1000))
    map_args = dict(shrinkage=float(pcfg.get("shrinkage", 0.1)), form=str(form.get("form", "dense")),
                    max_rank=int(form.get("max_rank", 50)), min_eigenvalue=float(form.get("min_eigenvalue", 2.0)))

    def built(earlier_posterior, extra_phi=None):
        # a refit that places new coordinates also carries the earlier draws to a changed reference set's scale
        # (precondition.rescaled_draws; validation folds keep the route they were measured with)
        return precondition.build_preconditioner(earlier_posterior, earlier_si, si, dict(cfg), max_draws=max_draws,
                                                 extra_phi=extra_phi, restandardise=place_seed is not None,
                                                 **map_args)

    placed_info, extra_phi, ref_info = None, None, None
    if place_seed is not None:
        from atlas_assets.model import placement
        from atlas_assets.model.engines import CmdStanLogDensity

        def density_for(stan_input, pc):
            return CmdStanLogDensity(stan_file(cfg), {**stan_input.data, **pc.data()}, log)

        if placement.new_reference_models(earlier_si, si):
            # a new reference model moves every Helmert coordinate of the reference capabilities: its capability is
            # placed first, as a free model's, and the earlier draws are carried over again with it
            extra_phi, ref_info = placement.reference_capabilities(posterior, earlier_si, si, dict(cfg), map_args,
                                                                   max_draws, density_for, place_seed)
            log(f"placed the new reference models {ref_info['models']} as free models first: {ref_info}")
    pc = built(posterior, extra_phi)
    if place_seed is not None and len(placement.new_coordinates(pc)):
        with density_for(si, pc) as density:
            pc, placed_info = placement.placed_map(pc, si, dict(cfg), density, place_seed, map_args)
        log(f"placed {placed_info['placed']} new coordinates by their conditional posterior: {placed_info}")
    info = {"mode": "pilot" if label.startswith("pilot") else "warm", "from": label, **precondition.summary(pc)}
    if placed_info is not None:
        info["placed"] = placed_info
    if ref_info is not None:
        info["placed_reference_models"] = ref_info
    stiff = pcfg.get("stiffness") or {}
    if stiff.get("draws") and select_engine(common["engine"]) != "cmdstanpy":
        # PyStan computes a gradient per HTTP call (minutes for 1,000 draws) and samples with diag_e, whose
        # windows would partly undo the correction: the fallback engine goes without it
        info["stiffness"] = {"skipped": "PyStan engine"}
    elif stiff.get("draws"):
        # gradients at the earlier draws, on this data, shrink the map where the posterior is stiffer than its
        # covariance says (precondition.stiffness_correction)
        from atlas_assets.model.engines import log_density_gradients

        def gradients_at_draws(pc):
            rows = np.linspace(0, len(pc.draws) - 1, min(int(stiff["draws"]), len(pc.draws))).round().astype(int)
            _, grads = log_density_gradients(stan_file(cfg), {**si.data, **pc.data()}, pc.z(pc.draws[rows]),
                                             engine=common["engine"], log=log)
            return rows, grads

        rows, grads = gradients_at_draws(pc)
        chain_limit = stiff.get("chain_max_mean_share")
        if chain_limit and label.startswith("pilot"):
            # a pilot chain still short of the typical set stretches the pooled map along its lag (measured: the
            # main fit then ran at tree depth 5.4-6 instead of 5, or a whole second pilot round ran): the map is
            # built again from the other chains, if at least two remain
            lagging = precondition.lagging_chains(grads, precondition.draw_chains(posterior, max_draws)[rows],
                                                  float(chain_limit))
            n_chains = int(posterior["phi"].shape[0])
            if lagging and n_chains - len(lagging) >= 2:
                log(f"pilot chains {lagging} not yet typical of the posterior: the map is built from the other "
                    f"{n_chains - len(lagging)}")
                posterior = posterior.isel(chain=[c for c in range(n_chains) if c not in lagging])
                pc = built(posterior)
                info.update(precondition.summary(pc), lagging_chains_dropped=lagging)
                rows, grads = gradients_at_draws(pc)
        pc, stiff_info = precondition.stiffness_correction(
            pc, grads, max_rank=int(stiff.get("max_rank", 50)), max_shrink=float(stiff.get("max_shrink", 2.0)),
            clip_quantile=float(stiff.get("clip_quantile", 0.95)), max_mean_share=float(stiff.get("max_mean_share", 0.05)))
        info["stiffness"] = stiff_info
        log(f"stiffness correction: {stiff_info}")
    log(f"preconditioner from the {label}: {info['matched']} of {info['P']} coordinates carried over, {info['form']} map"
        f"{'' if info['form'] == 'dense' else ' of rank ' + str(info['rank'])}, largest correlation eigenvalue "
        f"{info['largest_correlation_eigenvalue']:.1f}")
    return pc, info


def pilot_warmup(pcfg: Mapping[str, Any], coordinates: int) -> int:
    """The pilot's warmup iterations: `pilot_warmup` for a program of up to `pilot_warmup_coordinates` sampled
    coordinates, proportionally more for a larger one. Measured on simulated panels twice and four times the real
    size: 100 iterations left the first round short of the typical set (its draws' gradients had a mean 33% and 20% of
    their second moment), so 2 and 3 rounds ran; with 200 and 400 iterations one round reached it (docs/model.md,
    stop 25)."""
    base = int(pcfg["pilot_warmup"])
    reference = pcfg.get("pilot_warmup_coordinates")
    return base if not reference or coordinates <= int(reference) else int(np.ceil(base * coordinates / int(reference)))


def main_adaptation(pcfg: Mapping[str, Any], earlier_idata=None) -> dict:
    """The whitened main fit's warmup (`precondition.main_adapt`): Stan's adaptation windows, and for a warm start
    the earlier fit's final step size (the median over its chains: it sampled the same whitened coordinates) as the
    first one instead of 1. {} when not configured."""
    cfg = pcfg.get("main_adapt") or {}
    adapt = {k: int(cfg[k]) for k in ("init_buffer", "window", "term_buffer") if cfg.get(k) is not None}
    if cfg.get("step_size_from_earlier_fit") and earlier_idata is not None and "sample_stats" in earlier_idata:
        adapt["step_size"] = round(float(np.median(earlier_idata.sample_stats["step_size"].values[:, -1])), 6)
    return adapt


def step_at_target(step: float, accepted: float, adapt_delta: float, max_factor: float) -> tuple[float, float]:
    """(step, factor): `step`, at which draws accepted `accepted` on average, moved to where they would accept at
    `adapt_delta`, by HMC's optimal-scaling law in high dimension, mean acceptance 2 Phi(-c eps^2) (Beskos, Pillai,
    Roberts, Sanz-Serna and Stuart 2013, Bernoulli 19(5A)); by at most `max_factor` either way.

    Stan's dual averaging ends below that step (its draws accept ~0.82 at a target of 0.75), and on whitened
    coordinates the U-turn comes after a path of ~pi, so a step below pi / 15 = 0.209 doubles many trajectories from
    15 leapfrog steps to 31 (measured: sampling at 0.209, 93k sampling steps against 60k; docs/model.md, stop 29)."""
    from scipy.stats import norm

    factor = float(np.clip(np.sqrt(norm.ppf(adapt_delta / 2) / norm.ppf(accepted / 2)), 1 / max_factor, max_factor))
    return round(float(step) * factor, 6), factor


def fixed_step_config(pcfg: Mapping[str, Any], route: str, metric: str, engine: str) -> Mapping[str, Any] | None:
    """`main_adapt.<route>` (warm_fixed_step | cold_fixed_step) where a fixed step size can be taken: on the whitened
    route (unit metric) under CmdStan, which samples without adaptation; None elsewhere or when not configured."""
    cfg = (pcfg.get("main_adapt") or {}).get(route)
    return cfg if cfg and metric == "unit_e" and select_engine(engine) == "cmdstanpy" else None


def kept_step_size(pcfg: Mapping[str, Any], adapt: dict, warmup: int, earlier_idata, metric: str, engine: str,
                   adapt_delta: float) -> tuple[dict, int, str | None]:
    """(adapt, warmup, note): a warm start that samples at the earlier fit's step size moved to the acceptance
    target (step_at_target) instead of adapting one (`main_adapt.warm_fixed_step`: `burn_in` iterations without
    adaptation, then the draws), or the inputs unchanged and None. Each refit's own acceptance then sets the next
    one's step, so the rule settles where the draws accept at the target. Only on the whitened route (unit metric,
    CmdStan) and only when the earlier draws accepted within `accept_within` of the target. Any step size leaves
    the posterior exact: the gates judge the draws, and a fit that fails them is fitted again with adaptation
    (`refit_on_failure`)."""
    cfg = fixed_step_config(pcfg, "warm_fixed_step", metric, engine)
    if not cfg or "step_size" not in adapt:
        return adapt, warmup, None
    stats = earlier_idata.sample_stats
    if "acceptance_rate" not in stats:
        return adapt, warmup, None
    accepted = float(np.mean(stats["acceptance_rate"].values))
    if abs(accepted - adapt_delta) > float(cfg.get("accept_within", 0.1)):
        return adapt, warmup, None
    step, factor = step_at_target(adapt["step_size"], accepted, adapt_delta, float(cfg.get("max_factor", 1.25)))
    burn_in = int(cfg.get("burn_in", 25))
    return ({**adapt, "step_size": step, "engaged": False}, burn_in,
            f"step size {step}: the earlier fit's {adapt['step_size']} x {factor:.3f} (its draws accepted "
            f"{accepted:.3f}, target {adapt_delta}), {burn_in} iterations without adaptation")


def tuned_main_fit(data: dict, init, warmup: int, adapt: dict, metric: str, cfg: Mapping[str, Any],
                   pcfg: Mapping[str, Any], common: Mapping[str, Any], info: dict, log: Callable[[str], None]):
    """A cold main fit in two runs (`main_adapt.cold_fixed_step`), or None when not configured or not on the
    whitened CmdStan route: the main fit's warmup adapts the step size and `tuning_draws` draws measure its
    acceptance; the draws are then taken from where those chains stopped, at that step moved to the acceptance
    target (step_at_target). Measured on six seeds of the real panel: adapted, the chains stopped at 0.19-0.25 and
    the cold fits took 121k-140k leapfrog steps where the pilot's map was sound; tuned, 124k-126k (docs/model.md,
    stop 29). The tuning run's steps and seconds count in the fit's."""
    tcfg = fixed_step_config(pcfg, "cold_fixed_step", metric, common["engine"])
    if not tcfg:
        return None
    smp = cfg["sampler"]
    chains, draws, seed = int(smp["chains"]), int(smp["draws"]), int(smp["seed"])
    tuning = fit_model(stan_file(cfg), data, chains=chains, warmup=warmup, draws=int(tcfg.get("tuning_draws", 50)),
                       seed=seed, init=init, adapt=adapt, metric=metric, **common)
    stats = tuning.idata.sample_stats
    tuned = float(np.median(stats["step_size"].values[:, -1]))
    accepted = float(np.mean(stats["acceptance_rate"].values))
    step, factor = step_at_target(tuned, accepted, common["adapt_delta"], float(tcfg.get("max_factor", 1.25)))
    log(f"main fit: step size {step}, the tuned {tuned:.6f} x {factor:.3f} (its {tcfg.get('tuning_draws', 50)} "
        f"draws accepted {accepted:.3f}, target {common['adapt_delta']}): draws from where its chains stopped")
    where = tuning.idata.posterior["pc_z"].values[:, -1]
    res = fit_model(stan_file(cfg), data, chains=chains, warmup=0, draws=draws, seed=seed + 15_485_863,
                    init=[{"pc_z": row.tolist()} for row in where], adapt={"step_size": step, "engaged": False},
                    metric=metric, **common)
    res.n_gradient_evals = int(res.n_gradient_evals or 0) + int(tuning.n_gradient_evals or 0)
    res.sample_seconds += tuning.sample_seconds
    res.compile_seconds += tuning.compile_seconds
    info["main_tuning"] = {"tuned_step_size": round(tuned, 6), "accepted": round(accepted, 3),
                           "step_size": step, "gradient_evals": int(tuning.n_gradient_evals or 0),
                           "sample_seconds": round(tuning.sample_seconds, 1)}
    return res


def declined_warm_start(pcfg: Mapping[str, Any], placed: np.ndarray, earlier: str,
                        can_place: bool = False, extra_new: int = 0) -> str | None:
    """Why a warm start from `earlier` gives way to the pilot route, or None. `placed`: coordinates the earlier
    posterior informs, or whose prior is std_normal (precondition.standard_normal_mask: they enter the map at their
    prior exactly). Others new since (a model, state or family) enter at a prior-like place and scale; measured,
    such a warm start cost more than the pilot route (395k against ~290k leapfrog steps, the 04-14 fit onto the
    04-17 panel, 15 of 574 coordinates new), so more than `warm_max_new` of them (default 0; None: no limit, a
    validation fold) decline it, unless they are at most `warm_place_max` and are placed by their conditional
    posterior first (`can_place`: CmdStan, which computes the gradients in one call; placing_new_coordinates).
    `extra_new`: new coordinates not in `placed` (a new reference model's capability)."""
    new = int(np.sum(~np.asarray(placed))) + int(extra_new)
    limit = pcfg.get("warm_max_new", 0)
    if pcfg.get("mode") != "pilot" or limit is None or new <= int(limit):
        return None
    if can_place and new <= int(pcfg.get("warm_place_max", 0)):
        return None
    return (f"pilot: {new} coordinates new since {earlier} (warm_max_new {limit}, "
            f"warm_place_max {int(pcfg.get('warm_place_max', 0)) if can_place else 'n/a: PyStan engine'})")


def placing_new_coordinates(pcfg: Mapping[str, Any], placed: np.ndarray, can_place: bool, extra_new: int = 0) -> bool:
    """Whether a warm start places its new coordinates (model/placement.py) before building the map: there are
    some, at most `warm_place_max`, and the engine computes gradients in one call."""
    new = int(np.sum(~np.asarray(placed))) + int(extra_new)
    return can_place and 0 < new <= int(pcfg.get("warm_place_max", 0))


def main_metric(pcfg: Mapping[str, Any], placed: np.ndarray, warmup: int,
                typical: bool = True) -> tuple[str, int, str | None]:
    """(metric, warmup, note) of the whitened main fit. The configured metric (`main_adapt.metric`), unless the map
    has scales a fixed metric cannot rescale, so Stan's windowed diagonal adaptation does, over
    `main_warmup_unmatched` iterations: coordinates new since the earlier posterior sit in the map at a prior-like
    place and scale (measured: step size 0.017, tree depth 8, warm from the 04-14 fit onto the 04-17 panel), and a map
    from draws not `typical` of this posterior is off throughout (a 2x simulated panel: step size 0.014, depth 10)."""
    metric = str((pcfg.get("main_adapt") or {}).get("metric", "diag_e"))
    if metric == "diag_e" or (np.all(placed) and typical):
        return metric, warmup, None
    warmup = max(warmup, int(pcfg.get("main_warmup_unmatched", 300)))
    why = [] if typical else ["the map's draws are not typical of this posterior"]
    if not np.all(placed):
        why.append(f"{int(np.sum(~np.asarray(placed)))} coordinates new since the earlier posterior")
    return "diag_e", warmup, f"{'; '.join(why)}: diag_e, warmup {warmup}"


def run_fit(
    observations: pd.DataFrame | str | Path,
    out_dir: str | Path,
    config: Mapping[str, Any] | None = None,
    *,
    log: Callable[[str], None] = print,
    engine: str | None = None,
    warm_from: str | Path | None = None,
) -> dict:
    """Build data, fit, write outputs; returns the summary dict. `warm_from`: an earlier fit folder whose
    posterior preconditions and initialises this fit (see `sample_posterior`)."""
    t0 = time.perf_counter()
    cfg = dict(config) if config is not None else load_model_config()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    obs = observations if isinstance(observations, pd.DataFrame) else read_table(observations)
    si = build_stan_data(obs, cfg)
    resolve_reference_states(si, cfg)  # a missing display reference fails now, not after sampling
    d = si.data
    log(f"data: {d['N']} observations, {d['M']} models ({d['M_ref']} with a default state), "
        f"{d['S']} states, {d['J']} families")
    obs.to_csv(out / "modeled_observations.csv", index=False)
    (out / "model_config.json").write_text(json.dumps(cfg, indent=1, default=_json_default))
    si.states.to_csv(out / "index_states.csv", index=False)
    si.models.to_csv(out / "index_models.csv", index=False)
    si.families.to_csv(out / "index_families.csv", index=False)
    si.observations.drop(columns=[c for c in ("released_on",) if c in si.observations]).to_csv(
        out / "index_observations.csv", index=False)

    smp = cfg["sampler"]
    res, precondition_info = sample_posterior(si, cfg, log=log, engine=engine, warm_from=warm_from)
    idata = res.idata
    t_nc = time.perf_counter()
    if smp.get("observation_draws", True) and not d.get("emit_obs"):
        add_observation_draws(idata, si, seed=int(smp["seed"]))
        log(f"per-observation draws computed ({time.perf_counter() - t_nc:.1f}s)")
    idata.to_netcdf(str(out / "posterior.nc"))
    log(f"posterior written ({time.perf_counter() - t_nc:.1f}s)")

    diag = fit_diagnostics(idata, cfg.get("diagnostics"), max_treedepth=int(smp["max_treedepth"]))
    diag.update(
        engine=res.engine,
        compile_seconds=res.compile_seconds,
        compiled_from_cache=res.compiled_from_cache,
        sample_seconds=res.sample_seconds,
        n_gradient_evals=res.n_gradient_evals,
        stan_sha256=res.stan_sha256,
        settings=res.settings,
        sampler_messages=res.messages[:20],
        precondition=precondition_info,
    )
    scale = make_display_scale(idata, si, cfg)
    tables = {
        "state_scores": state_scores(idata, si, cfg, scale),
        "model_scores": model_scores(idata, si, cfg, scale),
        "reasoning_effects": reasoning_effects(idata, si, cfg, scale),
        "family_parameters": family_parameters(idata, si, cfg, scale),
    }
    for name, df in tables.items():
        write_table(df, out / name)
    ref_lab = si.states.set_index("state_pos")
    diag["display_reference"] = {
        "low": {"model": ref_lab.loc[scale.lo_state, "model"], "reasoning_state": ref_lab.loc[scale.lo_state, "reasoning_state"], "value": scale.lo_value},
        "high": {"model": ref_lab.loc[scale.hi_state, "model"], "reasoning_state": ref_lab.loc[scale.hi_state, "reasoning_state"], "value": scale.hi_value},
    }
    diag["wall_seconds"] = time.perf_counter() - t0
    (out / "diagnostics.json").write_text(json.dumps(diag, indent=2, default=_json_default))
    ms = tables["model_scores"]
    summary = {
        "passes": diag["passes"],
        "max_rhat": diag["max_rhat"],
        "min_ess_bulk": diag["min_ess_bulk"],
        "min_ess_tail": diag["min_ess_tail"],
        "divergences": diag["divergences"],
        "min_ebfmi": diag["min_ebfmi"],
        "engine": res.engine,
        "sample_seconds": round(res.sample_seconds, 1),
        "wall_seconds": round(diag["wall_seconds"], 1),
        "n_observations": d["N"],
        "n_models": d["M"],
        "n_states": d["S"],
        "n_families": d["J"],
        "top_model": str(ms.iloc[0]["model"]) if len(ms) else None,
        "stan_sha256": res.stan_sha256,
        "out_dir": str(out),
    }
    (out / "fit_summary.json").write_text(json.dumps(summary, indent=2, default=_json_default))
    log(f"fit {'passes' if diag['passes'] else 'FAILS'} diagnostics: {format_summary(diag)}")
    return summary


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def _parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--observations", required=True, help="modeled_observations as parquet or csv")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--config", default=None, help="model.yaml (default: the packaged one)")
    p.add_argument("--engine", default=None, choices=["auto", "pystan", "cmdstanpy"])
    p.add_argument("--chains", type=int)
    p.add_argument("--warmup", type=int)
    p.add_argument("--draws", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--require-pass", action="store_true", help="exit 3 when diagnostics fail")
    p.add_argument("--warm-from", default=None, help="an earlier fit folder: precondition and initialise from it")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = _parse(argv)
    overrides: dict = {"sampler": {}}
    for k in ("chains", "warmup", "draws", "seed"):
        if getattr(args, k) is not None:
            overrides["sampler"][k] = getattr(args, k)
    cfg = load_model_config(args.config, overrides)

    from dagster_pipes import PipesEnvVarParamsLoader, open_dagster_pipes

    under_pipes = PipesEnvVarParamsLoader().is_dagster_pipes_process()
    code = 0
    if under_pipes:
        with open_dagster_pipes() as pipes:
            try:
                summary = run_fit(args.observations, args.out, cfg, log=pipes.log.info, engine=args.engine,
                                  warm_from=args.warm_from)
                try:
                    pipes.report_asset_materialization(metadata=_pipes_metadata(summary))
                except Exception as exc:  # no asset in scope (e.g. launched from an op)
                    pipes.log.warning(f"could not report materialization: {exc}")
                if args.require_pass and not summary["passes"]:
                    code = 3
            finally:
                shutdown_pystan_workers()
    else:
        # only this logger: the root level would also print aiohttp's access log
        logger = logging.getLogger("atlas.fit")
        logger.setLevel(logging.INFO)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
        try:
            summary = run_fit(args.observations, args.out, cfg, log=logger.info, engine=args.engine, warm_from=args.warm_from)
            if args.require_pass and not summary["passes"]:
                code = 3
        finally:
            shutdown_pystan_workers()
    return code


def _pipes_metadata(summary: dict) -> dict:
    md = {}
    for k, v in summary.items():
        if v is None:
            continue
        if isinstance(v, bool):
            md[k] = {"raw_value": v, "type": "bool"}
        elif isinstance(v, int):
            md[k] = {"raw_value": v, "type": "int"}
        elif isinstance(v, float):
            md[k] = {"raw_value": v, "type": "float"}
        elif k == "out_dir":
            md[k] = {"raw_value": v, "type": "path"}
        else:
            md[k] = {"raw_value": str(v), "type": "text"}
    return md


if __name__ == "__main__":
    sys.exit(main())
