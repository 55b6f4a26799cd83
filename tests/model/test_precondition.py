"""The affine preconditioner: its coordinates are the program's own, carried by name, and it leaves the posterior unchanged."""

import copy

import numpy as np
import pandas as pd
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


def small_panel() -> tuple[dict, pd.DataFrame]:
    """The packaged model config and a small simulated panel (30 models, 7 families, ~220 observations) whose display
    references the config names."""
    config = load_model_config()
    observations, truth = simulate_panel(n_models=30, n_families=7, target_obs=220, seed=4, config=config)
    config["display"]["reference"] = simulated_references(observations, truth)
    return config, observations


def small_cmdstan_input(needs: str) -> tuple[dict, object]:
    """small_panel() as Stan input, for a test that needs CmdStan (`needs` says for what: skipped without it)."""
    from atlas_assets.model.engines import cmdstan_available

    if not cmdstan_available():
        pytest.skip(f"no CmdStan: {needs}")
    config, observations = small_panel()
    return config, build_stan_data(observations, config)


@pytest.fixture(scope="module")
def small_fit():
    from atlas_assets.model.fit_process import sample_posterior

    config, observations = small_panel()
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
    draws, matched = precondition.transported_draws(post, stan_input, stan_input)
    assert matched.all()
    sizes = precondition.block_sizes(stan_input.data)
    at = 0
    for name in precondition.BLOCKS:
        if name == "log_scale":  # the program's SCALE_ORDER, on the log scale
            parts = [post[p].values.reshape(-1, 1) for p in precondition.SCALARS]
            parts += [post[p].values.reshape(len(parts[0]), -1) for p in ("offdev_sd", "rating_sd") if p in post]
            own = precondition.scale_coordinate(np.concatenate(parts, axis=1),
                                                bool(stan_input.data["scale_softplus"]))
        else:
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

    # The production route as PyStan (the fallback engine) runs it: the packaged pilot and map, and in place of the
    # identity metric and the gradient-based stiffness correction (CmdStan's) a diagonal metric adapted in one long
    # window. (A shorter route, a 2 x (150 + 150) pilot and Stan's default windows in a 150-iteration main warmup,
    # left one chain stuck at shared_sd ~ 5e-4 on this panel, where the centred shared effects make a funnel: 300
    # divergences. Scales sampled inside the map need the main warmup the production route gives them.)
    config, stan_input, plain = small_fit
    routed = copy.deepcopy(config)
    routed["sampler"]["precondition"] = load_model_config()["sampler"]["precondition"]
    logged = []
    result, info = sample_posterior(stan_input, routed, log=logged.append)
    assert info["mode"] == "pilot" and info["matched"] == info["P"]
    assert result.engine == "pystan" and any("unit_e requested, diag_e used" in m for m in logged)
    for name in ("theta", "b"):
        a = plain.idata.posterior[name].values.reshape(-1, plain.idata.posterior[name].shape[-1])
        b = result.idata.posterior[name].values.reshape(-1, result.idata.posterior[name].shape[-1])
        # difference of posterior means within ~4 Monte Carlo standard errors (ESS >= 150 per fit here)
        z = np.abs(a.mean(0) - b.mean(0)) / np.sqrt(a.var(0) / 150 + b.var(0) / 150)
        assert np.quantile(z, 0.95) < 3 and z.max() < 5, (name, np.sort(z)[-5:])
        assert np.allclose(a.std(0), b.std(0), rtol=0.35), name


@pytest.mark.slow
@pytest.mark.cmdstan
def test_the_production_route_samples_the_same_posterior():
    # the production main fit as configured (softplus scales inside the block, identity metric adapting the step
    # size only, the stiffness correction from gradients) against a plain fit of the same program: same posterior
    from atlas_assets.model.fit_process import sample_posterior

    config, stan_input = small_cmdstan_input("the unit metric and the log_prob gradients are CmdStan's")
    plain_cfg = copy.deepcopy(config)
    plain_cfg["sampler"].update(chains=2, warmup=300, draws=400, engine="cmdstanpy")
    plain_cfg["sampler"]["precondition"] = {"mode": "none"}
    plain, _ = sample_posterior(stan_input, plain_cfg, log=lambda m: None)
    routed_cfg = copy.deepcopy(config)
    routed_cfg["sampler"].update(chains=2, draws=400, engine="cmdstanpy")
    routed, info = sample_posterior(stan_input, routed_cfg, log=lambda m: None)
    assert info["mode"] == "pilot" and info["stiffness"]["gradient_draws"] > 0
    assert routed.settings["metric"] == "unit_e"
    assert stan_input.data["scale_softplus"] == 1
    for name in ("theta", "b", "beta"):
        a = plain.idata.posterior[name].values.reshape(-1, plain.idata.posterior[name].shape[-1])
        b = routed.idata.posterior[name].values.reshape(-1, routed.idata.posterior[name].shape[-1])
        z = np.abs(a.mean(0) - b.mean(0)) / np.sqrt(a.var(0) / 150 + b.var(0) / 150)
        assert np.quantile(z, 0.95) < 3 and z.max() < 5, (name, np.sort(z)[-5:])
        assert np.allclose(a.std(0), b.std(0), rtol=0.35), name
    for name in ("hurdle_b", "amp_sd", "lambda_sd"):  # the scales now sampled through softplus
        a, b = plain.idata.posterior[name].values.ravel(), routed.idata.posterior[name].values.ravel()
        assert abs(np.median(a) - np.median(b)) < 0.35 * a.std() + 0.02, name


