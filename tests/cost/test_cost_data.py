"""The sampling coordinates build_cost_data chooses (stan/cost.stan; measured on the merged panel: docs/cost.md):
the benchmark whose units the costs are sampled in, which benchmarks are centred, and the run a base is
anchored on. No fit: these are the data's choices, and a wrong one brings back the funnel or the ridge."""

from __future__ import annotations

import pandas as pd

from atlas_assets.cost.config import load_cost_config
from atlas_assets.cost.data import build_cost_data
from tests.cost.simulate import REFERENCE, simulate


def _cfg(min_runs: int = 10) -> dict:
    return load_cost_config(overrides={"reference": {"model": REFERENCE[0], "reasoning_state": REFERENCE[1]},
                                       "parametrization": {"benchmark_centred_min_runs": min_runs}})


def _thin(obs: pd.DataFrame, bench: str, keep_runs: int) -> pd.DataFrame:
    """`obs` with only the first `keep_runs` runs (by id) of `bench` (the reference state's kept)."""
    runs = sorted(obs.loc[obs.benchmark == bench, "run_id"].unique())
    ref = obs.model.eq(REFERENCE[0]) & obs.reasoning_state.eq(REFERENCE[1])
    drop = obs.benchmark.eq(bench) & ~obs.run_id.isin(runs[:keep_runs]) & ~ref
    return obs.loc[~drop]


def test_costs_are_sampled_in_the_units_of_the_best_measured_benchmark():
    obs = simulate().observations
    ci = build_cost_data(obs, _cfg())
    runs = ci.benchmarks.set_index("benchmark").n_runs
    assert ci.benchmarks.benchmark[ci.data["scale_bench"] - 1] == runs.idxmax()
    # thin out that benchmark: the scale moves to the next best-measured one
    thinned = build_cost_data(_thin(obs, runs.idxmax(), 3), _cfg())
    runs_after = thinned.benchmarks.set_index("benchmark").n_runs
    assert thinned.benchmarks.benchmark[thinned.data["scale_bench"] - 1] == runs_after.idxmax() != runs.idxmax()


def test_thin_benchmarks_are_non_centred_rich_ones_centred():
    obs = _thin(simulate().observations, "b_suite2", 4)
    ci = build_cost_data(obs, _cfg(10))
    centred = dict(zip(ci.benchmarks.benchmark, ci.data["bench_centred"]))
    runs = dict(zip(ci.benchmarks.benchmark, ci.benchmarks.n_runs))
    assert runs["b_suite2"] < 10 and centred["b_suite2"] == 0
    assert all(centred[b] == 1 for b, n in runs.items() if n >= 10)
    assert set(build_cost_data(obs, _cfg(0)).data["bench_centred"]) == {1}


def test_a_base_is_anchored_on_its_best_measured_states_run_on_the_best_measured_benchmark():
    obs = simulate().observations
    ci = build_cost_data(obs, _cfg())
    d, states, o = ci.data, ci.states, ci.observations
    bench_runs = ci.benchmarks.sort_values("bench_pos").n_runs.to_numpy()
    checked = off_pin = 0
    for k, m in enumerate(d["free_model"] - 1):
        if d["anchored"][k] < 0.5:
            continue
        s_ = int(d["anchor_state"][k]) - 1
        mine_states = states.loc[states.model_pos == m]
        assert states.model_pos[s_] == m
        # the model's state with the most runs; on a tie its pinned state
        assert states.n_runs[s_] == mine_states.n_runs.max()
        if states.pinned[mine_states.loc[mine_states.n_runs == mine_states.n_runs.max()].index].any():
            assert states.pinned[s_]
        off_pin += not states.pinned[s_]
        mine = o.loc[o.state_pos == s_]
        assert bench_runs[d["anchor_bench"][k] - 1] == bench_runs[mine.bench_pos.unique()].max()
        checked += mine.bench_pos.nunique() > 1
        # the anchor's figure is the weighted mean of that run's rows
        run = mine.loc[mine.bench_pos == d["anchor_bench"][k] - 1]
        run = run.loc[run.run_id == sorted(run.run_id.unique())[0]]
        assert abs(d["anchor_y"][k] - (run.weight * run.log10_usd).sum() / run.weight.sum()) < 1e-12
    assert checked >= 5  # anchor states run on several benchmarks, where the choice matters
    assert off_pin >= 3  # models whose pinned state is not their best measured: anchored on another state
