"""The affine preconditioner: its coordinates are the program's own, carried by name, and it leaves the posterior unchanged."""

import copy

import numpy as np
import pytest

from atlas_assets.model import precondition
from atlas_assets.model.simulate import simulate_panel, simulated_references
from atlas_assets.model.stan_data import build_stan_data, load_model_config


def helmert_sum_zero(w_scaled: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The Stan program's function, written out again from its definition (column k of the basis holds
    1/sqrt(k(k+1)) in rows 1..k and -k/sqrt(k(k+1)) in row k+1)."""
    n = len(w_scaled) + 1
    basis = np.zeros((n, n - 1))
    for col, kk in enumerate(k.astype(int)):
        basis[:kk, col] = 1 / np.sqrt(kk * (kk + 1))
        basis[kk, col] = -kk / np.sqrt(kk * (kk + 1))
    return basis @ (w_scaled * np.sqrt(k * (k + 1)))


def test_helmert_coordinates_invert_the_programs_map():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 9))
    x -= x.mean(axis=1, keepdims=True)
    w = precondition.helmert_coordinates(x)
    k = np.arange(1, 9, dtype=float)
    for row in range(3):
        assert np.allclose(helmert_sum_zero(w[row] / np.sqrt(k * (k + 1)), k), x[row])
        assert np.isclose(np.linalg.norm(w[row]), np.linalg.norm(x[row]))


@pytest.fixture(scope="module")
def small_fit():
    from atlas_assets.model.fit_process import sample_posterior

    config = load_model_config()
    observations, truth = simulate_panel(n_models=30, n_families=7, target_obs=220, seed=4, config=config)
    config["display"]["reference"] = simulated_references(observations, truth)
    config["sampler"].update(chains=2, warmup=300, draws=300, engine="pystan")
    # the plain program (no preconditioner): the reference the preconditioned fit is compared with below. Under the
    # packaged `precondition.mode: pilot` this fit was itself a pilot + preconditioned fit (~200k leapfrog steps
    # against ~110k), and the comparison one preconditioned fit against another
    config["sampler"]["precondition"]["mode"] = "none"
    stan_input = build_stan_data(observations, config)
    result, _ = sample_posterior(stan_input, config, log=lambda m: None)
    return config, stan_input, result


@pytest.mark.slow
def test_transported_draws_are_the_programs_own_coordinates(small_fit):
    config, stan_input, result = small_fit
    post = result.idata.posterior
    draws, matched, _ = precondition.transported_draws(post, stan_input, stan_input)
    assert matched.all()
    sizes = precondition.block_sizes(stan_input.data)
    at = 0
    for name in precondition.BLOCKS:
        own = post[name].values.reshape(-1, sizes[name]) if sizes[name] > 1 or post[name].ndim > 2 else \
            post[name].values.reshape(-1, 1)
        block = draws[:, at:at + sizes[name]]
        at += sizes[name]
        if name == "theta_ref_raw":  # only the direction reaches the likelihood; transported draws sit at radius sqrt(n)
            own = own / np.linalg.norm(own, axis=1, keepdims=True)
            block = block / np.linalg.norm(block, axis=1, keepdims=True)
        assert np.allclose(block, own[:len(block)], atol=1e-6), name


@pytest.mark.slow
def test_a_preconditioned_fit_samples_the_same_posterior(small_fit):
    from atlas_assets.model.fit_process import sample_posterior

    config, stan_input, plain = small_fit
    warm = copy.deepcopy(config)
    warm["sampler"]["precondition"] = dict(mode="pilot", pilot_chains=2, pilot_warmup=150, pilot_draws=150,
                                           main_warmup=150, shrinkage=0.1)
    result, info = sample_posterior(stan_input, warm, log=lambda m: None)
    assert info["mode"] == "pilot" and info["matched"] == info["P"]
    for name in ("theta", "b"):
        a = plain.idata.posterior[name].values.reshape(-1, plain.idata.posterior[name].shape[-1])
        b = result.idata.posterior[name].values.reshape(-1, result.idata.posterior[name].shape[-1])
        # difference of posterior means within ~4 Monte Carlo standard errors (ESS >= 150 per fit here)
        z = np.abs(a.mean(0) - b.mean(0)) / np.sqrt(a.var(0) / 150 + b.var(0) / 150)
        assert np.quantile(z, 0.95) < 3 and z.max() < 5, (name, np.sort(z)[-5:])
        assert np.allclose(a.std(0), b.std(0), rtol=0.35), name


@pytest.mark.slow
def test_a_preconditioned_fit_runs_when_the_trailing_blocks_are_empty():
    # a validation fold without off-ladder states (no deviations, D = 0) and without per-model ladder terms
    # (A = 0): the stacked vector ends before those blocks, and the program must not slice past its end
    from atlas_assets.model.fit_process import sample_posterior

    config = load_model_config()
    observations, truth = simulate_panel(n_models=30, n_families=7, target_obs=220, seed=4, config=config)
    config["display"]["reference"] = simulated_references(observations, truth)
    refs = {(r["model"], r["reasoning_state"]) for r in config["display"]["reference"].values()}
    pinned = build_stan_data(observations, config).states.query("pinned")
    keep = {(m, r) for m, r in zip(pinned["model"], pinned["reasoning_state"])} | refs
    one_state = observations[[(m, r) in keep for m, r in zip(observations["model"], observations["reasoning_state"])]]
    stan_input = build_stan_data(one_state, config)
    sizes = precondition.block_sizes(stan_input.data)
    assert sizes["dev_z"] == 0 and sizes["amp_z"] == 0
    config["sampler"].update(chains=2, draws=60)
    config["sampler"]["precondition"] = dict(mode="pilot", pilot_chains=2, pilot_warmup=60, pilot_draws=60,
                                             main_warmup=60, shrinkage=0.2)
    result, info = sample_posterior(stan_input, config, log=lambda m: None)
    assert info["mode"] == "pilot" and result.idata.posterior.sizes["draw"] == 60
