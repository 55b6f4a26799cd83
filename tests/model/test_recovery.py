"""Fit a small simulated panel and check that the truth is recovered.

~1-3 minutes on 2 cores (compiled model cached by httpstan after the first
build, which takes ~2 minutes cold).
"""

import numpy as np
import pytest
from scipy.stats import binom

from atlas_assets.model.diagnostics import fit_diagnostics
from atlas_assets.model.engines import fit_model, shutdown_pystan_workers
from atlas_assets.model.simulate import SMALL_SIZE, simulate_panel
from atlas_assets.model.stan_data import build_stan_data, load_model_config, stan_file, state_labels

LEVEL = 0.90


def _interval_hits(draws: np.ndarray, truth: np.ndarray) -> np.ndarray:
    lo, hi = np.quantile(draws, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
    return (truth >= lo) & (truth <= hi)


def _binomial_ok(hits: np.ndarray, alpha: float = 0.002) -> bool:
    """Two-sided: the hit count is inside the central 1 - alpha band of
    Binomial(n, 0.9)."""
    n, k = hits.size, int(hits.sum())
    lo, hi = binom.ppf(alpha / 2, n, LEVEL), binom.ppf(1 - alpha / 2, n, LEVEL)
    return lo <= k <= hi


@pytest.mark.slow
def test_recovery_small_panel():
    cfg = load_model_config(overrides={"sampler": {"emit_observation_draws": False}})
    df, truth = simulate_panel(seed=7, config=cfg, **SMALL_SIZE)
    si = build_stan_data(df, cfg)
    try:
        res = fit_model(stan_file(cfg), si.data, chains=4, warmup=500, draws=500, seed=11,
                        engine="pystan", init=0.5, coords=si.coords(), dims=si.dims())
    finally:
        shutdown_pystan_workers()
    post = res.idata.posterior
    diag = fit_diagnostics(res.idata, cfg["diagnostics"])
    assert diag["divergences"] == 0, diag
    assert diag["max_rhat"] < 1.02, diag["worst_rhat"]

    def flat(name):
        v = post[name].values
        return v.reshape((-1,) + v.shape[2:])

    phi_true = truth.phi[state_labels(si.states)].to_numpy()
    phi = flat("phi")
    assert np.corrcoef(phi.mean(0), phi_true)[0, 1] > 0.95

    theta_true = truth.theta[si.models.model].to_numpy()
    fam = si.families.family.tolist()
    hits = {
        "phi": _interval_hits(phi, phi_true),
        "theta": _interval_hits(flat("theta"), theta_true),
        "b": _interval_hits(flat("b"), truth.b[fam].to_numpy()),
        "beta": _interval_hits(flat("beta"), truth.beta[fam].to_numpy()),
    }
    report = {k: (round(float(v.mean()), 3), v.size) for k, v in hits.items()}
    print("90% coverage:", report)
    # capability: consistent with 90% within a binomial tolerance
    assert _binomial_ok(hits["phi"]), report
    assert _binomial_ok(hits["theta"]), report
    # family parameters (few of them): pooled check
    assert _binomial_ok(np.concatenate([hits["b"], hits["beta"]])), report


@pytest.mark.slow
def test_numpy_observation_pass_matches_stan_generated_quantities():
    """scores.observation_draws reproduces the program's generated quantities."""
    from atlas_assets.model.scores import observation_draws

    cfg = load_model_config(overrides={"sampler": {"emit_observation_draws": True}})
    df, _ = simulate_panel(n_models=30, n_families=8, target_obs=220, seed=21, config=cfg)
    si = build_stan_data(df, cfg)
    assert si.data["emit_obs"] == 1
    assert {"bb", "bbz", "beta", "zero", "rating"} <= set(si.observations.piece)
    try:
        res = fit_model(stan_file(cfg), si.data, chains=2, warmup=150, draws=60, seed=3, engine="pystan")
    finally:
        shutdown_pystan_workers()
    post = res.idata.posterior
    mine = observation_draws(res.idata, si, seed=1)
    np.testing.assert_allclose(mine["log_lik"], post["log_lik"].values, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mine["mu_obs"], post["mu_obs"].values, rtol=1e-5, atol=1e-7)
    # predictive draws: same support and similar location
    assert mine["u_rep"].shape == post["u_rep"].values.shape
    assert abs(mine["u_rep"].mean() - post["u_rep"].values.mean()) < 0.05
