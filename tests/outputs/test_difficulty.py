"""Difficulty, saturation, frontier score and bound flags against hand-computed values."""

import numpy as np
import pytest
from scipy.special import expit, logit

from atlas_assets.outputs.difficulty import AT_LEAST, AT_MOST, difficulty_bounds
from tests.outputs.tiny import config, draws, frames


def table_for(phi, b, beta=1.0, floor=0.0, cells=None, scale=1.0, offset=0.0, eligible=None, **cfg):
    S = np.shape(phi)[1]
    cells = cells if cells is not None else [(s, 0, 0.5) for s in range(S)]
    fam, obs, states = frames([("f", "bounded", floor)], cells, S)
    d = draws(phi=phi, b=b, beta=beta, kappa=10.0, scale=scale, offset=offset)
    return difficulty_bounds(d, fam, obs, states, np.ones(S, bool) if eligible is None else eligible, config(**cfg)).iloc[0]


def test_difficulty_saturation_and_discrimination_on_the_display_scale_by_hand():
    phi = [[-1.0, 0.0, 1.0], [-1.0, 0.0, 1.0]]
    row = table_for(phi, b=[[0.2], [0.4]], beta=[[2.0], [1.0]], floor=0.25, scale=[10.0, 20.0], offset=[100.0, 100.0])
    # display b per draw: 100 + 10 * 0.2 = 102, 100 + 20 * 0.4 = 108
    assert row["difficulty_mean"] == pytest.approx(105.0)
    # saturation: b + logit(0.9) / beta, displayed per draw
    sat = [100 + 10 * (0.2 + logit(0.9) / 2), 100 + 20 * (0.4 + logit(0.9) / 1)]
    assert row["saturation_mean"] == pytest.approx(np.mean(sat))
    # discrimination per display unit: beta / scale
    assert row["discrimination_mean"] == pytest.approx(1.5)
    assert row["discrimination_display_mean"] == pytest.approx((0.2 + 0.05) / 2)
    # frontier: state 2 (highest display capability); expected score 0.25 + 0.75 inv_logit(beta (phi - b))
    assert row["frontier_state"] == "m2|default"
    fx = [0.25 + 0.75 * expit(2 * (1 - 0.2)), 0.25 + 0.75 * expit(1 * (1 - 0.4))]
    assert row["frontier_expected_mean"] == pytest.approx(np.mean(fx))
    assert row["bound"] is None and row["difficulty_display"].startswith("105")


def test_the_frontier_is_the_best_eligible_state():
    row = table_for([[-1.0, 0.0, 3.0]], b=[[0.0]], eligible=np.array([True, True, False]))
    assert row["frontier_state"] == "m1|default"


def test_nothing_evaluated_comes_close_to_half_solving_it_is_a_lower_bound():
    phi = [[-2.0, -1.5, -1.0, -0.5, 0.0]] * 4
    row = table_for(phi, b=[[2.0], [2.5], [3.0], [3.5]])
    assert row["bound"] == AT_LEAST
    assert row["difficulty_display"] == f"{AT_LEAST} {np.quantile([2.0, 2.5, 3.0, 3.5], 0.05):.0f}"
    assert row["p_above_evaluated_range"] == 1.0


def test_everything_evaluated_past_the_midpoint_is_an_upper_bound():
    row = table_for([[1.0, 2.0, 3.0, 4.0]], b=[[-1.0]])
    assert row["bound"] == AT_MOST and row["difficulty_display"].startswith(AT_MOST)


def test_the_percentiles_decide_not_the_extremes():
    # 20 evaluated states at 0..19: the 95th percentile is 18.05, the 90th 17.1; a crossing at 17.5 lies
    # inside [min, max] and below the 95th percentile, but above the 90th
    phi = [np.arange(20.0)]
    assert table_for(phi, b=[[17.5]])["bound"] is None
    assert table_for(phi, b=[[18.5]])["bound"] == AT_LEAST  # above the 95th percentile, below the maximum
    assert table_for(phi, b=[[17.5]], difficulty={"evaluated_range_percentiles": [10, 90]})["bound"] == AT_LEAST
    assert table_for(phi, b=[[0.5]], difficulty={"evaluated_range_percentiles": [10, 90]})["bound"] == AT_MOST


def test_only_states_evaluated_on_the_family_define_its_range():
    # state 3 (capability 10) is in the fit but not evaluated on the family: it does not widen the range
    phi = [[-1.0, 0.0, 1.0, 10.0]]
    row = table_for(phi, b=[[5.0]], cells=[(0, 0, 0.1), (1, 0, 0.2), (2, 0, 0.3)])
    assert row["bound"] == AT_LEAST and row["evaluated_max"] == 1.0 and row["n_states_evaluated"] == 3
