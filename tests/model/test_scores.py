"""Display scale, headline choice and rank probabilities (synthetic posterior)."""

import copy
import re

import arviz as az
import numpy as np
import pytest

from atlas_assets.model.scores import (
    DisplayReferenceError,
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
    cfg["display"]["reference"] = named_references(si, phi_true)
    return si, idata, cfg


def named_references(si, phi_true, low_value=130.0, high_value=150.0):
    """Two well-separated default states of the simulated panel as the display references."""
    defaults = si.states.assign(truth=phi_true).query("reasoning_state == 'default'").sort_values("truth")
    low, high = defaults.iloc[len(defaults) // 5], defaults.iloc[-len(defaults) // 5]
    return {"low": {"model": low.model, "reasoning_state": "default", "value": low_value},
            "high": {"model": high.model, "reasoning_state": "default", "value": high_value}}


def test_reference_states_exact_in_every_draw(fitted):
    si, idata, cfg = fitted
    phi = draws_of(idata, "phi")
    low, high = int(np.argmin(phi.mean(axis=0))), int(np.argmax(phi.mean(axis=0)))  # far apart: never flip
    cfg = copy.deepcopy(cfg)
    cfg["display"]["reference"] = {
        "low": {"model": si.states.model[low], "reasoning_state": si.states.reasoning_state[low], "value": 100.0},
        "high": {"model": si.states.model[high], "reasoning_state": si.states.reasoning_state[high], "value": 200.0},
    }
    scale = make_display_scale(idata, si, cfg)
    assert (scale.lo_state, scale.hi_state) == (low, high)
    disp = scale.apply(phi)
    assert np.allclose(disp[:, low], 100.0, atol=1e-9)
    assert np.allclose(disp[:, high], 200.0, atol=1e-9)
    # affine: differences scale by the same per-draw factor
    assert np.allclose(disp[:, 5] - disp[:, 4], scale.scale * (phi[:, 5] - phi[:, 4]))
    table = state_scores(idata, si, cfg, scale)
    assert set(table.loc[table.is_reference, "state_pos"]) == {low, high}


def with_reference(cfg, key, **changes):
    cfg = copy.deepcopy(cfg)
    cfg["display"]["reference"][key].update(changes)
    return cfg


def test_a_missing_reference_is_an_error_not_a_fallback(fitted):
    si, idata, cfg = fitted
    for broken, expected in (
        (with_reference(cfg, "low", model=None), "display.reference.low names no"),
        (with_reference(cfg, "high", model="no-such-model"), "no-such-model|default is not in the fit"),
        (with_reference(cfg, "high", reasoning_state="xhigh"), "is not in the fit (the model's states in the fit"),
    ):
        with pytest.raises(DisplayReferenceError, match=re.escape(expected)):
            make_display_scale(idata, si, broken)


def test_a_thinly_measured_reference_is_rejected(fitted):
    si, idata, cfg = fitted
    strict = copy.deepcopy(cfg)
    strict["eligibility"]["min_families"] = 50
    with pytest.raises(DisplayReferenceError, match="not rank-eligible"):
        make_display_scale(idata, si, strict)


def test_draws_where_the_scale_would_flip_are_rejected():
    phi = np.array([[0.0, 1.0], [0.0, 2.0], [0.5, 0.4]])  # the third draw puts high below low
    with pytest.raises(DisplayReferenceError, match="1 of 3 draws"):
        display_scale(phi, 0, 1, 130.0, 150.0)


def test_reference_states_say_their_interval_is_zero_by_construction(fitted):
    si, idata, cfg = fitted
    table = state_scores(idata, si, cfg)
    refs = table.loc[table.is_reference]
    assert len(refs) == 2
    assert set(refs.display_lower.round(9)) == {130.0, 150.0} and (refs.display_upper - refs.display_lower).abs().max() < 1e-9
    assert refs.note.str.contains("zero by construction").all()
    assert table.loc[~table.is_reference, "note"].isna().all()


def test_models_without_an_eligible_state_are_listed_with_the_reason(fitted):
    si, idata, cfg = fitted
    strict = copy.deepcopy(cfg)
    refs = [f"{r['model']}|{r['reasoning_state']}" for r in cfg["display"]["reference"].values()]
    threshold = int(si.states.loc[state_labels(si.states).isin(refs), "n_families"].min())
    strict["eligibility"]["min_families"] = threshold
    elig = rank_eligible(si, strict)
    lacking = set(si.states.model) - set(si.states.loc[elig, "model"])
    assert lacking, "the fixture should have thinly measured models"
    ms = model_scores(idata, si, strict).set_index("model")
    assert set(ms.index) == set(si.models.model)
    for model in lacking:
        assert ms.loc[model, "headline_status"].startswith(f"no rank-eligible state: a headline needs >= {threshold} families")
        assert np.isnan(ms.loc[model, "display_mean"]) and np.isnan(ms.loc[model, "p_rank1"])
    published = ms[ms.headline_status == "published"]
    assert np.isclose(published.p_rank1.sum(), 1.0)


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
