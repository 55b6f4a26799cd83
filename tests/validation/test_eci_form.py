"""Tests of the ECI-form least-squares baseline (atlas_assets/validation/eci_form.py).

Data are simulated here, independently of the module: known capabilities,
difficulties and slopes, the anchor family pinned at D = 0, alpha = 1 in the
truth too, so estimates and truth share one gauge.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from atlas_assets.validation.eci_form import (
    DEFAULT_L2,
    EciFormProblem,
    bootstrap_eci_form,
    display,
    fit_eci_form,
)

ANCHOR = "fam00"


@dataclass
class Panel:
    observations: pd.DataFrame
    held_out: pd.DataFrame  # cells (model, reasoning_state, family) not observed, with their true mean
    capability: pd.Series  # by "model|reasoning_state"
    difficulty: pd.Series  # by family
    slope: pd.Series
    floor: pd.Series
    kind: pd.Series
    noise_sd: pd.Series


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def true_mean(panel: Panel, state: np.ndarray, family: np.ndarray) -> np.ndarray:
    c = panel.capability.loc[state].to_numpy()
    d, a = panel.difficulty.loc[family].to_numpy(), panel.slope.loc[family].to_numpy()
    fl, kind = panel.floor.loc[family].to_numpy(), panel.kind.loc[family].to_numpy()
    z = a * (c - d)
    return np.where(kind == "bounded", fl + (1 - fl) * _sigmoid(z), z)


def draw_scores(panel: Panel, mean: np.ndarray, family: np.ndarray, rng) -> np.ndarray:
    sd = panel.noise_sd.loc[family].to_numpy()
    u = mean + rng.normal(0.0, 1.0, len(mean)) * sd
    bounded = panel.kind.loc[family].to_numpy() == "bounded"
    return np.where(bounded, np.clip(u, 0.0, 1.0), u)


def simulate(seed: int, n_models: int = 100, n_families: int = 12, obs_per_state=(4, 10)) -> Panel:
    """States m###|default and m###|high, each observed on a random subset of families.

    The last family is a rating family (linear, residual sd 0.2); a third of
    the bounded families have a guessing floor of 0.25; bounded noise sd 0.03.
    """
    rng = np.random.default_rng(seed)
    families = [f"fam{j:02d}" for j in range(n_families)]
    kind = np.array(["bounded"] * (n_families - 1) + ["rating"])
    floor = np.where((np.arange(n_families) % 3 == 1) & (kind == "bounded"), 0.25, 0.0)
    difficulty = rng.normal(0.0, 0.8, n_families)
    slope = np.exp(rng.normal(0.0, 0.25, n_families))
    difficulty[0], slope[0] = 0.0, 1.0  # the anchor, pinned in the truth too
    noise = np.where(kind == "bounded", 0.03, 0.2)

    models = [f"m{i:03d}" for i in range(n_models)]
    base = rng.normal(0.0, 1.2, n_models)
    rows, held = [], []
    for i, m in enumerate(models):
        settings = ["default", "high"] if rng.random() < 0.3 else ["default"]
        for r in settings:
            k = min(n_families, int(rng.integers(obs_per_state[0], obs_per_state[1] + 1)))
            seen = set(rng.choice(n_families, size=k, replace=False).tolist())
            for j in range(n_families):
                (rows if j in seen else held).append((m, r, families[j]))
    capability = {}
    for i, m in enumerate(models):
        capability[f"{m}|default"] = base[i]
        capability[f"{m}|high"] = base[i] + 0.5
    fam = pd.Index(families)
    panel = Panel(
        observations=pd.DataFrame(rows, columns=["model", "reasoning_state", "family"]),
        held_out=pd.DataFrame(held, columns=["model", "reasoning_state", "family"]),
        capability=pd.Series(capability),
        difficulty=pd.Series(difficulty, index=fam),
        slope=pd.Series(slope, index=fam),
        floor=pd.Series(floor, index=fam),
        kind=pd.Series(kind, index=fam),
        noise_sd=pd.Series(noise, index=fam),
    )
    obs = panel.observations
    state = (obs.model + "|" + obs.reasoning_state).to_numpy()
    mean = true_mean(panel, state, obs.family.to_numpy())
    obs["kind"] = panel.kind.loc[obs.family].to_numpy()
    obs["floor"] = panel.floor.loc[obs.family].to_numpy()
    obs["u"] = draw_scores(panel, mean, obs.family.to_numpy(), rng)
    ho = panel.held_out
    ho["mean"] = true_mean(panel, (ho.model + "|" + ho.reasoning_state).to_numpy(), ho.family.to_numpy())
    return panel


@pytest.fixture(scope="module")
def panel() -> Panel:
    return simulate(seed=11)


@pytest.fixture(scope="module")
def point(panel):
    return fit_eci_form(panel.observations, anchor=ANCHOR)


@pytest.fixture(scope="module")
def boot(panel):
    return bootstrap_eci_form(panel.observations, n_boot=40, seed=5, anchor=ANCHOR)


def _rmse(a, b):
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


# --------------------------------------------------------------------------- point fit


def test_recovers_simulated_parameters(panel, point):
    assert point.converged
    c_true = panel.capability.loc[point.states].to_numpy()
    d_true = panel.difficulty.loc[point.families].to_numpy()
    a_true = panel.slope.loc[point.families].to_numpy()
    assert np.corrcoef(point.capability, c_true)[0, 1] > 0.97
    assert _rmse(point.capability, c_true) < 0.25
    assert np.corrcoef(point.difficulty, d_true)[0, 1] > 0.97
    assert _rmse(point.difficulty, d_true) < 0.15
    assert _rmse(np.log(point.slope), np.log(a_true)) < 0.15
    # The per-family error band tracks the simulated noise on bounded families. With every
    # residual weighted alike, a rating residual (sd 0.2, derivative alpha) outweighs a bounded
    # one (sd 0.03, derivative <= alpha / 4): states bend to their rating scores, which leaves
    # the rating family's in-sample sd far below its noise and the bounded ones a little above.
    ratio = point.residual_sd / panel.noise_sd.loc[point.families].to_numpy()
    rating = (point.family_kind == "rating")
    assert np.all((ratio[~rating] > 0.7) & (ratio[~rating] < 1.5)), ratio
    assert np.all(ratio[rating] < 0.8), ratio


def test_predicts_held_out_cells(panel, point):
    ho = panel.held_out
    pred = point.predict(ho.model, ho.reasoning_state, ho.family)
    bounded = panel.kind.loc[ho.family].to_numpy() == "bounded"
    assert np.isfinite(pred).all()
    assert _rmse(pred[bounded], ho["mean"][bounded]) < 0.05
    assert _rmse(pred[~bounded], ho["mean"][~bounded]) < 0.3


def test_predict_is_nan_outside_the_fit(point):
    pred = point.predict(["m000", "no-such-model", "m000"], ["default", "default", "default"],
                         ["fam01", "fam01", "no-such-family"])
    assert np.isfinite(pred[0]) and np.isnan(pred[1:]).all()
    with pytest.raises(ValueError, match="equal lengths"):
        point.predict(["m000"], ["default", "high"], ["fam01"])


def test_fits_real_size_well_under_a_second():
    obs = simulate(seed=3, n_models=300, n_families=45, obs_per_state=(3, 9)).observations
    assert 2000 < len(obs) < 3500
    t0 = time.perf_counter()
    fit = fit_eci_form(obs)
    assert time.perf_counter() - t0 < 1.0 and fit.converged


def test_warm_start_reaches_the_same_fit(panel, point):
    again = fit_eci_form(panel.observations, anchor=ANCHOR, x0=point)
    assert np.abs(again.capability - point.capability).max() < 1e-3
    assert again.nfev <= point.nfev


# --------------------------------------------------------------------------- Jacobian


def test_analytic_jacobian_matches_finite_differences():
    rng = np.random.default_rng(2)
    n_obs, n_states, n_families, anchor = 60, 12, 5, 2
    family_code = rng.integers(0, n_families, n_obs)
    state_code = rng.integers(0, n_states - 1, n_obs)  # the last state stays fixed (absent)
    bounded = family_code != 4
    floor = np.where(family_code == 1, 0.25, 0.0)
    u = np.where(bounded, rng.random(n_obs), rng.normal(size=n_obs))
    problem = EciFormProblem(
        state_code, family_code, u, floor, bounded,
        n_states=n_states, n_families=n_families, anchor_code=anchor, l2=0.3,
        fixed_capability=rng.normal(size=n_states),
    )
    x = rng.normal(0.0, 0.8, problem.n_params)
    jac = problem.jacobian(x)
    assert jac.format == "csr" and jac.shape == (n_obs + problem.n_params, problem.n_params)
    h = 1e-6
    numeric = np.empty(jac.shape)
    for k in range(problem.n_params):
        step = np.zeros(problem.n_params)
        step[k] = h
        numeric[:, k] = (problem.residuals(x + step) - problem.residuals(x - step)) / (2 * h)
    np.testing.assert_allclose(jac.toarray(), numeric, atol=1e-7, rtol=1e-6)


# --------------------------------------------------------------------------- gauge


def test_anchor_is_pinned(panel, point):
    k = point.families.get_loc(ANCHOR)
    assert point.anchor == ANCHOR
    assert point.difficulty[k] == 0.0 and point.slope[k] == 1.0
    other = fit_eci_form(panel.observations, anchor="fam05")
    k5 = other.families.get_loc("fam05")
    assert other.difficulty[k5] == 0.0 and other.slope[k5] == 1.0
    assert other.difficulty[k] != 0.0


def test_default_anchor_is_the_family_with_most_observations(panel):
    obs = panel.observations
    extra = obs[obs.family == "fam07"].iloc[:40]  # duplicates make fam07 the largest
    fit = fit_eci_form(pd.concat([obs, extra], ignore_index=True))
    assert fit.anchor == "fam07"


def test_unknown_anchor_is_named(panel):
    with pytest.raises(ValueError, match="no-such-benchmark"):
        fit_eci_form(panel.observations, anchor="no-such-benchmark")


# --------------------------------------------------------------------------- L2 default


def test_default_penalty_keeps_plateaus_finite_and_barely_shrinks_informed_states(panel, point):
    obs = panel.observations
    plateau = pd.DataFrame({
        "model": "perfect", "reasoning_state": "default",
        "family": ["fam00", "fam02", "fam03", "fam05"], "kind": "bounded", "floor": 0.0, "u": 1.0,
    })
    with_plateau = pd.concat([obs, plateau], ignore_index=True)
    fit = fit_eci_form(with_plateau, anchor=ANCHOR)
    unpenalised = fit_eci_form(with_plateau, anchor=ANCHOR, l2=0.0)
    k = fit.states.get_loc("perfect|default")
    others = np.delete(fit.capability, k)
    assert others.max() < fit.capability[k] < 15.0
    assert unpenalised.capability[k] > fit.capability[k] + 2.0
    # states with many informative observations: the default moves them by a few thousandths
    nearly_free = fit_eci_form(obs, anchor=ANCHOR, l2=DEFAULT_L2 / 100)
    assert np.median(np.abs(nearly_free.capability - point.capability)) < 0.01


# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_shapes_and_intervals(panel, boot):
    ho = panel.held_out.iloc[:50]
    for residuals in (False, True):
        draws = boot.predict_draws(ho.model, ho.reasoning_state, ho.family, residuals=residuals)
        assert draws.shape == (40, 50) and np.isfinite(draws).all()
    assert len(boot.replicates) == 40
    ci = boot.capability_intervals(0.9)
    assert list(ci.columns) == ["state", "capability", "lower", "upper"]
    assert len(ci) == len(boot.point.states)
    assert (ci.lower <= ci.upper).all() and (ci.upper - ci.lower).median() > 0
    c_true = panel.capability.loc[ci.state].to_numpy()
    covered = ((c_true >= ci.lower) & (c_true <= ci.upper)).mean()
    assert covered > 0.6  # not degenerate (0.82-0.85 on three seeds of this simulation)
    with pytest.raises(ValueError, match="interval"):
        boot.capability_intervals(1.5)


def test_bootstrap_is_deterministic_under_a_seed():
    obs = simulate(seed=4, n_models=30, n_families=6).observations
    a = bootstrap_eci_form(obs, n_boot=5, seed=1)
    b = bootstrap_eci_form(obs, n_boot=5, seed=1)
    c = bootstrap_eci_form(obs, n_boot=5, seed=2)
    np.testing.assert_array_equal(a.capability_draws(), b.capability_draws())
    assert not np.array_equal(a.capability_draws(), c.capability_draws())
    cells = (obs.model, obs.reasoning_state, obs.family)
    np.testing.assert_array_equal(a.predict_draws(*cells, residuals=True, seed=3),
                                  b.predict_draws(*cells, residuals=True, seed=3))
    assert not np.array_equal(a.predict_draws(*cells, residuals=True, seed=3),
                              a.predict_draws(*cells, residuals=True, seed=4))


def test_parameter_only_ensembles_are_narrower_than_residual_ensembles(panel, boot):
    ho = panel.held_out
    widths = {}
    for residuals in (False, True):
        d = boot.predict_draws(ho.model, ho.reasoning_state, ho.family, residuals=residuals)
        lo, hi = np.quantile(d, [0.05, 0.95], axis=0)
        widths[residuals] = hi - lo
    assert np.median(widths[False]) < 0.7 * np.median(widths[True])
    bounded = panel.kind.loc[ho.family].to_numpy() == "bounded"
    d = boot.predict_draws(ho.model, ho.reasoning_state, ho.family, residuals=True)
    assert d[:, bounded].min() >= 0.0 and d[:, bounded].max() <= 1.0


def test_residual_ensembles_cover_fresh_scores(panel, boot):
    ho = panel.held_out
    fresh = draw_scores(panel, ho["mean"].to_numpy(), ho.family.to_numpy(), np.random.default_rng(99))
    coverage = {}
    for residuals in (False, True):
        d = boot.predict_draws(ho.model, ho.reasoning_state, ho.family, residuals=residuals, seed=7)
        lo, hi = np.quantile(d, [0.05, 0.95], axis=0)
        coverage[residuals] = float(((fresh >= lo) & (fresh <= hi)).mean())
    assert 0.8 <= coverage[True] <= 0.97, coverage
    assert coverage[False] < coverage[True] - 0.1, coverage  # Epoch's intervals ignore the error band


def test_a_state_absent_from_a_resample_keeps_its_point_value():
    obs = simulate(seed=6, n_models=20, n_families=5).observations
    single = pd.DataFrame({"model": ["lonely"], "reasoning_state": ["default"], "family": ["fam01"],
                           "kind": ["bounded"], "floor": [0.25], "u": [0.6]})
    res = bootstrap_eci_form(pd.concat([obs, single], ignore_index=True), n_boot=12, seed=0)
    k = res.point.states.get_loc("lonely|default")
    values = res.capability_draws()[:, k]
    assert (values == res.point.capability[k]).any()  # dropped in some replicates: held at the point fit
    assert (values != res.point.capability[k]).any()  # refitted where present


# --------------------------------------------------------------------------- input errors


def _small_obs() -> pd.DataFrame:
    obs = simulate(seed=8, n_models=10, n_families=4).observations.copy()
    obs.index = [f"r{i}" for i in range(len(obs))]
    return obs


def test_missing_column_is_named():
    with pytest.raises(ValueError, match="floor"):
        fit_eci_form(_small_obs().drop(columns="floor"))


def test_bounded_score_outside_unit_interval_is_named():
    obs = _small_obs()
    row = obs.index[obs.kind == "bounded"][3]
    obs.loc[row, "u"] = 1.3
    with pytest.raises(ValueError, match=rf"'u'.*\b{row}\b"):
        fit_eci_form(obs)


def test_unknown_kind_is_named():
    obs = _small_obs()
    obs.loc["r2", "kind"] = "ordinal"
    with pytest.raises(ValueError, match=r"'kind'.*ordinal.*\br2\b"):
        fit_eci_form(obs)


def test_rating_scores_may_leave_the_unit_interval():
    obs = _small_obs()
    rating_rows = obs.index[obs.kind == "rating"]
    obs.loc[rating_rows[0], "u"] = -2.5
    assert fit_eci_form(obs).converged


# --------------------------------------------------------------------------- display units


def test_display_maps_the_references(point):
    lo, hi = point.states[0].split("|"), point.states[-1].split("|")
    shown = display(point, low=(lo[0], lo[1], 130.0), high=(hi[0], hi[1], 150.0))
    assert shown.iloc[0] == pytest.approx(130.0) and shown.iloc[-1] == pytest.approx(150.0)
    slope = (shown.iloc[-1] - shown.iloc[0]) / (point.capability[-1] - point.capability[0])
    np.testing.assert_allclose(shown.to_numpy(), 130.0 + slope * (point.capability - point.capability[0]))
    with pytest.raises(ValueError, match="claude-3-5-sonnet-20240620"):
        display(point)  # the default references are not in simulated data


# --------------------------------------------------------------------------- opt-in: the real panel


@pytest.mark.skipif(not os.environ.get("ATLAS_ECI_REAL_OBSERVATIONS"),
                    reason="set ATLAS_ECI_REAL_OBSERVATIONS to a modeled_observations CSV")
def test_real_panel_fits_well_under_a_second():
    obs = pd.read_csv(os.environ["ATLAS_ECI_REAL_OBSERVATIONS"])
    t0 = time.perf_counter()
    fit = fit_eci_form(obs)
    assert time.perf_counter() - t0 < 1.0 and fit.converged
    shown = display(fit)
    assert np.isfinite(shown).all()