@pytest.mark.slow
def test_a_preconditioned_fit_runs_when_the_trailing_blocks_are_empty():
    # a validation fold without off-ladder states (no deviations, D = 0) and without per-model ladder terms
    # (A = 0): the stacked vector ends before those blocks, and the program must not slice past its end
    from atlas_assets.model.fit_process import sample_posterior

    config, observations = small_panel()
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


def identity_map(P: int, form: str, draws: np.ndarray) -> precondition.Preconditioner:
    """The identity map x = z in either of the program's forms."""
    if form == "dense":
        return precondition.Preconditioner(loc=np.zeros(P), chol=np.eye(P), matched=np.ones(P, bool), draws=draws)
    return precondition.Preconditioner(loc=np.zeros(P), matched=np.ones(P, bool), draws=draws, scale=np.ones(P),
                                       left=np.zeros((P, 0)), right=np.zeros((P, 0)))


@pytest.mark.parametrize("form", ["dense", "low_rank"])
def test_stiffness_correction_shrinks_only_the_stiff_direction(form):
    # draws whitened exactly, but the log density is 16 times stiffer than their covariance says along one
    # direction v: gradients -(I + 15 v v') z, so E[g g'] has eigenvalue 256 along v and 1 elsewhere
    rng = np.random.default_rng(3)
    P, n = 30, 3000
    v = rng.standard_normal(P)
    v /= np.linalg.norm(v)
    z = rng.standard_normal((n, P))
    gradients = -(z + 15 * np.outer(z @ v, v))
    pc = identity_map(P, form, z[:5])
    corrected, info = precondition.stiffness_correction(pc, gradients, max_shrink=10, clip_quantile=1.0)
    assert info["directions_shrunk"] == 1 and corrected.dense == (form == "dense")
    # along v the map is scaled by 256^(-1/4) = 1/4 (the geometric mean of the draws' scale and the gradients')
    assert np.allclose(corrected.matrix() @ v, 0.25 * v, atol=0.02)
    u = rng.standard_normal(P)
    u -= (u @ v) * v
    assert np.allclose(corrected.matrix() @ u, u, atol=0.02 * np.linalg.norm(u))
    # never by more than 1 / max_shrink
    capped, _ = precondition.stiffness_correction(pc, gradients, max_shrink=2, clip_quantile=1.0)
    assert np.allclose(capped.matrix() @ v, 0.5 * v, atol=0.02)
    # a sample of plain Gaussian gradients has no eigenvalue above its noise edge: nothing changes
    same, info = precondition.stiffness_correction(pc, -z)
    assert info["directions_shrunk"] == 0 and np.allclose(same.matrix(), np.eye(P))


def test_the_low_rank_map_composes_and_inverts_as_its_dense_matrix():
    # x = loc + diag(s) (I + L R') z, then scaled along orthonormal V by factors f: A (I + V (f - 1) V')
    rng = np.random.default_rng(6)
    P, K = 60, 4
    pc = precondition.Preconditioner(loc=rng.standard_normal(P), matched=np.ones(P, bool), draws=np.zeros((2, P)),
                                     scale=rng.uniform(0.2, 3, P), left=0.5 * rng.standard_normal((P, K)),
                                     right=np.linalg.qr(rng.standard_normal((P, K)))[0])
    dense_a = np.diag(pc.scale) @ (np.eye(P) + pc.left @ pc.right.T)
    z = rng.standard_normal((3, P))
    assert np.allclose(pc.x(z), pc.loc + z @ dense_a.T)
    assert np.allclose(pc.z(pc.x(z)), z)
    v = np.linalg.qr(rng.standard_normal((P, 2)))[0]
    scaled = pc.scaled_along(v, np.array([0.5, 1.7]))
    assert scaled.rank == K + 2
    assert np.allclose(scaled.matrix(), dense_a @ (np.eye(P) + (v * np.array([-0.5, 0.7])) @ v.T))
    assert np.allclose(scaled.z(scaled.x(z)), z)
    # the data the program reads: the same map, with the dense matrix empty
    data = scaled.data()
    assert data["P_dense"] == 0 and data["K_pc"] == K + 2 and np.shape(data["pc_right_t"]) == (K + 2, P)
    assert np.allclose(np.asarray(data["pc_left"]) @ np.asarray(data["pc_right_t"]), scaled.left @ scaled.right.T)


