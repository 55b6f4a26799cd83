"""Cell predictions: intervals on a constructed case, p-values, coverage of every eligible cell, score scales."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from atlas_assets.outputs.cell_predictions import cell_predictions, family_score_scales, mid_p_value
from tests.outputs.tiny import config, draws, frames


def test_intervals_of_an_unobserved_cell_match_the_predictive_distribution():
    # a continuous family with floor 0.25 (no zero process) and a rating family; state 2 unobserved on both
    fam, obs, states = frames([("g", "bounded", 0.25), ("r", "rating", 0.0)],
                              [(0, 0, 0.4), (1, 0, 0.6), (0, 1, -0.5), (1, 1, 0.5)], 3)
    D = 40_000
    d = draws(phi=np.tile([-1.0, 0.0, 0.8], (D, 1)), b=[[0.0, 0.3]], beta=[[1.2, 1.0]], kappa=[[15.0, np.nan]],
              rating_sd=[[np.nan, 0.4]])
    table = cell_predictions(d, fam, obs, states, np.ones(3, bool), config())
    cell = table[(table.state_pos == 2) & (table.family == "g")].iloc[0]
    p = 0.25 + 0.75 / (1 + np.exp(-1.2 * 0.8))
    dist = stats.beta(p * 15, (1 - p) * 15)
    for x in (0.5, 0.9):
        lo, hi = dist.ppf([(1 - x) / 2, (1 + x) / 2])
        assert cell[f"lower_{round(100 * x)}"] == pytest.approx(lo, abs=5e-3)
        assert cell[f"upper_{round(100 * x)}"] == pytest.approx(hi, abs=5e-3)
    assert cell["pred_mean"] == pytest.approx(p, abs=3e-3) and not cell["observed"]
    rating = table[(table.state_pos == 2) & (table.family == "r")].iloc[0]
    assert rating["lower_90"] == pytest.approx(0.5 - 1.6449 * 0.4, abs=0.01)
    assert rating["upper_50"] == pytest.approx(0.5 + 0.6745 * 0.4, abs=0.01)
    assert rating["score_scale"] == "standardised rating"


def test_every_eligible_cell_once_observed_cells_with_p_values():
    fam, obs, states = frames([("a", "bounded", 0.0), ("b", "bounded", 0.25)],
                              [(0, 0, 0.2), (1, 0, 0.5), (3, 0, 0.9), (1, 1, 0.7)], 4)
    d = draws(phi=[[-1.0, 0.0, 0.5, 1.0]] * 300, b=[[0.0, 0.0]], beta=1.0, kappa=10.0)
    eligible = np.array([True, True, True, False])   # state 3 is observed but not rank-eligible
    table = cell_predictions(d, fam, obs, states, eligible, config())
    assert len(table) == 3 * 2 + 1                    # 3 eligible states x 2 families, plus state 3's observation
    assert not table.duplicated(["state_pos", "family"]).any()
    assert table["observed"].sum() == len(obs)
    assert table.loc[table.observed, "ppp"].between(0, 1).all() and table.loc[~table.observed, "ppp"].isna().all()
    assert (table.lower_90 <= table.lower_50).all() and (table.lower_50 <= table.pred_median).all()
    assert (table.pred_median <= table.upper_50).all() and (table.upper_50 <= table.upper_90).all()


def test_mid_p_value_by_hand():
    rep = np.array([[0.1, 0.5], [0.5, 0.5], [0.9, 0.2], [0.5, 0.7]])
    assert mid_p_value(rep, np.array([0.5, 0.5])).tolist() == [0.25 + 0.5 * 0.5, 0.25 + 0.5 * 0.5]


def test_declared_range_and_reflection_for_lower_is_better():
    fam = pd.DataFrame({"family": ["up", "down", "mixed"], "kind": "bounded"})
    registry = pd.DataFrame({
        "family": ["up", "down", "mixed", "mixed"], "role": "primary", "kind": "bounded",
        "range_min": [0.0, 0.0, 0.0, 0.0], "range_max": [100.0, 50.0, 1.0, 100.0],
        "direction": ["higher", "lower", "higher", "higher"], "unit": ["percent", "points", "fraction", "percent"]})
    scales = family_score_scales(fam, registry)
    assert scales["range_max"].tolist()[:2] == [100.0, 50.0] and np.isnan(scales.loc[2, "range_max"])
    f, obs, states = frames([("up", "bounded", 0.0), ("down", "bounded", 0.0), ("mixed", "bounded", 0.0)],
                            [(0, 0, 0.3), (0, 1, 0.3), (0, 2, 0.3)], 2)
    d = draws(phi=[[0.0, 1.0]] * 500, b=[[0.0, 0.0, 0.0]], beta=1.0, kappa=20.0)
    table = cell_predictions(d, f, obs, states, np.ones(2, bool), config(), scales).set_index(["family", "state_pos"])
    up, down = table.loc[("up", 1)], table.loc[("down", 1)]
    assert up["score_mean"] == pytest.approx(100 * up["pred_mean"])
    assert down["score_mean"] == pytest.approx(50 - 50 * down["pred_mean"])
    assert down["score_lower_90"] == pytest.approx(50 - 50 * down["upper_90"])  # the ends swap when reflected
    assert table.loc[("down", 0), "score_observed"] == pytest.approx(35.0)
    assert table.loc[("mixed", 1), "score_scale"] == "share of the declared range (0-1)"


def test_mid_p_value_counts_a_draw_equal_to_the_score_once_even_off_by_the_last_bits():
    from atlas_assets.outputs.cell_predictions import mid_p_value

    observed = np.array([1 / 48])                      # as stored
    rep = np.array([[1 / 48 + 1e-17], [1 / 48], [2 / 48], [0.0]]) * np.ones((4, 1))  # K / n draws
    rep[0, 0] = np.nextafter(1 / 48, 1.0)             # the same share, one ulp above
    p = mid_p_value(rep, observed)
    assert np.isclose(p[0], (1 + 0.5 * 2) / 4)          # one draw above, two equal, one below
    assert 0 <= p[0] <= 1


def test_observed_cells_carry_their_verification_class_and_predicted_ones_none():
    fam, obs, states = frames([("a", "bounded", 0.0), ("b", "bounded", 0.25)],
                              [(0, 0, 0.2), (1, 0, 0.5), (1, 1, 0.7)], 3)
    obs = obs.assign(verification_class=["independent", "vendor_reported", "community"])
    d = draws(phi=[[-1.0, 0.0, 0.5]] * 200, b=[[0.0, 0.0]], beta=1.0, kappa=10.0)
    table = cell_predictions(d, fam, obs, states, np.ones(3, bool), config())
    got = {(r.state_pos, r.family): r.verification_class for r in table.itertuples() if r.observed}
    assert got == {(0, "a"): "independent", (1, "a"): "vendor_reported", (1, "b"): "community"}
    assert table.loc[~table["observed"], "verification_class"].isna().all()
    # data without classes (older fits): the column is there, empty
    assert cell_predictions(d, fam, obs.drop(columns="verification_class"), states, np.ones(3, bool),
                            config())["verification_class"].isna().all()
