"""Parameter recovery of stan/cost.stan on a panel simulated independently of it (tests/cost/simulate.py).

One fit (CmdStanPy where CmdStan is set up, else PyStan; compiled once per source, cached) of ~45 models,
~90 states, 5 benchmarks (two of them one suite), 3 evaluators with Student-t noise, harnessed runs and
runs reported up to three times. It fails when the program is wrong: state costs measured from the wrong
state, spreads not applied or not summing to zero, the ladder unordered, copies counted as runs.
"""

from __future__ import annotations

import numpy as np
import pytest

from atlas_assets.cost.config import load_cost_config
from atlas_assets.cost.data import build_cost_data
from atlas_assets.cost.fit import cost_diagnostics, sample_cost_posterior
from atlas_assets.model.scores import draws_of
from tests.cost.simulate import REFERENCE, simulate


@pytest.fixture(scope="module")
def recovered():
    truth = simulate()
    cfg = load_cost_config(overrides={"reference": {"model": REFERENCE[0], "reasoning_state": REFERENCE[1]}})
    ci = build_cost_data(truth.observations, cfg)
    res = sample_cost_posterior(ci, cfg, sampler={"chains": 4, "warmup": 300, "draws": 300, "seed": 7})
    return truth, ci, res


def _interval_hits(draws: np.ndarray, truth: np.ndarray, level: float = 0.9) -> np.ndarray:
    a = (1 - level) / 2
    lo, hi = np.quantile(draws, [a, 1 - a], axis=0)
    return (truth >= lo) & (truth <= hi)


def test_the_fit_converges(recovered):
    truth, ci, res = recovered
    diag = cost_diagnostics(res.idata, ci, load_cost_config())
    assert diag["divergences"] == 0
    assert diag["max_rhat"] < 1.02, diag["worst_rhat"]
    assert diag["min_ess_bulk"] > 150, diag["worst_ess_bulk"]


def test_state_costs_are_recovered_and_the_reference_is_exactly_zero(recovered):
    truth, ci, res = recovered
    labels = ci.coords()["state"]
    draws = draws_of(res.idata, "state_cost")
    ref = labels.index(f"{REFERENCE[0]}|{REFERENCE[1]}")
    assert np.all(draws[:, ref] == 0.0)  # by construction, in every draw
    free = [k for k in range(len(labels)) if k != ref]
    true = truth.state_cost[[labels[k] for k in free]].to_numpy()
    post = draws[:, free]
    assert np.corrcoef(post.mean(axis=0), true)[0, 1] > 0.97
    coverage = _interval_hits(post, true).mean()
    assert 0.8 <= coverage <= 0.99, coverage  # nominal 0.9 over ~90 states
    assert np.sqrt(np.mean((post.mean(axis=0) - true) ** 2)) < 0.12


def test_benchmark_levels_spreads_and_noise_are_recovered(recovered):
    truth, ci, res = recovered
    benches = ci.coords()["benchmark"]
    loglam = draws_of(res.idata, "log_lambda")
    np.testing.assert_allclose(loglam.sum(axis=1), 0.0, atol=1e-9)
    assert _interval_hits(loglam, truth.log_lambda[benches].to_numpy()).sum() >= 4
    assert np.corrcoef(loglam.mean(axis=0), truth.log_lambda[benches])[0, 1] > 0.9
    ref = draws_of(res.idata, "bench_ref")
    assert _interval_hits(ref, truth.bench_ref[benches].to_numpy()).sum() >= 4
    assert np.max(np.abs(ref.mean(axis=0) - truth.bench_ref[benches].to_numpy())) < 0.15
    sigma = draws_of(res.idata, "sigma")
    evaluators = ci.coords()["evaluator"]
    means = sigma.mean(axis=0)
    assert list(np.argsort(means)) == list(np.argsort(truth.sigma[evaluators].to_numpy()))  # 0.07 < 0.15 < 0.25


def test_the_effort_ladder_rises_and_is_recovered(recovered):
    truth, ci, res = recovered
    ladder = draws_of(res.idata, "ladder_effect")
    assert ci.settings["ladder"] == ["low", "medium", "high"]
    assert np.all(np.diff(ladder, axis=1) > 0)  # ordered in every draw
    true = np.array([truth.ladder[s] for s in ci.settings["ladder"]])
    # the steps along the ladder are seen within every model with two settings: tight and covered
    steps, true_steps = ladder[:, 1:] - ladder[:, [0]], true[1:] - true[0]
    assert _interval_hits(steps, true_steps).all(), (steps.mean(axis=0), true_steps)
    assert np.max(np.abs(steps.mean(axis=0) - true_steps)) < 0.1
    # the level against "default" rests on the few models with a default state: looser
    assert np.max(np.abs(ladder.mean(axis=0) - true)) < 0.2