def random_low_rank_map(stan_input, seed: int = 8):
    """A low-rank map of random scales and directions around a plausible centre, and four points z through it."""
    P = sum(precondition.block_sizes(stan_input.data).values())
    rng = np.random.default_rng(seed)
    loc = 0.3 * rng.standard_normal(P)
    n_ref = stan_input.data["M_ref"] - 1
    loc[:n_ref] += 1.0        # capability direction at a radius the radial prior allows
    low_rank = precondition.Preconditioner(
        loc=loc, matched=np.ones(P, bool), draws=np.zeros((2, P)), scale=rng.uniform(0.05, 0.3, P),
        left=0.3 * rng.standard_normal((P, 3)), right=np.linalg.qr(rng.standard_normal((P, 3)))[0])
    return low_rank, 0.5 * rng.standard_normal((4, P))


@pytest.mark.cmdstan
def test_both_engines_evaluate_the_programs_same_log_density():
    # CmdStan samples in production and PyStan is its fallback: built from the same program (stanc without
    # optimizations in both; --O1 was measured faster but broke the engines' bit-identical draws, docs/model.md,
    # stop 24), they must evaluate the same log density and gradient at the same points
    from atlas_assets.model.engines import log_density_gradients, shutdown_pystan_workers
    from atlas_assets.model.stan_data import stan_file

    config, stan_input = small_cmdstan_input("the comparison needs CmdStan's build")
    low_rank, z = random_low_rank_map(stan_input, seed=11)
    data = {**stan_input.data, **low_rank.data()}
    lp_cmdstan, grad_cmdstan = log_density_gradients(stan_file(config), data, z, engine="cmdstanpy")
    try:
        lp_ref, grad_ref = log_density_gradients(stan_file(config), data, z, engine="pystan")
    finally:
        shutdown_pystan_workers()
    assert np.all(np.isfinite(lp_cmdstan))
    assert np.allclose(lp_cmdstan, lp_ref, rtol=1e-9, atol=1e-7)
    assert np.allclose(grad_cmdstan, grad_ref, rtol=1e-7, atol=1e-6)


@pytest.mark.cmdstan
def test_the_programs_low_rank_map_is_the_dense_map_it_stands_for():
    # the program applies diag(s) (I + L R') z as two thin products: at the same z it must reach the same point x
    # (the same log density) as the dense form given that matrix, and its gradient with respect to z must be the
    # same A' grad_x. A transposed or misplaced factor would still sample the right posterior, only slowly, and
    # the inits (Preconditioner.z) would land elsewhere; this is where such a slip shows.
    from atlas_assets.model.engines import log_density_gradients
    from atlas_assets.model.stan_data import stan_file

    config, stan_input = small_cmdstan_input("log_prob and its gradients are CmdStan's")
    low_rank, z = random_low_rank_map(stan_input)
    dense = precondition.Preconditioner(loc=low_rank.loc, matched=low_rank.matched, draws=low_rank.draws,
                                        chol=low_rank.matrix())
    lp_low, grad_low = log_density_gradients(stan_file(config), {**stan_input.data, **low_rank.data()}, z,
                                             engine="cmdstanpy")
    lp_dense, grad_dense = log_density_gradients(stan_file(config), {**stan_input.data, **dense.data()}, z,
                                                 engine="cmdstanpy")
    assert np.all(np.isfinite(lp_low))
    assert np.allclose(lp_low, lp_dense, rtol=1e-9, atol=1e-7)
    assert np.allclose(grad_low, grad_dense, rtol=1e-7, atol=1e-6)


def test_the_low_rank_map_whitens_the_slow_directions_its_draws_show():
    # draws from a posterior with three directions 40-80 times wider than the rest (in correlation units) and
    # unequal marginal scales; the low-rank map keeps those directions (and a few sample-noise ones above the
    # threshold) and leaves every other direction at its marginal sd
    rng = np.random.default_rng(7)
    P, n = 300, 1000
    spikes = np.linalg.qr(rng.standard_normal((P, 3)))[0]
    sd = rng.uniform(0.05, 2.0, P)
    root = np.eye(P) + spikes @ np.diag(np.sqrt([80.0, 60.0, 40.0]) - 1) @ spikes.T
    cov = np.diag(sd) @ root @ root.T @ np.diag(sd)
    draws = rng.standard_normal((n, P)) @ root.T * sd
    diag_part, rows = precondition.shrunk_covariance_parts(draws, np.ones(P, bool), np.ones(P), np.zeros(P), 0.2)
    sd_hat, left, right = precondition.low_rank_root(diag_part, rows, max_rank=20, min_eigenvalue=2.0)
    assert 3 <= left.shape[1] <= 20
    a = np.diag(sd_hat) @ (np.eye(P) + left @ right.T)
    whitened = np.linalg.solve(a, np.linalg.solve(a, cov).T)
    corr = cov / np.outer(np.sqrt(np.diag(cov)), np.sqrt(np.diag(cov)))
    assert np.linalg.eigvalsh(corr)[-1] > 40
    assert np.linalg.eigvalsh(whitened)[-1] < 2.0
    # a diagonal map alone (the marginal sds) leaves the wide directions wide
    diagonal_only = cov / np.outer(sd_hat, sd_hat)
    assert np.linalg.eigvalsh(diagonal_only)[-1] > 40


