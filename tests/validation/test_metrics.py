"""Held-out metrics and the simple baselines against values computed by hand."""

import numpy as np
import pandas as pd
from scipy.stats import norm

from atlas_assets.validation.baselines import family_mean_ensemble, model_offset_ensemble, standardized_offsets
from atlas_assets.validation.metrics import cell_scores, family_skill, rank_agreement, study_metrics


def test_crps_of_a_large_normal_ensemble_matches_the_closed_form():
    rng = np.random.default_rng(0)
    ens = rng.normal(0.0, 1.0, size=(40_000, 2))
    u = np.array([0.0, 1.5])
    # CRPS(N(0,1), y) = y (2 Phi(y) - 1) + 2 phi(y) - 1/sqrt(pi)
    exact = u * (2 * norm.cdf(u) - 1) + 2 * norm.pdf(u) - 1 / np.sqrt(np.pi)
    got = cell_scores(u, ens, [0.9])["crps"].to_numpy()
    assert np.allclose(got, exact, atol=0.01)


def test_study_metrics_by_hand():
    # two bounded cells with point ensembles: errors 0.1 and -0.3; a rating cell is left out
    cells = pd.DataFrame({"kind": ["bounded", "bounded", "rating"], "u": [0.5, 0.9, 3.0],
                          "pred_mean": [0.6, 0.6, 0.0], "crps": [0.1, 0.3, 9.0],
                          "lower_90": [0.55, 0.5, -1], "upper_90": [0.65, 0.95, 1]})
    m = study_metrics(cells, [0.9])
    assert m["n_cells"] == 2
    assert np.isclose(m["rmse"], np.sqrt((0.01 + 0.09) / 2)) and np.isclose(m["mae"], 0.2)
    assert np.isclose(m["rmse_points"], 100 * m["rmse"]) and np.isclose(m["crps"], 0.2)
    assert m["coverage_90"] == 0.5  # 0.5 lies outside [0.55, 0.65], 0.9 inside [0.5, 0.95]


def test_interval_ends_and_unpredictable_cells():
    ens = np.column_stack([np.linspace(0, 1, 1001), np.full(1001, np.nan)])
    out = cell_scores(np.array([0.5, 0.5]), ens, [0.5, 0.9])
    assert np.isclose(out.loc[0, "lower_50"], 0.25) and np.isclose(out.loc[0, "upper_90"], 0.95)
    assert out.loc[1].isna().all()


def test_family_skill_is_one_minus_the_crps_ratio():
    cells = pd.DataFrame({
        "fold": "masked_0", "model": ["m1", "m2"] * 2, "reasoning_state": "default", "family": "f",
        "method": ["atlas", "atlas", "family_mean", "family_mean"], "crps": [0.1, 0.1, 0.4, 0.4]})
    skill = family_skill(cells, "atlas", "family_mean", min_cells=2)
    assert skill.loc[0, "n_cells"] == 2 and np.isclose(skill.loc[0, "skill"], 0.75)
    assert family_skill(cells, "atlas", "family_mean", min_cells=3).empty


def test_rank_agreement_standardizes_both_vectors():
    r = rank_agreement(np.array([1.0, 2.0, 3.0, 4.0]), np.array([10.0, 20.0, 30.0, 40.0]))
    assert r["spearman"] == 1.0 and np.isclose(r["rmse_std"], 0.0)
    r = rank_agreement(np.array([4.0, 3.0, 2.0, 1.0]), np.array([10.0, 20.0, 30.0, 40.0]))
    assert r["spearman"] == -1.0 and np.isclose(r["mae_std"], 2 * np.mean(np.abs((np.arange(4) - 1.5) / np.arange(4).std())))


def _train() -> pd.DataFrame:
    # additive in z: state offsets +1 / -1 on two families with different means and sds
    return pd.DataFrame({
        "model": ["hi", "lo", "hi", "lo", "mid"], "reasoning_state": "default",
        "family": ["f", "f", "g", "g", "g"], "kind": "bounded",
        "u": [0.6, 0.4, 0.9, 0.5, 0.7]})


def test_model_offset_maps_a_state_mean_z_score_back_through_the_family_line():
    train = _train()
    z = standardized_offsets(train)
    g = train[train.family == "g"]["u"]
    assert np.isclose(z[("mid", "default")], (0.7 - g.mean()) / g.std())
    heldout = pd.DataFrame({"model": ["mid"], "reasoning_state": ["default"], "family": ["f"], "kind": ["bounded"]})
    ens = model_offset_ensemble(train, heldout, np.random.default_rng(0), 2000)
    f = train[train.family == "f"]["u"]
    point = f.mean() + f.std() * z[("mid", "default")]
    # the rule nearly reproduces family f's two training cells, so the resampled residuals are small
    assert np.allclose(ens, np.clip(point, 0, 1), atol=0.05)


def test_family_mean_ensemble_draws_the_family_training_scores_and_nothing_else():
    train = _train()
    heldout = pd.DataFrame({"model": ["x", "y"], "reasoning_state": "default", "family": ["g", "new"], "kind": "bounded"})
    ens = family_mean_ensemble(train, heldout, np.random.default_rng(1), 500)
    assert set(np.unique(ens[:, 0])) <= {0.9, 0.5, 0.7}
    assert np.isnan(ens[:, 1]).all()  # a family with no training cell cannot be predicted


def test_z_scores_show_intervals_too_narrow_for_the_misses():
    rng = np.random.default_rng(3)
    truth = rng.normal(0.5, 0.1, size=4000)          # each cell's outcome: N(0.5, 0.1)
    honest = rng.normal(0.5, 0.1, size=(500, 4000))  # an ensemble with the outcomes' own spread
    narrow = rng.normal(0.5, 0.05, size=(500, 4000))  # half of it: over-confident
    for ensemble, z_sd in ((honest, 1.0), (narrow, 2.0)):
        cells = pd.concat([pd.DataFrame({"kind": "bounded", "u": truth}), cell_scores(truth, ensemble, [0.9])], axis=1)
        m = study_metrics(cells, [0.9])
        assert abs(m["z_sd"] - z_sd) < 0.06 * z_sd and abs(m["z_mean"]) < 0.06 * z_sd
    assert np.allclose(cell_scores(truth[:3], honest[:, :3], [0.9])["pred_sd"], honest[:, :3].std(axis=0))
