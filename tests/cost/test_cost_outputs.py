"""The cost tables on hand-made draws: cost index, workload dollars, Pareto frontier and its probability."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlas_assets.cost.config import load_cost_config
from atlas_assets.cost.data import build_cost_data
from atlas_assets.cost.outputs import cost_index_table, frontier_table, on_frontier


def _obs():
    rows = []
    for model, state, bench, y in [("ref", "high", "b1", -1.0), ("ref", "high", "b2", 0.0), ("cheap", "default", "b1", -2.0),
                                   ("dear", "default", "b2", 1.0)]:
        rows.append({"row_key": f"{model}{bench}", "model": model, "reasoning_state": state, "benchmark": bench,
                     "suite": bench, "evaluator": "e", "harnessed": False, "log10_usd": y, "weight": 1.0,
                     "run_id": f"{model}|{bench}"})
    return pd.DataFrame(rows)


@pytest.fixture
def cfg():
    return load_cost_config(overrides={"reference": {"model": "ref", "reasoning_state": "high"},
                                       "outputs": {"workloads": {"short_answer": ["aider_polyglot"]}}})


def test_on_frontier_is_pareto_optimality():
    cap = np.array([1.0, 2.0, 3.0, 2.0])
    cost = np.array([0.0, 1.0, 2.0, 1.5])   # state 4: less capable than 3 and dearer than 2 -> dominated
    assert on_frontier(cap, cost).tolist() == [True, True, True, False]
    assert on_frontier(np.array([1.0, 1.0]), np.array([0.0, 0.0])).tolist() == [True, True]  # ties dominate nobody


def test_cost_index_and_workload_dollars(cfg):
    ci = build_cost_data(_obs(), cfg)
    labels = ci.coords()["state"]
    D = 4
    truth = {"ref|high": 0.0, "cheap|default": -1.0, "dear|default": 0.5}
    state_cost = np.tile([truth[l] for l in labels], (D, 1)) + np.linspace(-0.1, 0.1, D)[:, None] * (
        np.array([l != "ref|high" for l in labels]))
    benches = ci.coords()["benchmark"]
    bench_ref = np.tile([{"b1": -1.0, "b2": 0.0}[b] for b in benches], (D, 1))
    lam = np.tile([{"b1": 2.0, "b2": 0.5}[b] for b in benches], (D, 1))
    cfg["outputs"]["workloads"] = {"one": ["b1"], "both": ["b1", "b2"], "none": ["b9"]}
    table, workloads = cost_index_table(ci, state_cost, bench_ref, lam, cfg)
    row = table.set_index(["model", "reasoning_state"])
    assert row.loc[("ref", "high"), "cost_index_median"] == pytest.approx(1.0)
    assert row.loc[("cheap", "default"), "cost_index_median"] == pytest.approx(0.1)
    # 10 ^ (b1 ref + lambda x cost): cheap on b1 = 10 ^ (-1 + 2 x -1) = $0.001 per task
    assert row.loc[("cheap", "default"), "usd_one_median"] == pytest.approx(1e-3)
    # both: 10 ^ mean(-1 + 2c, 0 + 0.5c); dear c = 0.5 -> 10 ^ mean(0, 0.25)
    assert row.loc[("dear", "default"), "usd_both_median"] == pytest.approx(10 ** 0.125)
    assert np.isnan(row.loc[("dear", "default"), "usd_none_median"])
    assert workloads["none"] == {"used": [], "absent": ["b9"]}
    assert table.cost_index_lower.le(table.cost_index_median).all() and table.cost_index_median.le(table.cost_index_upper).all()
    assert list(table.model) == ["cheap", "ref", "dear"]


def test_frontier_probability_from_paired_draws(cfg):
    ci = build_cost_data(_obs(), cfg)
    labels = ci.coords()["state"]
    pos = {l: k for k, l in enumerate(labels)}
    D = 1000
    rng = np.random.default_rng(0)
    # capability: ref 150 sure; cheap ~ N(145, 10), the cheapest: it dominates ref whenever it is above 150
    # (P = 0.31); dear ~ N(150, 5): on the frontier only when above both others
    cheap_cap, dear_cap = rng.normal(145, 10, D), rng.normal(150, 5, D)
    cap = np.column_stack([np.full(D, 150.0), cheap_cap, dear_cap])
    cap_states = pd.DataFrame({"model": ["ref", "cheap", "dear"], "reasoning_state": ["high", "default", "default"],
                               "cap_pos": [0, 1, 2]})
    cost = np.zeros((D, len(labels)))
    cost[:, pos["cheap|default"]] = -1.0
    cost[:, pos["dear|default"]] = 0.5
    out = frontier_table(cap_states, cap, ci, cost, cfg).set_index("model")
    assert out.loc["cheap", "p_frontier"] == 1.0 and out.loc["cheap", "pareto_optimal"]
    assert out.loc["ref", "p_frontier"] == pytest.approx(0.69, abs=0.05)
    # dear: P(dear > 150 and dear > cheap), over draws paired at random (independent posteriors)
    expected = np.mean((rng.normal(150, 5, 200_000) > np.maximum(150, rng.normal(145, 10, 200_000))))
    assert out.loc["dear", "p_frontier"] == pytest.approx(expected, abs=0.05)
    # a state the capability fit does not know is not on the frontier table
    assert set(out.index) == {"ref", "cheap", "dear"}
    out2 = frontier_table(cap_states.iloc[:2], cap, ci, cost, cfg)
    assert set(out2.model) == {"ref", "cheap"} and out2.pareto_optimal.all()