def test_stiffness_correction_is_not_led_by_a_few_draws_at_a_wall():
    # 2% of the draws sit at a steep wall with gradients 500 times the typical norm along one coordinate:
    # clipped at the 95th percentile of the norms, they move E[g g'] by little and no direction is squeezed
    rng = np.random.default_rng(4)
    P, n = 30, 3000
    z = rng.standard_normal((n, P))
    gradients = -z.copy()
    gradients[:60, 0] = -500 * np.sqrt(P)
    pc = identity_map(P, "low_rank", z[:5])
    _, unclipped = precondition.stiffness_correction(pc, gradients, clip_quantile=1.0)
    corrected, info = precondition.stiffness_correction(pc, gradients, clip_quantile=0.95)
    assert unclipped["largest_stiffness"] > 1e5
    assert info["largest_stiffness"] < unclipped["largest_stiffness"] / 1000
    assert corrected.matrix()[0, 0] >= 0.5


def test_a_chain_still_climbing_is_told_from_chains_in_the_typical_set():
    # four chains of 100 draws: at a posterior's draws the gradients of a standard normal are -z, averaging to ~0
    # per chain; chain 2 still climbs (every draw offset along one direction), so its gradients share a mean
    rng = np.random.default_rng(5)
    P, per = 300, 100
    z = rng.standard_normal((4 * per, P))
    chain_of_row = np.repeat(np.arange(4), per)
    direction = rng.standard_normal(P)
    direction *= 8.0 / np.linalg.norm(direction)
    z[chain_of_row == 2] += direction
    assert precondition.lagging_chains(-z, chain_of_row, 0.1) == [2]
    assert precondition.lagging_chains(-z[chain_of_row != 2], chain_of_row[chain_of_row != 2], 0.1) == []
    # pooled over the four chains the lag is diluted under the map-wide typicality test's 5%: hence a per-chain one
    pooled = -z
    assert np.sum(pooled.mean(axis=0) ** 2) / np.mean(np.sum(pooled ** 2, axis=1)) < 0.05


