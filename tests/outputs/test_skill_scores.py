"""Skill scores per category on constructed data with known truth: a panel simulated from the fit's likelihood with
a true category deviation per state, read back through outputs/skill_scores.py with the true family parameters as
the "posterior". Asserts what a reader relies on: a state strong in one category and weak in another is ranked so,
90% intervals cover the true skill about 90% of the time, the learned deviation sd is near the true one, held-out
cells of a category are predicted better by the skill than by the general capability when categories differ, and
a state with one family in a category gets "not enough data" and no number."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlas_assets.outputs import skill_scores as S
from tests.outputs import tiny

CATEGORIES = {"coding": ["c0", "c1", "c2", "c3"], "math": ["m0", "m1", "m2", "m3"]}
B = [-1.0, -0.3, 0.3, 1.0]
BETA, KAPPA, ITEMS = 1.5, 150.0, 300
CFG = {"min_families": 2, "max_draws": 40,
       "deviation_sd": {"grid": [0.05, 0.15, 0.3, 0.5, 0.8, 1.2], "draws": 40, "min_states": 10}, "also_in": {}}


def simulate(n_states: int, tau: float, seed: int, special: dict[str, float] | None = None, n_draws: int = 40):
    """(draws, families, observations, states, membership, true phi_c per (state_pos, category))."""
    rng = np.random.default_rng(seed)
    names = [f for fams in CATEGORIES.values() for f in fams]
    families = pd.DataFrame({"family": names, "kind": "bounded", "floor": 0.0, "family_pos": np.arange(len(names))})
    phi = rng.standard_normal(n_states)
    truth, rows = {}, []
    for s in range(n_states):
        for c, fams in CATEGORIES.items():
            delta = (special or {}).get(c, 0.0) if s == 0 else tau * rng.standard_normal()
            truth[(s, c)] = phi[s] + delta
            for j, f in enumerate(fams):
                p = 1 / (1 + np.exp(-BETA * (truth[(s, c)] - B[j])))
                k = rng.binomial(ITEMS, rng.beta(p * KAPPA, (1 - p) * KAPPA))
                rows.append((s, f, "bounded", k / ITEMS, k, ITEMS))
    obs = pd.DataFrame(rows, columns=["state_pos", "family", "kind", "u", "correct", "items"])
    states = pd.DataFrame({"model": [f"m{s:02d}" for s in range(n_states)], "reasoning_state": "default"})
    b = np.tile(B, 2)
    draws = tiny.draws(phi[None, :] + 0.05 * rng.standard_normal((n_draws, n_states)), b[None, :].repeat(n_draws, 0),
                       BETA, kappa=KAPPA)
    membership = pd.DataFrame([(f, c, "test") for c, fams in CATEGORIES.items() for f in fams],
                              columns=["family", "category", "basis"])
    return draws, families, obs, states, membership, truth


@pytest.fixture(scope="module")
def strong_and_weak():
    draws, families, obs, states, membership, truth = simulate(40, 0.5, seed=4, special={"coding": 1.2, "math": -1.2})
    table, taus = S.skill_scores(draws, families, obs, states, membership, CFG, 0.9, seed=1)
    return table, taus, truth, (draws, families, obs, states, membership)


def test_a_state_strong_in_one_category_and_weak_in_another_is_ranked_so(strong_and_weak):
    table, _, truth, _ = strong_and_weak
    mine = table[table["state_pos"] == 0].set_index("category")
    assert (mine["status"] == S.PUBLISHED).all()
    assert mine.at["coding", "display_lower"] > mine.at["math", "display_upper"]
    # the general capability sits between the two skills, and the deviations carry the sign of the truth
    assert mine.at["math", "display_mean"] < mine.at["coding", "general_display_mean"] < mine.at["coding", "display_mean"]
    assert mine.at["coding", "deviation_lower"] > 0 > mine.at["math", "deviation_upper"]
    for c in CATEGORIES:
        assert abs(mine.at[c, "latent_mean"] - truth[(0, c)]) < 3 * mine.at[c, "latent_sd"] + 0.05


def test_intervals_cover_the_true_skill_and_the_deviation_sd_is_learned(strong_and_weak):
    table, taus, truth, _ = strong_and_weak
    pub = table[table["status"] == S.PUBLISHED]
    true = np.array([truth[(int(p), c)] for p, c in zip(pub["state_pos"], pub["category"])])
    covered = (pub["display_lower"].to_numpy() <= true) & (true <= pub["display_upper"].to_numpy())
    assert 0.8 <= covered.mean() <= 0.99, covered.mean()
    # the interval is about the skill, not the general capability: that one is off by the true deviation
    general_error = np.abs(pub["general_display_mean"].to_numpy() - true).mean()
    assert np.abs(pub["display_mean"].to_numpy() - true).mean() < 0.6 * general_error
    assert set(taus["deviation_sd"]) <= {0.3, 0.5, 0.8}, taus


def test_without_category_differences_the_deviation_shrinks_and_skill_follows_capability():
    draws, families, obs, states, membership, truth = simulate(20, 0.0, seed=9)
    table, taus = S.skill_scores(draws, families, obs, states, membership, CFG, 0.9, seed=1)
    assert (taus["deviation_sd"] <= 0.15).all(), taus
    pub = table[table["status"] == S.PUBLISHED]
    assert np.abs(pub["deviation_mean"]).mean() < 0.1 and np.abs(pub["deviation_mean"]).max() < 0.4


def test_heldout_cells_are_predicted_better_by_the_skill_than_by_the_general_capability(strong_and_weak):
    _, taus, _, (draws, families, obs, states, membership) = strong_and_weak
    keep = obs["state_pos"] < 8   # 8 states x 2 categories x 4 held-out families: enough, and fast
    cells = S.heldout_within_category(draws, families, obs[keep], states, membership, taus, seed=2)
    metrics = S.heldout_metrics(cells).set_index(["category", "method"])
    assert metrics.loc[("all", "skill"), "n_cells"] == metrics.loc[("all", "general"), "n_cells"] == 8 * 2 * 4
    assert metrics.loc[("all", "skill"), "crps"] < metrics.loc[("all", "general"), "crps"]
    assert metrics.loc[("all", "skill"), "rmse"] < metrics.loc[("all", "general"), "rmse"]
    assert metrics.loc[("all", "skill"), "coverage_90"] >= 0.8


def test_one_family_in_a_category_is_not_enough_data():
    draws, families, obs, states, membership, _ = simulate(12, 0.3, seed=5)
    thin = obs[(obs["state_pos"] != 3) | obs["family"].isin(["c0", "m0", "m1", "m2"])]
    taus = pd.DataFrame({"category": list(CATEGORIES), "deviation_sd": [0.3, 0.3]})
    table, _ = S.skill_scores(draws, families, thin, states, membership, CFG, 0.9, seed=1, taus=taus)
    assert len(table) == 12 * 2
    row = table[(table["state_pos"] == 3) & (table["category"] == "coding")].iloc[0]
    assert row["status"].startswith(S.NOT_ENOUGH) and "1 family in coding" in row["status"]
    assert np.isnan(row[["display_mean", "display_lower", "display_upper", "latent_mean"]].to_numpy(float)).all()
    math = table[(table["state_pos"] == 3) & (table["category"] == "math")].iloc[0]
    assert math["status"] == S.PUBLISHED and math["n_families"] == 3 and np.isfinite(math["display_mean"])


def test_family_categories_come_from_the_primary_benchmark():
    registry = pd.DataFrame([
        ("suite", "primary", "general"), ("suite", "component", "math"), ("suite", "component", "coding"),
        ("tiers", "component", "agents"), ("tiers", "component", "agents"), ("gpqa", "primary", "science"),
    ], columns=["family", "role", "category"])
    out = S.family_categories(registry, ["suite", "tiers", "gpqa", "unregistered"], {"gpqa": ["reasoning"]})
    got = out.groupby("family")["category"].agg(lambda c: sorted(c.dropna())).to_dict()
    assert got == {"gpqa": ["reasoning", "science"], "suite": ["general"], "tiers": ["agents"], "unregistered": []}
    assert out.loc[out["family"] == "unregistered", "basis"].str.contains("not in the registry").all()
