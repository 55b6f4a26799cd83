"""The per-cell formulas agree with the fit's own per-observation pass and with simulation."""

import numpy as np
import pytest
from scipy.special import expit

from atlas_assets.outputs.cell_model import FamilyLikelihood, moments, predictive
from atlas_assets.outputs.draws import observation_items
from tests.outputs.fixtures import synthetic_fit


def test_expected_scores_match_observation_draws_on_every_observed_cell():
    si, _, d, _ = synthetic_fit()
    obs = si.observations
    items = observation_items(obs)
    for j in range(len(si.families)):
        rows = np.flatnonzero(obs["family_pos"].to_numpy() == j)
        mean, var = moments(d.eta(obs["state_pos"].to_numpy()[rows], j), d.family(j, si.families), items[rows])
        assert np.allclose(mean, d.mu_obs[:, rows], atol=1e-6), si.families.family[j]
        assert (var > 0).all()


@pytest.mark.parametrize("n_items, hurdle, floor", [(None, False, 0.25), (20, False, 0.25), (None, True, 0.0), (30, True, 0.0)])
def test_moments_match_simulated_predictive_draws(n_items, hurdle, floor):
    rng = np.random.default_rng(0)
    D = 200_000
    fam = FamilyLikelihood(kind="bounded", floor=floor, hurdle=hurdle, kappa=np.full(D, 12.0), rating_sd=None,
                           hurdle_a=np.full(D, -1.5), hurdle_b=np.full(D, 0.8))
    eta = np.full((D, 1), 0.4)
    n = None if n_items is None else np.array([float(n_items)])
    mean, var = moments(eta, fam, n)
    x = predictive(rng, eta, fam, n)[:, 0]
    assert x.mean() == pytest.approx(mean[0, 0], abs=3e-3)
    assert x.var() == pytest.approx(var[0, 0], rel=0.03)
    if not hurdle:
        assert mean[0, 0] == pytest.approx(floor + (1 - floor) * expit(0.4))


def test_rating_cells_are_normal_around_the_linear_predictor():
    fam = FamilyLikelihood(kind="rating", floor=0.0, hurdle=False, kappa=None, rating_sd=np.array([0.3, 0.6]),
                           hurdle_a=np.zeros(2), hurdle_b=np.ones(2))
    mean, var = moments(np.array([[0.5], [1.0]]), fam)
    assert mean[:, 0].tolist() == [0.5, 1.0] and np.allclose(var[:, 0], [0.09, 0.36])
