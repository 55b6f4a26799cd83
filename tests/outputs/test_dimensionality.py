"""The residual-correlation statistic against a direct computation."""

import numpy as np
import pandas as pd
import pytest

from atlas_assets.outputs.dimensionality import dimensionality_test, shared_pairs
from tests.outputs.tiny import config


def panel(rng, n_states=30, n_families=4, drop=()):
    rows = [(s, j) for j in range(n_families) for s in range(n_states) if (s, j) not in drop]
    obs = pd.DataFrame(rows, columns=["state_pos", "family_pos"])
    fam = pd.DataFrame({"family": [f"f{j}" for j in range(n_families)]})
    return obs, fam


def test_statistic_equals_a_direct_computation():
    rng = np.random.default_rng(4)
    # family 3 shares only 10 states with the others: below the 12-state rule, it enters no pair
    drop = {(s, 3) for s in range(10, 30)}
    obs, fam = panel(rng, drop=drop)
    N, D = len(obs), 250
    mu = rng.uniform(0.2, 0.8, (D, N))
    u = rng.uniform(0, 1, N)
    rep = mu + rng.normal(0, 0.1, (D, N))
    summary, pairs = dimensionality_test(u, mu, rep, obs, fam, config(dimensionality={"replicates": 250}))
    assert summary.loc[0, "n_pairs"] == 3 and set(pairs["n_shared_states"]) == {30}

    def cells(j):
        return obs.index[obs.family_pos == j].to_numpy()

    t_real, t_rep = [], []
    for d in range(D):
        r2, q2 = [], []
        for a, b in ((0, 1), (0, 2), (1, 2)):
            ia, ib = cells(a), cells(b)
            r2.append(np.corrcoef(u[ia] - mu[d, ia], u[ib] - mu[d, ib])[0, 1] ** 2)
            q2.append(np.corrcoef(rep[d, ia] - mu[d, ia], rep[d, ib] - mu[d, ib])[0, 1] ** 2)
        t_real.append(np.mean(r2))
        t_rep.append(np.mean(q2))
    assert summary.loc[0, "statistic"] == pytest.approx(np.mean(t_real))
    assert summary.loc[0, "replicate_mean"] == pytest.approx(np.mean(t_rep))
    assert summary.loc[0, "tail_probability"] == pytest.approx(np.mean(np.array(t_rep) >= np.array(t_real)))
    assert summary.loc[0, "n_replicates"] == D


def test_a_shared_second_skill_is_detected():
    rng = np.random.default_rng(5)
    obs, fam = panel(rng, n_states=60, n_families=3)
    N, D = len(obs), 300
    skill = rng.normal(0, 1, 60)
    mu = np.full((D, N), 0.5)
    u = 0.5 + 0.1 * skill[obs.state_pos] * (obs.family_pos < 2) + rng.normal(0, 0.03, N)  # families 0 and 1 share it
    rep = mu + rng.normal(0, 0.05, (D, N))
    summary, pairs = dimensionality_test(u, mu, rep, obs, fam, config(dimensionality={"replicates": 300}))
    assert summary.loc[0, "tail_probability"] < 0.01 and summary.loc[0, "ratio"] > 2
    assert (pairs.loc[0, "family_a"], pairs.loc[0, "family_b"]) == ("f0", "f1")
    assert summary.loc[0, "top_pairs"].startswith("f0 & f1")


def test_replicates_are_thinned_to_the_configured_count():
    rng = np.random.default_rng(6)
    obs, fam = panel(rng, n_states=15, n_families=2)
    mu = rng.uniform(0.3, 0.7, (1000, len(obs)))
    summary, _ = dimensionality_test(rng.uniform(0, 1, len(obs)), mu, mu + rng.normal(0, 0.01, mu.shape), obs, fam,
                                     config(dimensionality={"replicates": 200}))
    assert summary.loc[0, "n_replicates"] == 200
    assert len(shared_pairs(obs, fam, 16)) == 0