def test_draw_chains_name_the_chain_of_each_transported_draw():
    import xarray as xr

    phi = np.arange(4 * 50, dtype=float).reshape(4, 50)[:, :, None] * np.ones((1, 1, 3))   # value = pooled index
    posterior = xr.Dataset({"phi": (("chain", "draw", "state"), phi)})
    assert np.array_equal(precondition.draw_chains(posterior, 1000), np.repeat(np.arange(4), 50))
    take = np.linspace(0, 199, 40).round().astype(int)            # transported_draws' choice of 40 of 200
    assert np.array_equal(precondition.draw_chains(posterior, 40), take // 50)


@pytest.mark.slow
@pytest.mark.cmdstan
def test_a_lagging_pilot_chain_is_left_out_of_the_map(small_fit):
    # the small fit's draws as four pilot chains, the first of them still climbing (its hurdle intercept ten
    # posterior sds off): the screen must leave that chain out, so that neither the map's scales nor the main
    # fit's inits come from it; without the screen the lag stretches the map along it
    import xarray as xr

    from atlas_assets.model import fit_process
    from atlas_assets.model.engines import cmdstan_available

    if not cmdstan_available():
        pytest.skip("no CmdStan: the screen's gradients are CmdStan's")
    config, stan_input, result = small_fit
    posterior = result.idata.posterior
    half = posterior.sizes["draw"] // 2
    four = xr.concat([posterior.isel(chain=[c], draw=slice(h * half, (h + 1) * half))
                      .assign_coords(chain=[2 * c + h], draw=np.arange(half)) for c in range(2) for h in range(2)],
                     dim="chain")
    offset = 10 * float(four["hurdle_a"].std())
    climbing = four.copy(deep=True)
    climbing["hurdle_a"][0] = climbing["hurdle_a"][0] + offset
    config = copy.deepcopy(config)
    config["sampler"]["engine"] = "cmdstanpy"
    pcfg = config["sampler"]["precondition"]
    sizes = precondition.block_sizes(stan_input.data)
    at = sum(sizes[name] for name in precondition.BLOCKS[:precondition.BLOCKS.index("hurdle_a")])

    def mapped(chain_limit):
        cfg = copy.deepcopy(pcfg)
        cfg["stiffness"] = {**cfg["stiffness"], "chain_max_mean_share": chain_limit}
        return fit_process._map_from(climbing, stan_input, "pilot fit", stan_input, config, cfg,
                                     {"engine": "cmdstanpy"}, lambda m: None)

    screened, info = mapped(0.1)
    assert info["lagging_chains_dropped"] == [0]
    lowest_lagging = float(climbing["hurdle_a"][0].min())
    assert screened.draws[:, at].max() < lowest_lagging
    started_at = screened.x(np.array([row["pc_z"] for row in screened.inits(4)]))[:, at]
    assert np.all(started_at < lowest_lagging)
    unscreened, info_unscreened = mapped(None)
    assert "lagging_chains_dropped" not in info_unscreened
    sd_of = lambda pc: float(np.sqrt(np.sum(pc.matrix()[at] ** 2)))  # noqa: E731
    assert sd_of(unscreened) > 3 * sd_of(screened)


def test_scale_coordinates_invert_the_programs_links():
    scales = np.array([1e-4, 0.05, 0.3, 1.0, 4.0])
    assert np.allclose(np.log1p(np.exp(precondition.scale_coordinate(scales, softplus=True))), scales, rtol=1e-10)
    assert np.allclose(np.exp(precondition.scale_coordinate(scales, softplus=False)), scales, rtol=1e-12)
    for softplus in (True, False):
        assert np.allclose(precondition.scale_from_coordinate(precondition.scale_coordinate(scales, softplus), softplus),
                           scales, rtol=1e-10)


def test_stiffness_correction_leaves_the_map_alone_when_the_draws_are_off_centre():
    # a model new since the earlier fit sits at a prior-like place in every transported draw: every gradient is
    # large along its coordinate; that is a location error, and no direction may be shrunk for it
    rng = np.random.default_rng(5)
    P, n = 30, 1000
    z = rng.standard_normal((n, P))
    gradients = -z.copy()
    gradients[:, 3] += 200.0
    pc = precondition.Preconditioner(loc=np.zeros(P), chol=np.eye(P), matched=np.ones(P, bool), draws=z[:5])
    same, info = precondition.stiffness_correction(pc, gradients)
    assert info["directions_shrunk"] == 0 and "not typical" in info["skipped"]
    assert same is pc
    # a milder offset, the mean a fifth of the second moment (a 4x simulated panel's pilot stopped there, 19.8%, and
    # its map left the main fit at step size 0.018), is no typical sample either; the sampling noise of a typical one
    # (1/n of the second moment) is
    shifted = -z + np.sqrt(7.5 / P)
    _, info = precondition.stiffness_correction(pc, shifted)
    assert 0.15 < info["mean_share"] < 0.25 and info["typical"] is False
    _, info = precondition.stiffness_correction(pc, -z)
    assert info["typical"] is True and info["mean_share"] < 0.01


def test_the_main_fit_adapts_a_diagonal_when_coordinates_are_new():
    from atlas_assets.model.fit_process import main_metric

    pcfg = {"main_adapt": {"metric": "unit_e"}, "main_warmup_unmatched": 300}
    assert main_metric(pcfg, np.ones(5, bool), 150) == ("unit_e", 150, None)
    metric, warmup, note = main_metric(pcfg, np.array([True, False, True, False, True]), 150)
    assert (metric, warmup) == ("diag_e", 300) and note.startswith("2 coordinates new")
    assert main_metric({"main_adapt": {"metric": "diag_e"}}, np.zeros(5, bool), 150) == ("diag_e", 150, None)


@pytest.mark.cmdstan
def test_a_warm_start_keeps_the_earlier_step_size_only_where_it_suited_the_earlier_posterior():
    import arviz as az

    from atlas_assets.model.engines import cmdstan_available
    from atlas_assets.model.fit_process import kept_step_size

    if not cmdstan_available():
        pytest.skip("the kept step size is a CmdStan route")
    pcfg = {"main_adapt": {"metric": "unit_e", "warm_fixed_step": {"burn_in": 25, "accept_within": 0.1}}}

    def earlier(accepted: float):
        rng = np.random.default_rng(0)
        return az.from_dict(sample_stats={"acceptance_rate": np.clip(accepted + 0.01 * rng.normal(size=(4, 200)), 0, 1),
                                          "step_size": np.full((4, 200), 0.23)})

    def kept(accepted: float) -> float:
        adapt, warmup, note = kept_step_size(pcfg, {"step_size": 0.23}, 150, earlier(accepted), "unit_e",
                                             "cmdstanpy", 0.75)
        assert adapt["engaged"] is False and warmup == 25 and "0.23 x" in note
        return adapt["step_size"]

    # draws that accepted at the target keep the step; above it, the step grows, below it, it shrinks; at the high
    # dimension's scaling law, acceptance 2 Phi(-c eps^2), accepting 0.80 at 0.23 meets 0.75 at 0.23 x 1.12
    assert kept(0.75) == pytest.approx(0.23, abs=2e-3)
    assert kept(0.80) == pytest.approx(0.23 * 1.12, abs=3e-3)
    assert kept(0.70) < 0.23 * 0.93
    assert kept(0.84) <= 0.23 * 1.25 + 1e-6        # at most max_factor (1.25 by default) either way
    # draws that accepted far from the target: that step size suited the earlier posterior badly, so it is adapted
    for accepted in (0.60, 0.92):
        assert kept_step_size(pcfg, {"step_size": 0.23}, 150, earlier(accepted), "unit_e", "cmdstanpy", 0.75) == (
            {"step_size": 0.23}, 150, None)
    # a diagonal metric (new coordinates) adapts, and so does a config without the setting
    assert kept_step_size(pcfg, {"step_size": 0.23}, 300, earlier(0.8), "diag_e", "cmdstanpy", 0.75)[2] is None
    assert kept_step_size({"main_adapt": {"metric": "unit_e"}}, {"step_size": 0.23}, 150, earlier(0.8), "unit_e",
                          "cmdstanpy", 0.75)[2] is None


def test_the_pilot_warms_up_longer_on_a_larger_program():
    from atlas_assets.model.fit_process import pilot_warmup

    pcfg = load_model_config()["sampler"]["precondition"]
    # the real panel's program (574 coordinates) keeps the pilot its settings were measured with ...
    assert pilot_warmup(pcfg, 574) == pcfg["pilot_warmup"] == 100
    # ... and the simulated panels twice and four times its size get about the 200 and 400 that reached the
    # typical set in one round there (docs/model.md, stop 25)
    assert 180 <= pilot_warmup(pcfg, 1143) <= 220 and 360 <= pilot_warmup(pcfg, 2343) <= 440
    # a short pilot configured for a small program stays short on it (a test's 20 iterations), and grows in proportion
    assert pilot_warmup({**pcfg, "pilot_warmup": 20}, 150) == 20
    assert pilot_warmup({**pcfg, "pilot_warmup": 20}, 1200) == 40
    assert pilot_warmup({"pilot_warmup": 100}, 2343) == 100


def test_a_warm_start_with_new_coordinates_gives_way_to_the_pilot():
    from atlas_assets.model.fit_process import declined_warm_start

    pcfg = {"mode": "pilot", "warm_max_new": 0}
    assert declined_warm_start(pcfg, np.ones(4, bool), "fit-a") is None
    assert declined_warm_start(pcfg, np.array([True, False, True, True]), "fit-a").startswith("pilot: 1 coordinates new")
    assert declined_warm_start({**pcfg, "warm_max_new": 3}, np.array([True, False, True, True]), "fit-a") is None
    # without a pilot to fall back to, the warm start stays
    assert declined_warm_start({"mode": "none"}, np.zeros(4, bool), "fit-a") is None


def test_new_standard_normal_coordinates_keep_a_warm_start_and_the_identity_metric():
    # a validation fold whose masked cells move a model's pinned state adds one per-state deviation (dev_z): its
    # prior is std_normal, so it enters the map at its prior exactly and the warm route stays (measured on the
    # real panel, sending such folds to the pilot route cost 130k-530k leapfrog steps instead of ~55k)
    from atlas_assets.model.fit_process import declined_warm_start, main_metric

    data = {"M": 6, "M_ref": 3, "J": 4, "J_b": 2, "L": 1, "K_off": 1, "J_r": 0, "A": 2, "D": 3}
    mask = precondition.standard_normal_mask(data)
    sizes = precondition.block_sizes(data)
    assert mask.sum() == sizes["amp_z"] + sizes["curv_z"] + sizes["dev_z"] == 7 and len(mask) == sum(sizes.values())
    assert mask[-sizes["dev_z"]:].all() and not mask[:sizes["theta_ref_raw"] + sizes["pin_free"]].any()
    new_deviation = np.ones(len(mask), bool)
    new_deviation[-1] = False                         # the last dev_z has no earlier draw
    pcfg = {"mode": "pilot", "warm_max_new": 0, "main_adapt": {"metric": "unit_e"}}
    assert declined_warm_start(pcfg, new_deviation, "fit-a").startswith("pilot: 1 coordinates new")
    assert declined_warm_start(pcfg, new_deviation | mask, "fit-a") is None
    assert main_metric(pcfg, new_deviation | mask, 150) == ("unit_e", 150, None)
    new_capability = new_deviation | mask
    new_capability[sizes["theta_ref_raw"]] = False   # a new free state's capability: not its prior's place
    assert declined_warm_start(pcfg, new_capability | mask, "fit-a").startswith("pilot: 1 coordinates new")
    assert declined_warm_start({**pcfg, "warm_max_new": None}, new_capability, "fit-a") is None


@pytest.mark.cmdstan
def test_a_pilot_short_of_the_typical_set_gets_another_round_then_a_diagonal_metric(monkeypatch):
    # a pilot that stopped before the typical set leaves draws whose gradients have a mean (the stiffness step's
    # test, test_stiffness_correction_leaves_the_map_alone_when_the_draws_are_off_centre); the identity metric
    # cannot repair the scales of a map built from them (measured: a 2x simulated panel's main fit at step size
    # 0.014 and tree depth 10). Another pilot round runs through their map; if the draws are still off-centre
    # after the last round, the main fit adapts a diagonal metric over the longer warmup. Here the test's verdict
    # is forced (a real pilot this small is too noisy to judge), the fits are real.
    from atlas_assets.model import fit_process
    config, stan_input = small_cmdstan_input("the typicality test needs the log_prob gradients")
    config["sampler"].update(chains=2, draws=40, engine="cmdstanpy")
    config["sampler"]["precondition"].update(pilot_chains=2, pilot_warmup=40, pilot_draws=40, main_warmup=40,
                                             main_warmup_unmatched=80, pilot_rounds=1, refit_on_failure=0,
                                             stiffness={"draws": 40, "max_rank": 5, "max_shrink": 2.0})
    real_map = fit_process._map_from
    verdicts: list[bool] = []

    def judged(posterior, earlier_si, label, *args, typical_after: int):
        pc, info = real_map(posterior, earlier_si, label, *args)
        info["stiffness"]["typical"] = len(verdicts) >= typical_after
        verdicts.append(info["stiffness"]["typical"])
        return pc, info

    # never typical, one round allowed: the main fit goes on, on a diagonal metric over the longer warmup
    monkeypatch.setattr(fit_process, "_map_from", lambda *a: judged(*a, typical_after=99))
    result, info = fit_process.sample_posterior(stan_input, config, log=lambda m: None)
    assert verdicts == [False] and info["pilot_rounds"] == 1 and "untypical" in info
    assert result.settings.get("metric", "diag_e") == "diag_e" and result.settings["main_warmup"] == 80

    # typical after a second round (of three allowed): the main fit keeps the identity metric and its short warmup;
    # the pilot's warmup grown with the program's size reaches both rounds
    config["sampler"]["precondition"]["pilot_rounds"] = 3
    coordinates = sum(precondition.block_sizes(stan_input.data).values())
    config["sampler"]["precondition"]["pilot_warmup_coordinates"] = coordinates // 2   # twice as large: 80 or 81
    grown = int(np.ceil(40 * coordinates / (coordinates // 2)))
    verdicts.clear()
    logged: list[str] = []
    monkeypatch.setattr(fit_process, "_map_from", lambda *a: judged(*a, typical_after=1))
    result, info = fit_process.sample_posterior(stan_input, config, log=logged.append)
    assert verdicts == [False, True] and info["pilot_rounds"] == 2 and any("pilot round 2" in m for m in logged)
    assert info["from"] == "pilot fit (round 2)" and "untypical" not in info
    assert result.settings["metric"] == "unit_e" and result.settings["main_warmup"] == 40
    assert info["pilot_gradient_evals"] > 0 and result.n_gradient_evals > info["pilot_gradient_evals"]
    assert grown in (80, 81) and info["pilot_warmup"] == grown and any(f"2 chains x ({grown} + 40)" in m for m in logged)


@pytest.mark.cmdstan
def test_a_cold_main_fit_draws_from_where_its_tuning_run_stopped_at_the_step_moved_to_the_target(monkeypatch):
    # model.yaml cold_fixed_step: the main fit's warmup and a few draws in one run, then the draws in another, on
    # one step size set from the first run's: larger when it accepted above the target, smaller below it
    from atlas_assets.model import fit_process

    config, stan_input = small_cmdstan_input("the tuned main fit is a CmdStan route")
    config["sampler"].update(chains=2, draws=40, engine="cmdstanpy")
    pcfg = config["sampler"]["precondition"]
    pcfg.update(pilot_chains=2, pilot_warmup=40, pilot_draws=40, main_warmup=40, pilot_rounds=1, refit_on_failure=0,
                stiffness={"draws": 40, "max_rank": 5, "max_shrink": 2.0})
    assert pcfg["main_adapt"]["cold_fixed_step"]["tuning_draws"] == 50          # the packaged setting
    pcfg["main_adapt"]["cold_fixed_step"] = {"tuning_draws": 10, "max_factor": 1.25}
    runs: list[tuple[dict, object]] = []
    real_fit_model = fit_process.fit_model

    def recorded(*args, **kwargs):
        res = real_fit_model(*args, **kwargs)
        runs.append((kwargs, res))
        return res

    monkeypatch.setattr(fit_process, "fit_model", recorded)
    result, info = fit_process.sample_posterior(stan_input, config, log=lambda m: None)
    assert len(runs) == 3                                   # pilot, tuning run, draws
    (tuning_args, tuning), (main_args, main) = runs[1], runs[2]
    assert main is result
    assert (tuning_args["warmup"], tuning_args["draws"]) == (40, 10) and (main_args["warmup"], main_args["draws"]) == (0, 40)
    assert main_args["init"] == [{"pc_z": row.tolist()} for row in tuning.idata.posterior["pc_z"].values[:, -1]]

    step = info["main_tuning"]["step_size"]
    assert np.allclose(result.idata.sample_stats["step_size"].values, step, rtol=1e-5)
    tuned = float(np.median(tuning.idata.sample_stats["step_size"].values[:, -1]))
    accepted = float(tuning.idata.sample_stats["acceptance_rate"].values.mean())
    assert 1 / 1.25 - 1e-6 <= step / tuned <= 1.25 + 1e-6
    assert (step > tuned) == (accepted > config["sampler"]["adapt_delta"]), (tuned, accepted, step)
    # every leapfrog step counts: the pilot's, the tuning run's and the draws'
    drawn = int(result.idata.sample_stats["n_steps"].values.sum())
    assert result.n_gradient_evals == info["pilot_gradient_evals"] + tuning.n_gradient_evals + drawn


def draws_under_a_gaussian_likelihood(hat: float, prec: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Draws (m, sd) of a hierarchical term m ~ N(0, sd) whose data say N(hat | m, 1 / prec), sd spread over two
    orders of magnitude: m given sd drawn from its exact conditional posterior (normal prior times normal likelihood,
    precisions added)."""
    rng = np.random.default_rng(seed)
    sd = np.exp(rng.uniform(np.log(0.01), np.log(1.0), n))
    precision = 1 / sd**2 + prec
    m = rng.normal(prec * hat / precision, 1 / np.sqrt(precision))
    return m, sd


def test_the_centring_fit_finds_the_terms_likelihood_from_its_draws():
    m, sd = draws_under_a_gaussian_likelihood(hat=0.7, prec=400.0, n=4000, seed=3)
    hat, prec = precondition.centring_fit(m, sd)
    assert hat == pytest.approx(0.7, rel=0.05) and prec == pytest.approx(400.0, rel=0.1)
    # a term the data say nothing about: its draws are its prior, and it stays plainly non-centred (or so weakly
    # centred that r = 1 / (1 + sd^2 prec) stays ~1 where its sd lives)
    sd = np.exp(np.random.default_rng(4).uniform(np.log(0.01), np.log(1.0), 4000))
    m = sd * np.random.default_rng(5).standard_normal(4000)
    hat, prec = precondition.centring_fit(m, sd)
    assert prec * sd.max() ** 2 < 0.05


def test_conditionally_centred_coordinates_are_unit_scale_at_every_sd():
    # the funnel's wide end: plain non-centred z is pinned to a width ~1 / (sd sqrt(prec)) where sd is large; the
    # centred coordinate keeps width ~1 at both ends of sd
    m, sd = draws_under_a_gaussian_likelihood(hat=-0.4, prec=900.0, n=20000, seed=6)
    hat, prec = precondition.centring_fit(m, sd)
    z = m / sd
    r = 1 / (1 + sd**2 * prec)
    u = (z - sd * r * prec * hat) / np.sqrt(r)
    wide, neck = (sd > 0.6) & (sd < 0.7), (sd > 0.01) & (sd < 0.012)
    assert z[wide].std() < 0.1 and 0.9 < z[neck].std() < 1.1
    assert 0.85 < u[wide].std() < 1.15 and 0.85 < u[neck].std() < 1.15


@pytest.mark.cmdstan
def test_conditional_centring_is_a_change_of_variables_of_the_program():
    # at the same point of the model (the same z and scales), the program's log density in the centred coordinates
    # u differs from the plain one by log |dz/du| only: the posterior is unchanged. The coordinates are computed by
    # precondition.centred_coordinates, so this also checks that Python and the program agree on the map; the
    # Jacobian is taken by finite differences of that map, not from its formula.
    from atlas_assets.model.engines import log_density_gradients
    from atlas_assets.model.stan_data import stan_file

    config, stan_input = small_cmdstan_input("the log density is CmdStan's")
    data = stan_input.data
    sizes = precondition.block_sizes(data)
    assert sizes["amp_z"] > 0 and sizes["dev_z"] > 0
    P = sum(sizes.values())
    rng = np.random.default_rng(12)
    x = 0.3 * rng.standard_normal((3, P))
    blocks = precondition._block_slices(data)
    scales = np.log1p(np.exp(x[:, blocks["log_scale"]]))           # the packaged softplus link
    assert data["scale_softplus"] == 1
    term_sds = {"amp_sd": np.repeat(scales[:, [5]], data["A"], axis=1),
                "curv_sd": np.repeat(scales[:, [6]], data["A"], axis=1),
                "offdev_sd": scales[:, [7 + int(k) - 1 for k in data["dev_setting"]]]}
    # the map's own reading of the sds from the draws' scale block agrees with this one
    assert all(np.allclose(precondition.term_scales(x, data)[k], v) for k, v in term_sds.items())
    centring = {f"{name}_{part}": (rng.normal(0, 1, n) if part == "hat" else np.exp(rng.normal(3, 1, n)))
                for name, n in (("amp", data["A"]), ("curv", data["A"]), ("dev", data["D"])) for part in ("hat", "prec")}
    u = precondition.centred_coordinates(x, term_sds, centring, data)
    identity = identity_map(P, "dense", x)
    lp_plain, _ = log_density_gradients(stan_file(config), {**data, **identity.data()}, x, engine="cmdstanpy")
    centred = precondition.Preconditioner(loc=np.zeros(P), chol=np.eye(P), matched=np.ones(P, bool), draws=u,
                                          centring=centring)
    lp_centred, _ = log_density_gradients(stan_file(config), {**data, **centred.data()}, u, engine="cmdstanpy")
    h = 1e-6
    log_dz_du = np.zeros(len(x))
    for name, _, _ in precondition.CENTRED_TERMS:
        cols = np.arange(P)[blocks[{"amp": "amp_z", "curv": "curv_z", "dev": "dev_z"}[name]]]
        for c in cols:
            bumped = x.copy()
            bumped[:, c] += h
            du_dz = (precondition.centred_coordinates(bumped, term_sds, centring, data)[:, c] - u[:, c]) / h
            log_dz_du -= np.log(du_dz)
    assert np.all(np.abs(log_dz_du) > 1)                           # the centring is not the identity here
    assert np.allclose(lp_centred - lp_plain, log_dz_du, atol=1e-4)
