"""Calibrate-in (atlas_assets/outputs/calibrate.py) against independent brute force on hand-made posteriors.

The hand-made posterior repeats a few distinct parameter sets (b, beta, kappa, hurdle, reasoning
effects and scales) many times, so the calibrated draws belonging to one set are a sample of that
set's conditional posterior, which a dense grid written here (scipy.stats densities, not the
module's formulas) gives exactly.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import expit

from atlas_assets.outputs import calibrate as C
from tests.outputs.tiny import draws as make_draws

FAMILIES = pd.DataFrame({"family": ["countable", "continuous", "rating"], "kind": ["bounded", "bounded", "rating"],
                         "floor": [0.25, 0.0, 0.0], "family_pos": [0, 1, 2]})
# distinct parameter sets: per family b, beta, kappa (rating: sd); hurdle; shared effects; reasoning scales
SETS = [
    dict(b=[0.3, 1.2, 0.0], beta=[1.8, 2.5, 1.1], kappa=[60.0, 25.0, np.nan], rating_sd=[np.nan, np.nan, 0.4],
         hurdle=(-3.0, 0.6), shared=[-0.4, -0.1, 0.1, 0.2, 0.3, 0.15, -0.2, 0.05], amp_sd=0.3, curv_sd=0.2,
         offdev=[0.35, 0.25], shared_sd=0.3, scale=18.0, offset=120.0),
    dict(b=[0.1, 0.9, 0.4], beta=[2.4, 1.6, 0.8], kappa=[120.0, 12.0, np.nan], rating_sd=[np.nan, np.nan, 0.6],
         hurdle=(-2.0, 0.3), shared=[-0.3, -0.05, 0.12, 0.25, 0.35, 0.1, -0.25, 0.1], amp_sd=0.15, curv_sd=0.1,
         offdev=[0.2, 0.4], shared_sd=0.2, scale=20.0, offset=118.0),
    dict(b=[0.6, 1.5, -0.3], beta=[1.2, 3.0, 1.4], kappa=[30.0, 40.0, np.nan], rating_sd=[np.nan, np.nan, 0.3],
         hurdle=(-4.0, 1.0), shared=[-0.5, -0.2, 0.0, 0.15, 0.2, 0.2, -0.1, 0.0], amp_sd=0.25, curv_sd=0.15,
         offdev=[0.3, 0.3], shared_sd=0.4, scale=16.0, offset=122.0),
]
REPEAT = 800
LADDER = ("minimal", "low", "medium", "high", "xhigh", "max")


def posterior(sets=SETS, repeat=REPEAT):
    """(PosteriorDraws, ReasoningDraws, set index per draw)."""
    which = np.repeat(np.arange(len(sets)), repeat)
    col = lambda key: np.array([sets[i][key] for i in which], dtype=float)  # noqa: E731
    hurdle = col("hurdle")
    draws = make_draws(phi=np.zeros((len(which), 1)), b=col("b"), beta=col("beta"), kappa=col("kappa"),
                       rating_sd=col("rating_sd"), hurdle_a=hurdle[:, 0], hurdle_b=hurdle[:, 1], scale=col("scale"),
                       offset=col("offset"))
    reasoning = C.ReasoningDraws(ladder=LADDER, off_ladder=("disabled", "enabled"), default="default",
                                 pin_preference=("medium", "high", "low", "xhigh", "max", "minimal", "enabled", "disabled"),
                                 shared_effect=col("shared"), shared_sd=col("shared_sd"), amp_sd=col("amp_sd"),
                                 curv_sd=col("curv_sd"), offdev_sd=col("offdev"))
    return draws, reasoning, which


def rows(model, cells):
    """cells: (reasoning_state, family, u, correct, items) -> likelihood_pieces rows."""
    frame = pd.DataFrame(cells, columns=["reasoning_state", "family", "u", "correct", "items"]).assign(model=model)
    frame["kind"] = frame["family"].map(FAMILIES.set_index("family")["kind"])
    return C.likelihood_pieces(frame, FAMILIES)


# ------------------------------------------------------------------------- independent brute force


def log_lik_scipy(phi, row, p, families=FAMILIES):
    """Log-likelihood of one observation at capability grid `phi` for parameter set `p` (scipy.stats)."""
    j = int(row.family_pos)
    eta = p["beta"][j] * (phi - p["b"][j])
    if row.piece == "rating":
        return stats.norm.logpdf(row.u, eta, p["rating_sd"][j])
    c, kap = families.floor[j], p["kappa"][j]
    mu = c + (1 - c) * expit(eta)
    pz = expit(p["hurdle"][0] - p["hurdle"][1] * eta)
    if row.piece == "bb":
        ll = stats.betabinom.logpmf(int(row.k), int(row.n), mu * kap, (1 - mu) * kap)
    elif row.piece == "beta":
        ll = stats.beta.logpdf(row.u, mu * kap, (1 - mu) * kap)
    elif row.piece == "bbz":
        return np.log(pz + (1 - pz) * stats.betabinom.pmf(0, int(row.n), mu * kap, (1 - mu) * kap))
    else:
        raise AssertionError(row.piece)
    return ll + np.log1p(-pz) if c == 0 else ll


def brute_force_single(obs, p, families=FAMILIES, grid=np.linspace(-9, 9, 36001)):
    """Exact posterior of a one-state model (phi = theta + shared of its setting): (grid of phi, density, log Z)."""
    state = obs["reasoning_state"].iloc[0]
    shift = 0.0 if state == "default" else p["shared"][(list(LADDER) + ["disabled", "enabled"]).index(state)]
    lp = stats.norm.logpdf(grid)
    for row in obs.itertuples():
        lp = lp + log_lik_scipy(grid + shift, row, p, families)
    dens = np.exp(lp - lp.max())
    z = np.trapezoid(dens, grid)
    return grid + shift, dens / z, lp.max() + np.log(z)


def moments(grid, dens):
    m = np.trapezoid(grid * dens, grid)
    return m, np.sqrt(np.trapezoid((grid - m) ** 2 * dens, grid))


def ks_pvalue(sample, grid, dens):
    cdf = np.concatenate([[0], np.cumsum(0.5 * (dens[1:] + dens[:-1]) * np.diff(grid))])
    return stats.kstest(sample, lambda x: np.interp(x, grid, cdf / cdf[-1])).pvalue


# ------------------------------------------------------------------------- tests


@pytest.mark.parametrize("cells, floor_free", [
    ([("default", "countable", 0.62, 31, 50)], False),                           # one countable score
    ([("default", "continuous", 0.41, None, None)], False),                      # one continuous score (hurdle)
    ([("default", "countable", 0.80, 160, 200), ("default", "rating", 0.7, None, None)], False),
    ([("default", "countable", 0.0, 0, 30), ("default", "continuous", 0.2, None, None)], True),  # 0/n: zero-inflated
    ([("high", "countable", 0.7, 70, 100)], False),                              # a non-default single state
])
def test_one_state_posterior_matches_a_dense_grid(cells, floor_free):
    draws, reasoning, which = posterior()
    families = FAMILIES.assign(floor=0.0) if floor_free else FAMILIES
    frame = pd.DataFrame(cells, columns=["reasoning_state", "family", "u", "correct", "items"]).assign(model="m")
    obs = C.likelihood_pieces(frame.assign(kind=frame["family"].map(families.set_index("family")["kind"])), families)
    assert ("bbz" in set(obs["piece"])) == floor_free
    fit = C.calibrate_model(draws, reasoning, families, obs, np.random.default_rng(1))
    assert fit.phi.shape == (len(which), 1)
    for i, p in enumerate(SETS):
        grid, dens, log_z = brute_force_single(obs, p, families)
        sample = fit.phi[which == i, 0]
        mean, sd = moments(grid, dens)
        assert abs(sample.mean() - mean) < 4 * sd / np.sqrt(len(sample)), (i, sample.mean(), mean)
        assert abs(sample.std() / sd - 1) < 0.12, (i, sample.std(), sd)
        assert ks_pvalue(sample, grid, dens) > 1e-3
        # the marginal likelihood per draw is a deterministic quadrature: exact to 1e-4
        np.testing.assert_allclose(fit.log_evidence[which == i], log_z, atol=1e-4)


@pytest.mark.parametrize("states, term", [
    (("default", "high"), "ladder"),      # the non-pinned ladder state carries amp * d_lin + curv * d_quad
    (("enabled", "disabled"), "offdev"),  # the non-pinned off-ladder state carries its own deviation
])
def test_reasoning_terms_are_integrated_from_their_prior(states, term):
    pinned, other = states
    # two observations each: the pinned state wins by its setting (default first, then pin_preference)
    cells = [(pinned, "countable", 0.55, 55, 100), (pinned, "rating", 0.3, None, None),
             (other, "continuous", 0.45, None, None), (other, "countable", 0.6, 30, 50)]
    draws, reasoning, which = posterior()
    obs = rows("new-model", cells)
    fit = C.calibrate_model(draws, reasoning, FAMILIES, obs, np.random.default_rng(2))
    layout = fit.layout.states.set_index("reasoning_state")
    assert layout.loc[pinned, "pinned"] and not layout.loc[other, "pinned"]
    settings = list(LADDER) + ["disabled", "enabled"]
    code = lambda s: 0 if s == "default" else settings.index(s) + 1  # noqa: E731
    for i, p in enumerate(SETS):
        shift = lambda s: 0.0 if code(s) == 0 else p["shared"][code(s) - 1]  # noqa: E731
        if term == "ladder":
            v_sd = np.hypot(p["amp_sd"] * layout.loc[other, "d_lin"], p["curv_sd"] * layout.loc[other, "d_quad"])
        else:
            v_sd = p["offdev"][code(other) - len(LADDER) - 1]
        # 2-D grid over (theta, v), v the other state's own term: phi_other = theta + shift + v
        theta = np.linspace(-6, 6, 1201)[:, None]
        v = np.linspace(-6 * v_sd, 6 * v_sd, 601)[None, :]
        lp = stats.norm.logpdf(theta) + stats.norm.logpdf(v, 0, v_sd)
        for row in obs.itertuples():
            phi = theta + shift(row.reasoning_state) + (v if row.reasoning_state == other else 0.0)
            lp = lp + log_lik_scipy(phi, row, p)
        w = np.exp(lp - lp.max())
        w /= w.sum()
        phi_other = (theta + shift(other) + v)
        exact_mean = (w * phi_other).sum()
        exact_sd = np.sqrt((w * (phi_other - exact_mean) ** 2).sum())
        pin_mean = (w * (theta + shift(pinned))).sum()
        sample = fit.phi[which == i, list(layout.index).index(other)]
        pin_sample = fit.phi[which == i, list(layout.index).index(pinned)]
        assert abs(sample.mean() - exact_mean) < 4 * exact_sd / np.sqrt(len(sample)) + 0.01, (i, sample.mean(), exact_mean)
        assert abs(sample.std() / exact_sd - 1) < 0.15, (i, sample.std(), exact_sd)
        assert abs(pin_sample.mean() - pin_mean) < 0.05


def test_more_observations_narrow_the_interval_and_display_uses_the_scale_of_each_draw():
    from dataclasses import replace

    draws, reasoning, _ = posterior(sets=SETS[:1], repeat=2000)
    rng = np.random.default_rng(0)   # a display scale that differs draw by draw, as the fit's does
    draws = replace(draws, scale=18 + rng.normal(0, 1, draws.n_draws), offset=120 + rng.normal(0, 1, draws.n_draws))
    one = rows("a", [("default", "countable", 0.6, 30, 50)])
    three = rows("b", [("default", "countable", 0.6, 30, 50), ("default", "continuous", 0.5, None, None),
                       ("default", "rating", 0.4, None, None)])
    cal = C.calibrate(draws, reasoning, FAMILIES, pd.concat([one, three], ignore_index=True).assign(outside_reason="x"),
                      seed=3)
    rules = {"min_families": 3, "min_observations": 3}
    table = C.calibrated_state_table(cal, draws, pd.DataFrame(draws.display(np.zeros((draws.n_draws, 2))) + [[0, 5]],
                                                              columns=["f1", "f2"]), rules, 0.9, 10).set_index("model")
    width = table["display_upper"] - table["display_lower"]
    assert width["b"] < 0.8 * width["a"]
    sds = [C.calibrate(draws, reasoning, FAMILIES, three.iloc[:n].assign(outside_reason="x"), seed=3).phi.std()
           for n in (1, 2, 3)]
    assert sds[0] > sds[1] > sds[2]
    # display = offset_d + scale_d * phi_d, draw by draw (not the mean scale applied to the mean)
    phi = cal.phi[:, int(table.loc["a", "cal_pos"])]
    shown = draws.offset + draws.scale * phi
    assert table.loc["a", "display_mean"] == pytest.approx(shown.mean())
    assert table.loc["a", "display_sd"] == pytest.approx(shown.std())
    assert table.loc["a", "display_lower"] == pytest.approx(np.quantile(shown, 0.05))
    # the gate: one family is below it (no rank); three families in one state pass it (ranks among fitted + it)
    assert not table.loc["a", "eligible"] and np.isnan(table.loc["a", "p_rank1"])
    assert "below the rank-eligibility gate" in table.loc["a", "status"]
    assert table.loc["b", "eligible"] and 0 <= table.loc["b", "p_rank1"] <= 1
    assert table["status"].str.startswith(C.STATUS).all()


def test_deterministic_under_a_seed_and_independent_of_the_other_models():
    draws, reasoning, _ = posterior(repeat=100)
    a = rows("a", [("default", "countable", 0.6, 30, 50)]).assign(outside_reason="x")
    b = rows("b", [("high", "continuous", 0.3, None, None)]).assign(outside_reason="x")
    both = pd.concat([a, b], ignore_index=True)
    first, again = C.calibrate(draws, reasoning, FAMILIES, both, seed=7), C.calibrate(draws, reasoning, FAMILIES, both, seed=7)
    np.testing.assert_array_equal(first.phi, again.phi)
    alone = C.calibrate(draws, reasoning, FAMILIES, a, seed=7)
    np.testing.assert_array_equal(alone.phi[:, 0], first.phi[:, 0])
    assert not np.array_equal(C.calibrate(draws, reasoning, FAMILIES, a, seed=8).phi, alone.phi)


def test_candidates_come_from_before_the_coverage_filter_and_nothing_is_invented():
    fit_obs = pd.DataFrame({"model": ["f1", "f1", "f2", "f3"], "reasoning_state": "default",
                            "family": ["countable", "rating", "rating", "rating"], "u": [0.5, 1.0, -1.0, 0.0]})
    fo = pd.DataFrame({
        "model": ["f1", "f1", "f2", "f3", "new", "new", "gone", "f1"],
        "reasoning_state": ["default"] * 7 + ["high"],
        "family": ["countable", "rating", "rating", "rating", "countable", "rating", "dropped_family", "countable"],
        "kind": ["bounded", "rating", "rating", "rating", "bounded", "rating", "bounded", "bounded"],
        # stage 05 z-scores ratings over all its rows; stage 06 again over the kept rows (here 10, 30, 50 raw)
        "u": [0.5, 10.0, 30.0, 50.0, 0.4, 40.0, 0.3, 0.7],
        "correct": [25, None, None, None, 20, None, None, 35], "items": [50, None, None, None, 50, None, None, 50],
        "floor": 0.0})
    audit = pd.DataFrame({"model": ["new", "new", "gone"], "reason": "model_too_few_families"})
    cand = C.candidate_observations(fo, fit_obs, FAMILIES, audit)
    new = cand.observations.set_index("family")
    assert set(cand.observations["model"]) == {"new"}
    assert new.loc["rating", "u"] == pytest.approx((40.0 - 30.0) / 20.0)   # the kept rows' mean 30, sd 20
    assert new.loc["countable", "piece"] == "bb"
    assert new["outside_reason"].str.startswith("model_too_few_families").all()
    why = cand.exclusions.set_index("model")["reason"]
    assert why["gone"].startswith("no observation on a family in the fit")
    assert why["f1"].startswith("state of a fitted model")
    with pytest.raises(ValueError):
        C.calibrate_model(*posterior(repeat=5)[:2], FAMILIES, cand.observations.iloc[:0], np.random.default_rng(0))


def test_log_likelihood_and_pieces_are_the_fits_own():
    """On a simulated panel covering every piece, the module's pieces and log-likelihoods at the fit's own phi
    equal `build_stan_data`'s and `scores.observation_draws`'."""
    from atlas_assets.model.scores import observation_draws
    from tests.outputs.fixtures import synthetic_fit

    si, idata, draws, _ = synthetic_fit(chains=1, draws=20, n_models=30, n_families=9, target_obs=250)
    obs = si.observations
    pieces = C.likelihood_pieces(obs.drop(columns=["family_pos", "piece", "hurdle"]), si.families)
    assert (pieces["piece"].to_numpy() == obs["piece"].to_numpy()).all() and pieces["drop_reason"].isna().all()
    assert set(obs["piece"]) == {"bb", "bbz", "beta", "one", "zero", "rating"}
    expected = observation_draws(idata, si)["log_lik"].reshape(draws.n_draws, -1)
    for i, row in enumerate(pieces.itertuples()):
        j = int(row.family_pos)
        eta = draws.eta([int(obs["state_pos"].iat[i])], j)
        got = C.observation_log_likelihood(eta, row.piece, draws.family(j, si.families), u=row.u, k=row.k, n=row.n)
        np.testing.assert_allclose(got[:, 0], expected[:, i], rtol=1e-8, atol=1e-8)


def test_cell_predictions_have_the_columns_of_cell_predictions():
    from atlas_assets.outputs.cell_predictions import cell_predictions
    from tests.outputs.tiny import config, frames

    draws, reasoning, _ = posterior(repeat=60)
    cal = C.calibrate(draws, reasoning, FAMILIES, rows("a", [("default", "countable", 0.6, 30, 50),
                                                             ("high", "rating", 0.2, None, None)]).assign(outside_reason="x"),
                      seed=1)
    fit_obs = pd.DataFrame({"state_pos": [0, 0], "family_pos": [0, 1], "u": [0.5, 0.4], "kind": "bounded",
                            "items": [40.0, np.nan], "correct": [20.0, np.nan]})
    cfg = config()
    table = C.calibrated_cell_predictions(cal, draws, FAMILIES, fit_obs, np.array([False, False]), cfg)
    assert len(table) == len(cal.states) * len(FAMILIES)
    assert table["observed"].sum() == 2 and table.loc[table["observed"], "ppp"].between(0, 1).all()
    assert (table.loc[~table["observed"] & (table["family"] == "countable"), "n_items"] == 40).all()
    fam, obs, states = frames([("x", "bounded", 0.0)], [(0, 0, 0.5)], 2)
    reference = cell_predictions(make_draws(phi=np.zeros((5, 2)), b=[[0.0]], beta=[[1.0]], kappa=[[10.0]]), fam, obs,
                                 states, np.array([True, True]), cfg)
    assert [c for c in table.columns if c != "path"] == list(reference.columns)


def test_two_ladder_states_share_one_amplitude_and_curvature():
    """default (pinned) + medium + high: both ladder states carry amp * d_lin + curv * d_quad with the SAME
    (amp, curv); against a 3-D grid over (theta, amp, curv)."""
    cells = [("default", "countable", 0.5, 25, 50), ("medium", "countable", 0.7, 70, 100),
             ("high", "continuous", 0.6, None, None)]
    draws, reasoning, which = posterior(repeat=600)
    obs = rows("new-model", cells)
    fit = C.calibrate_model(draws, reasoning, FAMILIES, obs, np.random.default_rng(4))
    layout = fit.layout.states.set_index("reasoning_state")
    assert layout.loc["default", "pinned"] and (layout.loc[["medium", "high"], "block"] == 1).all()
    theta = np.linspace(-5, 5, 201)[:, None, None]
    for i, p in enumerate(SETS):
        amp = np.linspace(-5 * p["amp_sd"], 5 * p["amp_sd"], 61)[None, :, None]
        curv = np.linspace(-5 * p["curv_sd"], 5 * p["curv_sd"], 61)[None, None, :]
        lp = stats.norm.logpdf(theta) + stats.norm.logpdf(amp, 0, p["amp_sd"]) + stats.norm.logpdf(curv, 0, p["curv_sd"])
        phi = {}
        for s in ("default", "medium", "high"):
            shift = 0.0 if s == "default" else p["shared"][LADDER.index(s)]
            phi[s] = theta + shift + amp * layout.loc[s, "d_lin"] + curv * layout.loc[s, "d_quad"]
        for row in obs.itertuples():
            lp = lp + log_lik_scipy(phi[row.reasoning_state], row, p)
        w = np.exp(lp - lp.max())
        w /= w.sum()
        for s in ("default", "medium", "high"):
            exact = (w * phi[s]).sum()
            exact_sd = np.sqrt((w * (phi[s] - exact) ** 2).sum())
            sample = fit.phi[which == i, list(layout.index).index(s)]
            assert abs(sample.mean() - exact) < 4 * exact_sd / np.sqrt(len(sample)) + 0.01, (i, s, sample.mean(), exact)
            assert abs(sample.std() / exact_sd - 1) < 0.15, (i, s, sample.std(), exact_sd)
        # the two ladder states move together through (amp, curv): their difference is as exact as each
        diff = fit.phi[which == i, list(layout.index).index("high")] - fit.phi[which == i, list(layout.index).index("medium")]
        exact_diff = (w * (phi["high"] - phi["medium"])).sum()
        assert abs(diff.mean() - exact_diff) < 0.02


def test_a_state_of_unknown_setting_takes_a_new_shared_effect_from_its_prior():
    draws, reasoning, which = posterior(repeat=1500)
    obs = rows("new-model", [("turbo", "countable", 0.62, 31, 50)])
    assert obs["drop_reason"].isna().all()
    fit = C.calibrate_model(draws, reasoning, FAMILIES, obs, np.random.default_rng(5))
    assert fit.layout.states["unknown_setting"].all()
    for i, p in enumerate(SETS):
        # phi = theta + e, e ~ N(0, shared_sd): phi's prior is N(0, 1 + shared_sd^2)
        grid = np.linspace(-9, 9, 36001)
        lp = stats.norm.logpdf(grid, 0, np.sqrt(1 + p["shared_sd"] ** 2)) + log_lik_scipy(grid, next(obs.itertuples()), p)
        dens = np.exp(lp - lp.max())
        dens /= np.trapezoid(dens, grid)
        mean, sd = moments(grid, dens)
        sample = fit.phi[which == i, 0]
        assert abs(sample.mean() - mean) < 4 * sd / np.sqrt(len(sample)) + 0.01
        assert abs(sample.std() / sd - 1) < 0.12


# ------------------------------------------------------------------------- the prior of theta


def test_an_informative_theta_prior_is_applied_per_draw():
    """With theta ~ N(m_d, s_d) the calibrated posterior matches the dense grid under that prior, draw set by set."""
    draws, reasoning, which = posterior()
    obs = rows("m", [("default", "countable", 0.62, 31, 50)])
    means, sds = np.array([1.5, 0.5, -0.5]), np.array([0.4, 0.6, 0.9])
    prior = C.ThetaPrior(means[which], sds[which], "release_trend")
    fit = C.calibrate_model(draws, reasoning, FAMILIES, obs, np.random.default_rng(3), prior=prior)
    grid = np.linspace(-9, 9, 36001)
    for i, p in enumerate(SETS):
        lp = stats.norm.logpdf(grid, means[i], sds[i]) + log_lik_scipy(grid, next(obs.itertuples()), p)
        dens = np.exp(lp - lp.max())
        dens /= np.trapezoid(dens, grid)
        mean, sd = moments(grid, dens)
        sample = fit.phi[which == i, 0]
        assert abs(sample.mean() - mean) < 4 * sd / np.sqrt(len(sample)), (i, sample.mean(), mean)
        assert abs(sample.std() / sd - 1) < 0.12
        np.testing.assert_allclose(fit.log_evidence[which == i], lp.max() + np.log(np.trapezoid(np.exp(lp - lp.max()), grid)),
                                   atol=1e-4)


def test_release_trend_prior_recovers_the_line_and_follows_a_kink_locally():
    rng = np.random.default_rng(5)
    dates = pd.Timestamp("2022-01-01") + pd.to_timedelta(rng.uniform(0, 4 * 365, 400), unit="D")
    years = ((dates - pd.Timestamp("2020-01-01")).days / 365.25).to_numpy()
    D = 50
    # per draw a slightly different line (posterior uncertainty), residual sd 0.3
    slope, intercept = 0.8 + 0.02 * rng.standard_normal(D), -2.0 + 0.05 * rng.standard_normal(D)
    theta = intercept[:, None] + slope[:, None] * years[None, :] + 0.3 * rng.standard_normal((D, len(years)))
    new = {"recent": "2025-07-01", "undated": None}
    priors = C.release_trend_priors(theta, dates, new, min_dated_models=20)
    t0 = (pd.Timestamp("2025-07-01") - pd.Timestamp("2020-01-01")).days / 365.25
    np.testing.assert_allclose(priors["recent"].mean, intercept + slope * t0, atol=0.08)
    np.testing.assert_allclose(priors["recent"].sd, 0.3, atol=0.04)
    assert priors["recent"].source == "release_trend"
    assert priors["undated"].source == "program" and np.all(priors["undated"].mean == 0) and np.all(priors["undated"].sd == 1)
    # a kink (flat, then rising fast): one line misses the recent level, the local line does not
    kinked = np.where(years < 4.5, 0.0, 2.0 * (years - 4.5))[None, :] + 0.2 * rng.standard_normal((D, len(years)))
    at = {"new": "2025-12-01"}
    truth = 2.0 * ((pd.Timestamp("2025-12-01") - pd.Timestamp("2020-01-01")).days / 365.25 - 4.5)
    line = C.release_trend_priors(kinked, dates, at)["new"].mean.mean()
    local = C.release_trend_priors(kinked, dates, at, bandwidth_years=0.5)["new"].mean.mean()
    assert abs(local - truth) < 0.15 < abs(line - truth)
    # too few dated fitted models: the program's prior
    few = C.release_trend_priors(theta[:, :10], dates[:10], {"recent": "2025-07-01"}, min_dated_models=20)
    assert few["recent"].source == "program"


def test_unmeasured_settings_are_placed_through_the_reasoning_structure():
    """A model measured at `high` only: its default is theta itself, `disabled` theta + shared effect + a deviation
    from the setting's spread, `low` theta + shared effect + ladder terms from their prior; none of them moves
    the measured state, and none is ever the pinned one."""
    draws, reasoning, which = posterior()
    obs = rows("m", [("high", "countable", 0.7, 70, 100)])
    alone = C.calibrate_model(draws, reasoning, FAMILIES, obs, np.random.default_rng(8))
    fit = C.calibrate_model(draws, reasoning, FAMILIES, obs, np.random.default_rng(8),
                            unmeasured=("default", "disabled", "low"))
    st = fit.layout.states.set_index("reasoning_state")
    assert st.loc["high", "pinned"] and not st.loc[["default", "disabled", "low"], "pinned"].any()
    assert list(st.loc[["default", "disabled", "low"], "observed"]) == [False] * 3
    pos = {s: int(i) for s, i in zip(fit.layout.states["reasoning_state"], fit.layout.states.index)}
    shared = reasoning.shared_effect
    code = {s: reasoning.setting_code(s) for s in ("high", "low", "disabled")}
    theta = fit.phi[:, pos["high"]] - shared[:, code["high"] - 1]
    np.testing.assert_allclose(fit.phi[:, pos["default"]], theta, atol=1e-12)
    np.testing.assert_allclose(fit.theta, theta, atol=1e-12)
    # the measured state's posterior is the same as without the unmeasured ones (same likelihood, same prior)
    assert abs(fit.phi[:, pos["high"]].mean() - alone.phi[:, 0].mean()) < 0.02
    dev = fit.phi[:, pos["disabled"]] - theta - shared[:, code["disabled"] - 1]
    lin, quad = st.loc["low", "d_lin"], st.loc["low", "d_quad"]
    ladder = fit.phi[:, pos["low"]] - theta - shared[:, code["low"] - 1]
    for i, p in enumerate(SETS):
        sel = which == i
        assert abs(dev[sel].std() / p["offdev"][0] - 1) < 0.12, (i, dev[sel].std())
        expected = np.sqrt((p["amp_sd"] * lin) ** 2 + (p["curv_sd"] * quad) ** 2)
        assert abs(ladder[sel].std() / expected - 1) < 0.12, (i, ladder[sel].std(), expected)
        assert abs(dev[sel].mean()) < 4 * p["offdev"][0] / np.sqrt(sel.sum())


def test_an_unknown_setting_run_of_a_calibrated_model_is_a_mixture_over_its_settings():
    """Unknown-labelled rows of a model that also has labelled rows are not calibration evidence: they are placed as
    a mixture over the model's calibrated settings, weighted by their own scores, and are never eligible; a model
    with only unknown-labelled rows is calibrated from them (its setting effect from the shared effects' spread)."""
    draws, reasoning, which = posterior()
    families = FAMILIES.assign(family_pos=[0, 1, 2])
    fo = pd.DataFrame([
        ("labelled", "low", "countable", 0.30, 15, 50), ("labelled", "high", "countable", 0.80, 40, 50),
        ("labelled", "unknown", "countable", 0.78, 39, 50),
        ("only_unknown", "unknown", "countable", 0.5, 25, 50),
    ], columns=["model", "reasoning_state", "family", "u", "correct", "items"])
    fo["kind"], fo["floor"] = "bounded", 0.25
    fit_obs = pd.DataFrame(columns=["model", "reasoning_state", "family", "u"])
    cand = C.candidate_observations(fo, fit_obs, families)
    assert list(zip(cand.unknown["model"], cand.unknown["reasoning_state"])) == [("labelled", "unknown")]
    assert set(zip(cand.observations["model"], cand.observations["reasoning_state"])) == {
        ("labelled", "low"), ("labelled", "high"), ("only_unknown", "unknown")}
    cal = C.calibrate(draws, reasoning, families, cand.observations, seed=2)
    cal = C.add_unknown_settings(cal, cand.unknown, draws, families, seed=2)
    st = cal.states.set_index(["model", "reasoning_state"])
    pos = lambda m, s: int(st.loc[(m, s), "cal_pos"])  # noqa: E731
    mixed = cal.phi[:, pos("labelled", "unknown")]
    low, high = cal.phi[:, pos("labelled", "low")], cal.phi[:, pos("labelled", "high")]
    assert np.all((mixed == low) | (mixed == high))      # each draw is one of the model's settings
    assert (mixed == high).mean() > 0.9                 # its 0.78 looks like the high run (0.80), not the low (0.30)
    assert max(json.loads(st.loc[("labelled", "unknown"), "setting_probabilities"]).items(), key=lambda kv: kv[1])[0] == "high"
    assert int(st.loc[("labelled", "unknown"), "n_obs"]) == 1
    assert (cal.observations["cal_pos"] == pos("labelled", "unknown")).sum() == 1
    eligible = C.eligibility(cal.states, {"min_families": 1, "min_observations": 1})
    assert not eligible[[pos("labelled", "unknown"), pos("only_unknown", "unknown")]].any()
    assert eligible[pos("labelled", "high")]
