"""The held-out check's bookkeeping (atlas_assets/cost/heldout.py), without a fit: whole runs go to one fold, the
reference state's runs are never held out, and coverage counts each run once whatever its rows."""

from __future__ import annotations

import numpy as np
import pandas as pd

from atlas_assets.cost.heldout import _weighted_coverage, assign_folds, drop_runs

CFG = {"reference": {"model": "ref", "reasoning_state": "high"}}


def test_folds_keep_runs_whole_and_never_hold_out_the_reference():
    obs = pd.DataFrame({"model": ["ref", "ref"] + ["m"] * 40, "reasoning_state": ["high"] * 2 + ["default"] * 40,
                        "run_id": ["r0", "r0"] + [f"run{k // 2}" for k in range(40)]})
    folds = assign_folds(obs, CFG, folds=5, seed=3)
    assert list(folds[:2]) == [-1, -1]
    assert obs.assign(fold=folds).groupby("run_id").fold.nunique().max() == 1
    assert sorted(folds[2:].unique()) == [0, 1, 2, 3, 4]
    assert folds.equals(assign_folds(obs, CFG, folds=5, seed=3))  # seeded


def test_coverage_counts_a_run_once_however_many_rows_report_it():
    y = np.array([0.0, 0.0, 0.0, 0.0, 5.0])        # a 4-row run inside, a 1-row run outside its interval
    lower, upper = np.full(5, -1.0), np.full(5, 1.0)
    weight = np.array([0.25, 0.25, 0.25, 0.25, 1.0])
    assert _weighted_coverage(y, lower, upper, weight) == 0.5


def test_a_simulated_refresh_drops_whole_runs_never_the_reference_and_is_seeded():
    # 20 two-row runs (weights 1/2) and the reference state's run: 10% of the 20 others is 2 whole runs
    obs = pd.DataFrame({"model": ["ref", "ref"] + ["m"] * 40, "reasoning_state": ["high"] * 2 + ["default"] * 40,
                        "run_id": ["r0", "r0"] + [f"run{k // 2}" for k in range(40)], "weight": 0.5})
    kept = drop_runs(obs, CFG, 0.1, seed=5)
    assert obs.run_id.nunique() - kept.run_id.nunique() == 2
    assert len(obs) - len(kept) == 4                                  # both rows of each dropped run
    assert kept.groupby("run_id").weight.sum().eq(1.0).all()          # every run left still counts once
    assert (kept.run_id == "r0").sum() == 2                           # the reference state is never dropped
    assert kept.equals(drop_runs(obs, CFG, 0.1, seed=5))
    assert not kept.equals(drop_runs(obs, CFG, 0.1, seed=6))
