"""Capability model core: Stan data, engines, simulation, diagnostics, scores.

Public API (pure inputs/outputs, paths as arguments; see each module):

    load_model_config(path=None, overrides=None) -> dict
    build_stan_data(observations_df, config) -> StanInput
    fit_model(stan_file, data, *, chains, warmup, draws, seed, engine, init,
              adapt_delta, max_treedepth, log, coords, dims, save_warmup) -> FitResult
    fit_diagnostics(idata, thresholds, max_treedepth=None) -> dict
    state_scores / model_scores / reasoning_effects / family_parameters
        (idata, stan_input, config, scale=None) -> DataFrame
    simulate_panel(n_models, n_families, target_obs, seed, config) -> (df, SimulationTruth)
    run_fit(observations, out_dir, config, log=print, engine=None) -> dict
        (in-process; `python -m atlas_assets.model.fit_process` runs it in its own process)
"""

from atlas_assets.model.diagnostics import fit_diagnostics
from atlas_assets.model.engines import FitResult, fit_model, select_engine, shutdown_pystan_workers
from atlas_assets.model.scores import (
    family_parameters,
    make_display_scale,
    model_scores,
    reasoning_effects,
    state_scores,
)
from atlas_assets.model.simulate import SimulationTruth, simulate_panel
from atlas_assets.model.stan_data import StanInput, build_stan_data, load_model_config, stan_file

__all__ = [
    "FitResult",
    "SimulationTruth",
    "StanInput",
    "build_stan_data",
    "family_parameters",
    "fit_diagnostics",
    "fit_model",
    "load_model_config",
    "make_display_scale",
    "model_scores",
    "reasoning_effects",
    "select_engine",
    "shutdown_pystan_workers",
    "simulate_panel",
    "stan_file",
    "state_scores",
]
