"""Reliability against hand-computed values, grade boundaries, the 'every state' variant, R^2 on the logit scale."""

import numpy as np
import pytest
from scipy.special import expit, logit

from atlas_assets.outputs.reliability import grade, logit_r2, reliability_draws, reliability_grades
from tests.outputs.tiny import config, draws, frames


def test_rating_family_reliability_by_hand():
    # three states at -1, 0, 1 on a rating family with b = 0, beta = 1, residual sd 0.5:
    # expected scores -1, 0, 1 (population variance 2/3), noise variance 0.25
    fam, obs, states = frames([("r", "rating", 0.0)], [(0, 0, -1.0), (1, 0, 0.1), (2, 0, 0.9)], 3)
    d = draws(phi=[[-1, 0, 1], [-2, 0, 2]], b=[[0]], beta=[[1]], rating_sd=[[0.5], [1.0]])
    table = reliability_grades(d, fam, obs, states, config(reliability={"min_models": 2}))
    r1 = (2 / 3) / (2 / 3 + 0.25)
    r2 = (8 / 3) / (8 / 3 + 1.0)
    assert table.loc[0, "reliability_mean"] == pytest.approx((r1 + r2) / 2)
    assert table.loc[0, "reliability_all_mean"] == pytest.approx((r1 + r2) / 2)  # every state is scored here


def test_bounded_family_reliability_by_hand_and_every_state_variant():
    # floor 0.25 (no zero process), kappa 9, two scored states of four; continuous cells
    fam, obs, states = frames([("g", "bounded", 0.25)], [(1, 0, 0.5), (2, 0, 0.6)], 4)
    phi = np.array([[-2.0, -0.2, 0.2, 2.0]])
    d = draws(phi=phi, b=[[0.0]], beta=[[1.5]], kappa=[[9.0]])
    table = reliability_grades(d, fam, obs, states, config(reliability={"min_models": 2}))

    def rel(states_):
        p = 0.25 + 0.75 * expit(1.5 * phi[0, states_])
        return np.var(p) / (np.var(p) + np.mean(p * (1 - p) / 10))

    assert table.loc[0, "reliability_mean"] == pytest.approx(rel([1, 2]))
    assert table.loc[0, "reliability_all_mean"] == pytest.approx(rel([0, 1, 2, 3]))
    assert table.loc[0, "reliability_all_mean"] > table.loc[0, "reliability_mean"]  # narrow panel reads low
    assert table.loc[0, "capability_sd_ratio"] < 0.2


def test_countable_cells_use_their_items():
    fam, obs, states = frames([("g", "bounded", 0.25)], [(0, 0, 0.3), (1, 0, 0.8)], 2, items={0: 10, 1: 40})
    phi = np.array([[-1.0, 1.0]])
    d = draws(phi=phi, b=[[0.0]], beta=[[1.0]], kappa=[[20.0]])
    table = reliability_grades(d, fam, obs, states, config(reliability={"min_models": 2}))
    p = 0.25 + 0.75 * expit(phi[0])
    n = np.array([10.0, 40.0])
    noise = p * (1 - p) * (20 + n) / (n * 21)
    assert table.loc[0, "reliability_mean"] == pytest.approx(np.var(p) / (np.var(p) + noise.mean()))


def test_zero_process_adds_its_variance():
    # floor-free family: U = 0 with probability pz, else beta; E = (1 - pz) p, Var = (1 - pz) v + pz (1 - pz) p^2
    expected = np.array([[0.3, 0.6]])
    assert reliability_draws(expected, np.array([[0.01, 0.01]]))[0] == pytest.approx(0.0225 / 0.0325)
    fam, obs, states = frames([("z", "bounded", 0.0)], [(0, 0, 0.0), (1, 0, 0.7)], 2)
    d = draws(phi=[[-1.0, 1.0]], b=[[0.0]], beta=[[1.0]], kappa=[[10.0]], hurdle_a=-1.0, hurdle_b=1.0)
    table = reliability_grades(d, fam, obs, states, config(reliability={"min_models": 2}))
    eta = np.array([-1.0, 1.0])
    p, pz = expit(eta), expit(-1.0 - eta)
    mean = (1 - pz) * p
    var = (1 - pz) * p * (1 - p) / 11 + pz * (1 - pz) * p ** 2
    assert table.loc[0, "reliability_mean"] == pytest.approx(np.var(mean) / (np.var(mean) + var.mean()))


@pytest.mark.parametrize("p, expected", [
    ({"A": 0.90, "B": 1.0, "C": 1.0}, "A"),          # exactly at the probability: the grade is reached
    ({"A": 0.8999, "B": 0.90, "C": 1.0}, "B"),
    ({"A": 0.2, "B": 0.5, "C": 0.90}, "C"),
    ({"A": 0.0, "B": 0.3, "C": 0.8999}, "D"),
])
def test_grade_boundaries(p, expected):
    assert grade(p, 0.9, n_models=30, min_models=10) == expected


def test_ungraded_below_the_model_count():
    assert grade({"A": 1.0, "B": 1.0, "C": 1.0}, 0.9, n_models=9, min_models=10) is None
    assert grade({"A": 1.0, "B": 1.0, "C": 1.0}, 0.9, n_models=10, min_models=10) == "A"


def test_grades_in_the_table_follow_the_draws():
    # reliability ~ 0.727 in every draw: B (>= 0.70 surely, not >= 0.85)
    fam, obs, states = frames([("r", "rating", 0.0)], [(0, 0, -1.0), (1, 0, 0.1), (2, 0, 0.9)], 3)
    d = draws(phi=[[-1, 0, 1]] * 10, b=[[0]], beta=[[1]], rating_sd=0.5)
    table = reliability_grades(d, fam, obs, states, config(reliability={"min_models": 3}))
    assert table.loc[0, "grade"] == "B" and table.loc[0, "p_at_least_B"] == 1.0 and table.loc[0, "p_at_least_A"] == 0.0
    table = reliability_grades(d, fam, obs, states, config(reliability={"min_models": 4}))
    assert table.loc[0, "grade"] is None and "ungraded" in table.loc[0, "grade_status"]


def test_logit_r2_against_a_direct_computation():
    u = np.array([0.3, 0.5, 0.7, 0.9, 0.0])
    eta = np.array([-0.5, 0.1, 0.4, 1.5, -3.0])
    r2, n = logit_r2(u, eta, "bounded", 0.0, np.full(5, np.nan), np.full(5, np.nan), 0.005)
    y = logit(u[:4])  # the exact zero of a floor-free family is left out
    direct = 1 - np.sum((y - eta[:4]) ** 2) / np.sum((y - y.mean()) ** 2)
    assert n == 4 and r2 == pytest.approx(direct)
    # countable: (k + 1/2) / (n + 1), then the headroom share above the floor
    r2c, _ = logit_r2(np.array([0.5, 0.75, 1.0]), np.array([-1.0, 0.3, 2.0]), "bounded", 0.25,
                      np.array([2.0, 3.0, 4.0]), np.array([4.0, 4.0, 4.0]), 0.005)
    s = np.clip((np.array([2.5, 3.5, 4.5]) / 5 - 0.25) / 0.75, 0.005, 0.995)
    y = logit(s)
    assert r2c == pytest.approx(1 - np.sum((y - [-1.0, 0.3, 2.0]) ** 2) / np.sum((y - y.mean()) ** 2))
