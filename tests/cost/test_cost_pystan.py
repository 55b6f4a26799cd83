"""The cost fit under PyStan, chosen the way production chooses it (env ATLAS_STAN_ENGINE=pystan through
atlas_assets.model.engines.fit_model): the whole run_cost_fit path on a tiny simulated panel writes a fit folder
that load_cost_fit reads back, with the reference state at exactly 0 and the published log spreads summing to 0;
and, where CmdStan is set up, CmdStanPy with the same seed gives the same draws (same Stan, same seed)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from atlas_assets.cost.config import load_cost_config
from atlas_assets.cost.fit import load_cost_fit, run_cost_fit
from atlas_assets.model.engines import cmdstan_available, shutdown_pystan_workers
from atlas_assets.model.scores import draws_of
from tests.cost.simulate import REFERENCE, simulate

SAMPLER = {"chains": 2, "warmup": 150, "draws": 100, "seed": 11}


@pytest.mark.slow
def test_cost_fit_runs_under_pystan_behind_the_engine_interface(tmp_path, monkeypatch):
    observations = simulate(n_models=12, seed=5).observations
    cfg = load_cost_config(overrides={"reference": {"model": REFERENCE[0], "reasoning_state": REFERENCE[1]},
                                      "sampler": SAMPLER})
    monkeypatch.setenv("ATLAS_STAN_ENGINE", "pystan")
    lines: list[str] = []
    try:
        summary = run_cost_fit(observations, tmp_path / "pystan", cfg, log=lines.append)
    finally:
        shutdown_pystan_workers()
    assert summary["engine"] == "pystan"
    assert any(line.startswith("chain 1: iteration") for line in lines)
    diagnostics = json.loads((tmp_path / "pystan" / "diagnostics.json").read_text())
    assert diagnostics["engine"] == "pystan" and set(diagnostics["checks"]) >= {"rhat", "ess_bulk", "divergences"}
    loaded = load_cost_fit(tmp_path / "pystan")
    cost = draws_of(loaded.idata, "state_cost")
    assert cost.shape == (SAMPLER["chains"] * SAMPLER["draws"], loaded.cost_input.data["S"])
    assert np.all(cost[:, loaded.cost_input.data["ref_state"] - 1] == 0.0)
    assert np.allclose(draws_of(loaded.idata, "log_lambda").sum(axis=1), 0.0, atol=1e-9)
    assert list(loaded.idata.posterior["state_cost"].coords["state"].values) == loaded.cost_input.coords()["state"]

    if not cmdstan_available():
        return
    monkeypatch.setenv("ATLAS_STAN_ENGINE", "cmdstanpy")
    other = run_cost_fit(observations, tmp_path / "cmdstan", cfg, log=lambda m: None)
    assert other["engine"] == "cmdstanpy"
    np.testing.assert_allclose(draws_of(load_cost_fit(tmp_path / "cmdstan").idata, "state_cost"), cost,
                               rtol=1e-6, atol=1e-9)
