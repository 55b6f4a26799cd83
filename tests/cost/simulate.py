"""A simulated cost panel whose truth is drawn here, in numpy, from the model's description (seed 001, "How cost
is estimated"), independently of stan/cost.stan and of atlas_assets/cost/data.py.

Per benchmark j: a reference cost r_j and a spread lambda_j (log spreads summing to zero); per model m a base
cost; per setting a typical effect (low < medium < high on the ladder, default 0, "disabled" off it); per
non-pinned state a deviation; per harnessed state an offset; per evaluator a noise scale. A run of state s on
benchmark j costs 10 ^ (r_j + lambda_j (c_s + h) + sigma_e t_4), and some runs are reported several times
(weight 1 / rows). The truth returned is in the model's identified form: every state cost measured from the
reference state, the reference state's cost folded into the benchmark levels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

LADDER_TRUTH = {"low": -0.35, "medium": 0.0, "high": 0.3}   # relative to default = 0
OFF_TRUTH = {"disabled": -0.45}
BENCHMARKS = [("b_short", "s_short", "ev_a"), ("b_suite1", "s_pair", "ev_a"), ("b_suite2", "s_pair", "ev_b"),
              ("b_agent", "s_agent", "ev_b"), ("b_loop", "s_loop", "ev_c")]
REFERENCE = ("ref-model", "high")


@dataclass
class CostTruth:
    observations: pd.DataFrame
    state_cost: pd.Series       # index "model|state", measured from the reference state
    bench_ref: pd.Series        # index benchmark, the reference state's log10 cost there
    log_lambda: pd.Series
    sigma: pd.Series
    ladder: dict[str, float]


def simulate(n_models: int = 45, seed: int = 3) -> CostTruth:
    rng = np.random.default_rng(seed)
    names = [b for b, _, _ in BENCHMARKS]
    ref = pd.Series(rng.normal(-1.0, 0.6, len(names)), index=names)
    loglam = rng.normal(0.0, 0.3, len(names))
    loglam = pd.Series(loglam - loglam.mean(), index=names)
    sigma = pd.Series({"ev_a": 0.07, "ev_b": 0.15, "ev_c": 0.25})
    harness_sd = 0.3
    models = [REFERENCE[0]] + [f"m{k:02d}" for k in range(1, n_models)]
    rows, truth_cost = [], {}
    for m in models:
        base = rng.normal(-0.3, 0.5)
        if m == REFERENCE[0]:
            settings = ["low", "medium", "high"]
        else:
            pool = ["default", "low", "medium", "high", "disabled"]
            settings = list(rng.choice(pool, size=int(rng.integers(1, 4)), replace=False))
        pinned = "default" if "default" in settings else None
        for r in settings:
            effect = 0.0 if r == "default" else LADDER_TRUTH.get(r, OFF_TRUTH.get(r))
            # the pinned state is chosen by the code under test; the truth gives every state a deviation
            # except a default one (whichever is pinned, the deviations are small next to the rest)
            dev = 0.0 if r == pinned else rng.normal(0, 0.08)
            cost = base + effect + dev
            truth_cost[f"{m}|{r}"] = cost
            harnessed_state = rng.random() < 0.2
            offset = rng.normal(0, harness_sd) if harnessed_state else 0.0
            n_runs = 3 if m == REFERENCE[0] else int(rng.integers(1, 4))
            for j in rng.choice(len(names), size=n_runs, replace=False):
                bench, suite, evaluator = BENCHMARKS[j]
                harnessed = bool(harnessed_state and rng.random() < 0.7)
                mu = ref[bench] + np.exp(loglam[bench]) * (cost + (offset if harnessed else 0.0))
                y = mu + sigma[evaluator] * rng.standard_t(4)
                copies = int(rng.choice([1, 1, 2, 3]))
                run_id = f"{m}|{r}|{bench}|{int(harnessed)}"
                for c in range(copies):
                    # copies of one run: the same figure, a copy rounded (as a re-publisher prints it)
                    usd = 10 ** y if c == 0 else float(f"{10 ** y:.2g}")
                    rows.append({"row_key": f"{run_id}#{c}", "model": m, "reasoning_state": r, "benchmark": bench,
                                 "suite": suite, "evaluator": evaluator, "harnessed": harnessed,
                                 "log10_usd": np.log10(usd), "weight": 1.0 / copies, "run_id": run_id})
    obs = pd.DataFrame(rows)
    state_cost = pd.Series(truth_cost)
    c_ref = state_cost[f"{REFERENCE[0]}|{REFERENCE[1]}"]
    return CostTruth(
        observations=obs,
        state_cost=state_cost - c_ref,
        bench_ref=ref + np.exp(loglam) * c_ref,
        log_lambda=loglam,
        sigma=sigma,
        ladder={k: v for k, v in LADDER_TRUTH.items()},
    )
