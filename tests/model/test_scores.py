"""Display scale, headline choice and rank probabilities (synthetic posterior)."""

import arviz as az
import numpy as np
import pytest

from atlas_assets.model.scores import (
    display_scale,
    draws_of,
    headline_states,
    make_display_scale,
    model_scores,
    rank_draws,
    rank_eligible,
    reasoning_effects,
    state_scores,
)
from atlas_assets.model.simulate import simulate_panel
from atlas_assets.model.stan_data import build_stan_data, load_model_config, state_labels


@pytest.fixture(scope="module")
def fitted():
    cfg = load_model_config()
    cfg["eligibility"]["min_families"] = 1
    cfg["eligibility"]["min_observations"] = 1
    df, truth = simulate_panel(n_models=30, n_families=8, target_obs=200, seed=5, config=cfg)
    si = build_stan_data(df, cfg)
    rng = np.random.default_rng(0)
    chains, draws = 2, 150
    phi_true = truth.phi[state_labels(si.states)].to_numpy()
    phi = phi_true + 0.3 * rng.standard_normal((chains, draws, len(phi_true)))
    eff = rng.normal(0.1, 0.2, (chains, draws, len(si.settings)))
    idata = az.from_dict(posterior={"phi": phi, "shared_effect": eff})
    return si, idata, cfg


def test_reference_states_exact_in_every_draw(fitted):
    si, idata, cfg = fitted
    cfg = dict(cfg)
    cfg["display"] = {**cfg["display"], "reference": {
        "low": {"model": si.states.model[3], "reasoning_state": si.states.reasoning_state[3], "value": 100.0},
        "high": {"model": si.states.model[9], "reasoning_state": si.states.reasoning_state[9], "value": 200.0},
    }}
    scale = make_display_scale(idata, si, cfg)
    assert (scale.lo_state, scale.hi_state) == (3, 9)
    disp = scale.apply(draws_of(idata, "phi"))
    assert np.allclose(disp[:, 3], 100.0, atol=1e-9)
    assert np.allclose(disp[:, 9], 200.0, atol=1e-9)
    # affine: differences scale by the same per-draw factor
    phi = draws_of(idata, "phi")
    assert np.allclose(disp[:, 5] - disp[:, 4], scale.scale * (phi[:, 5] - phi[:, 4]))
    table = state_scores(idata, si, cfg, scale)
    assert set(table.loc[table.is_reference, "state_pos"]) == {3, 9}


def test_display_scale_fallback_quantiles(fitted):
    si, idata, cfg = fitted
    scale = make_display_scale(idata, si, cfg)  # no named states: quantile fallback
    disp = scale.apply(draws_of(idata, "phi"))
    assert np.allclose(disp[:, scale.lo_state], 100.0) and np.allclose(disp[:, scale.hi_state], 200.0)
    assert draws_of(idata, "phi")[:, scale.hi_state].mean() > draws_of(idata, "phi")[:, scale.lo_state].mean()


def test_headline_is_highest_posterior_mean_eligible_state(fitted):
    si, idata, cfg = fitted
    phi = draws_of(idata, "phi")
    elig = rank_eligible(si, cfg)
    head = headline_states(si, phi, elig)
    mean = phi.mean(axis=0)
    for model, grp in si.states.assign(mean=mean, elig=elig).groupby("model"):
        grp = grp[grp.elig]
        if grp.empty:
            assert model not in head.index
            continue
        assert head[model] == grp.loc[grp["mean"].idxmax(), "state_pos"]
    ms = model_scores(idata, si, cfg)
    multi = si.states.groupby("model").size()
    assert (multi > 1).any()
    row = ms.set_index("model")
    for model in multi[multi > 1].index:
        assert row.loc[model, "state_pos"] == head[model]


def test_rank_probabilities(fitted):
    si, idata, cfg = fitted
    ms = model_scores(idata, si, cfg)
    assert np.isclose(ms["p_rank1"].sum(), 1.0)
    assert np.isclose(ms["p_top10"].sum(), 10.0)
    assert np.isclose(ms["expected_rank"].sum(), len(ms) * (len(ms) + 1) / 2)
    assert ms["display_mean"].is_monotonic_decreasing
    assert (ms["display_lower"] <= ms["display_median"]).all() and (ms["display_median"] <= ms["display_upper"]).all()
    r = rank_draws(np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 1.0]]))
    assert r.tolist() == [[1, 3, 2], [3, 1, 2]]


def test_reasoning_effects_table(fitted):
    si, idata, cfg = fitted
    eff = reasoning_effects(idata, si, cfg).set_index("setting")
    assert eff.loc["default", "latent_mean"] == 0
    e = draws_of(idata, "shared_effect")
    pos = si.settings.set_index("setting")["setting_pos"]
    assert np.isclose(eff.loc["high", "p_step_helps"], (e[:, pos["high"]] > e[:, pos["medium"]]).mean())
    assert eff.loc["high", "step_from"] == "medium"
    assert np.isnan(eff.loc["minimal", "p_step_helps"]) and np.isnan(eff.loc["disabled", "p_step_helps"])


def test_display_scale_rejects_degenerate():
    phi = np.zeros((3, 2))
    with pytest.raises(ValueError):
        display_scale(phi, 0, 1, 0.0, 1.0)
