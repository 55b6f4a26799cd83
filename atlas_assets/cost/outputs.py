"""The published cost tables, pure functions of posterior draws (tested on hand-made draws).

- `cost_index_table`: per state of the cost fit, the relative cost 10 ^ state_cost (x GPT-5 high's cost; median
  and central interval) and typical dollars per task on each configured workload:
  10 ^ mean over the workload's benchmarks in the fit of (bench_ref_j + lambda_j state_cost_s), without any
  harness offset (what those benchmarks' evaluators would report for a run in their standard setup).
- `frontier_table`: states both fits know (rank-eligible in the capability fit), whether each is
  Pareto-optimal on the posterior medians (no other state at least as capable and at most as costly, better
  in one), and P(on the frontier) over paired draws of the two posteriors (independent fits: draw k of one is
  paired with a random draw of the other, so the pairs are draws of the joint).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd

from atlas_assets.cost.data import CostInput


def _quantiles(draws: np.ndarray, interval: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = (1 - interval) / 2
    lo, med, hi = np.quantile(draws, [a, 0.5, 1 - a], axis=0)
    return med, lo, hi


def workload_log10_usd(state_cost: np.ndarray, bench_ref: np.ndarray, lam: np.ndarray,
                       positions: list[int]) -> np.ndarray:
    """(D, S) log10 dollars per task averaged over the workload's benchmark positions."""
    if not positions:
        return np.full(state_cost.shape, np.nan)
    per_bench = bench_ref[:, positions, None] + lam[:, positions, None] * state_cost[:, None, :]
    return per_bench.mean(axis=1)


def cost_index_table(ci: CostInput, state_cost: np.ndarray, bench_ref: np.ndarray, lam: np.ndarray,
                     cfg: Mapping[str, Any]) -> tuple[pd.DataFrame, dict[str, dict[str, list[str]]]]:
    """(table, workloads: name -> {used: [...], absent: [...]}). Draw arrays are (D, S) and (D, J)."""
    interval = float(cfg["outputs"]["interval"])
    states = ci.states.sort_values("state_pos")
    runs = ci.observations.groupby("state_pos").agg(
        n_runs=("run_id", "nunique"), n_rows=("run_id", "size"),
        benchmarks=("benchmark", lambda b: ", ".join(sorted(set(b)))),
        harnessed_runs=("harnessed", "sum"))
    med, lo, hi = _quantiles(state_cost, interval)
    table = pd.DataFrame({
        "model": states.model.to_numpy(), "reasoning_state": states.reasoning_state.to_numpy(),
        "is_reference": states.is_reference.to_numpy(), "pinned": states.pinned.to_numpy(),
        "log10_cost_median": med, "log10_cost_lower": lo, "log10_cost_upper": hi,
        "cost_index_median": 10 ** med, "cost_index_lower": 10 ** lo, "cost_index_upper": 10 ** hi,
        "p_cheaper_than_reference": (state_cost < 0).mean(axis=0),
    })
    joined = runs.reindex(states.state_pos.to_numpy())
    for column in ("n_runs", "n_rows", "harnessed_runs"):
        table[column] = joined[column].fillna(0).astype(int).to_numpy()
    table["benchmarks"] = joined["benchmarks"].fillna("").to_numpy()
    positions = dict(zip(ci.benchmarks.benchmark, ci.benchmarks.bench_pos))
    workloads: dict[str, dict[str, list[str]]] = {}
    for name, benchmarks in cfg["outputs"]["workloads"].items():
        used = [b for b in benchmarks if b in positions]
        workloads[name] = {"used": used, "absent": [b for b in benchmarks if b not in positions]}
        if used:
            logs = workload_log10_usd(state_cost, bench_ref, lam, [int(positions[b]) for b in used])
            wm, wl, wh = (10 ** q for q in _quantiles(logs, interval))
        else:  # none of the workload's benchmarks has costs: no figure (WARN check cost_workloads_covered)
            wm = wl = wh = np.full(len(table), np.nan)
        table[f"usd_{name}_median"], table[f"usd_{name}_lower"], table[f"usd_{name}_upper"] = wm, wl, wh
        table[f"usd_{name}_benchmarks"] = ", ".join(used)
    table["interval"] = interval
    return table.sort_values(["log10_cost_median", "model", "reasoning_state"]).reset_index(drop=True), workloads


def on_frontier(capability: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """(..., K) booleans: no other state is at least as capable and at most as costly, and better in one."""
    cap_t, cap_s = capability[..., :, None], capability[..., None, :]
    cost_t, cost_s = cost[..., :, None], cost[..., None, :]
    dominates = (cap_t >= cap_s) & (cost_t <= cost_s) & ((cap_t > cap_s) | (cost_t < cost_s))
    return ~dominates.any(axis=-2)


def frontier_table(capability_states: pd.DataFrame, capability_draws: np.ndarray, ci: CostInput,
                   state_cost: np.ndarray, cfg: Mapping[str, Any]) -> pd.DataFrame:
    """capability_states: model, reasoning_state, draw column position `cap_pos` of capability_draws (D1, *)
    on the display scale, already restricted to rank-eligible states; state_cost (D2, S) of the cost fit."""
    interval = float(cfg["outputs"]["interval"])
    fcfg = cfg["outputs"]["frontier"]
    states = ci.states[["model", "reasoning_state", "state_pos"]]
    both = capability_states.merge(states, on=["model", "reasoning_state"], how="inner")
    columns = ["model", "reasoning_state", "capability_median", "capability_lower", "capability_upper",
               "cost_index_median", "cost_index_lower", "cost_index_upper", "pareto_optimal", "p_frontier", "n_draws"]
    if both.empty:
        return pd.DataFrame(columns=columns)
    rng = np.random.default_rng(int(fcfg["seed"]))
    n = min(int(fcfg["max_draws"]), capability_draws.shape[0], state_cost.shape[0])
    cap_rows = np.unique(np.linspace(0, capability_draws.shape[0] - 1, n).round().astype(int))
    n = len(cap_rows)
    cost_rows = rng.permutation(np.unique(np.linspace(0, state_cost.shape[0] - 1, n).round().astype(int)))[:n]
    if len(cost_rows) < n:
        cost_rows = rng.choice(state_cost.shape[0], size=n, replace=True)
    cap = capability_draws[np.ix_(cap_rows, both.cap_pos.to_numpy(int))]
    cost = state_cost[np.ix_(cost_rows, both.state_pos.to_numpy(int))]
    cap_med, cap_lo, cap_hi = _quantiles(capability_draws[:, both.cap_pos.to_numpy(int)], interval)
    cost_med, cost_lo, cost_hi = _quantiles(state_cost[:, both.state_pos.to_numpy(int)], interval)
    out = pd.DataFrame({
        "model": both.model, "reasoning_state": both.reasoning_state,
        "capability_median": cap_med, "capability_lower": cap_lo, "capability_upper": cap_hi,
        "cost_index_median": 10 ** cost_med, "cost_index_lower": 10 ** cost_lo, "cost_index_upper": 10 ** cost_hi,
        "pareto_optimal": on_frontier(cap_med, cost_med),
        "p_frontier": on_frontier(cap, cost).mean(axis=0),
        "n_draws": n,
    })
    return out.sort_values(["cost_index_median", "model", "reasoning_state"]).reset_index(drop=True)[columns]
