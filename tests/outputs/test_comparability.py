"""Seed 002's ten comparability rules on constructed pairs: one pair per rule, its verdict and its reason;
the harness columns read by their declared role; the leaderboard neighbours."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import pandas as pd
import pytest

from atlas_assets.outputs.comparability import (
    AS_SYSTEMS, CAVEAT, COMPARABLE, NOT_COMPARABLE, Observation, compare, harness_parts, leaderboard_pairs,
    observations_from_rows, verdict_counts,
)
from atlas_assets.outputs.config import load_outputs_config

CFG = load_outputs_config()["comparability"]

BASE = Observation(model="m1", reasoning_state="default", family="gpqa", kind="bounded", units=frozenset({"fraction"}),
                   sources=frozenset({"epoch_hub"}), benchmarks=("gpqa",),
                   settings={"shots": frozenset({"0"}), "protocol": frozenset({"average"})},
                   evaluated_on=date(2026, 3, 1), verification_class="independent")
OTHER = replace(BASE, model="m2")
ELO = replace(BASE, family="arena", kind="rating", units=frozenset({"elo"}), benchmarks=("arena",), settings={},
              sources=frozenset({"epoch_hub"}))

CASES = {
    1: (replace(OTHER, units=frozenset({"percent"})), NOT_COMPARABLE, "metric bounded {fraction} vs bounded {percent}"),
    2: (replace(OTHER, family="mmlu"), NOT_COMPARABLE, "family gpqa vs mmlu"),
    3: (replace(OTHER, agents=frozenset({"OpenHands"})), NOT_COMPARABLE,
        "m2 default on gpqa is an agent system ({OpenHands}), m1 default on gpqa a bare model"),
    6: (replace(OTHER, benchmarks=("gpqa_v2",)), CAVEAT, "benchmarks {gpqa} vs {gpqa_v2}"),
    7: (replace(OTHER, settings={**BASE.settings, "shots": frozenset({"5"})}), CAVEAT, "shots {0} vs {5}"),
    8: (replace(OTHER, verification_class="vendor_reported"), CAVEAT, "verification independent vs vendor_reported"),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_each_rule_on_a_pair_that_differs_in_its_dimension_only(rule):
    other, verdict, reason = CASES[rule]
    got = compare(BASE, other, CFG)
    assert (got.rule, got.verdict, got.also) == (rule, verdict, ())
    assert reason in got.reason


def test_a_setting_recorded_for_one_side_only_is_a_caveat_that_says_so():
    got = compare(BASE, replace(OTHER, settings={"protocol": frozenset({"average"})}), CFG)
    assert (got.rule, got.verdict, got.reason) == (7, CAVEAT, "shots {0} vs not recorded")


def test_elo_rules_pools_and_capture_dates():
    pool = compare(ELO, replace(ELO, model="m2", sources=frozenset({"lmarena"})), CFG)
    assert (pool.rule, pool.verdict) == (4, NOT_COMPARABLE) and "Elo pools {epoch_hub} vs {lmarena}" in pool.reason
    far = compare(ELO, replace(ELO, model="m2", evaluated_on=date(2026, 4, 15)), CFG)
    assert (far.rule, far.verdict) == (5, CAVEAT) and "45 days > 30" in far.reason
    near = compare(ELO, replace(ELO, model="m2", evaluated_on=date(2026, 3, 31)), CFG)
    assert (near.rule, near.verdict) == (10, COMPARABLE)  # 30 days: same pool, not drifted
    undated = compare(ELO, replace(ELO, model="m2", evaluated_on=None), CFG)
    assert undated.rule == 5 and "capture date unknown for m2 default on arena" in undated.reason
    # bounded scores far apart in time are not Elo: rule 5 does not apply to them
    assert compare(BASE, replace(OTHER, evaluated_on=date(2025, 1, 1)), CFG).rule == 10


def test_two_agent_systems_and_the_comparable_pair():
    a = replace(BASE, agents=frozenset({"OpenHands"}))
    systems = compare(a, replace(a, model="m2", agents=frozenset({"SWE-agent"})), CFG)
    assert (systems.rule, systems.verdict) == (9, AS_SYSTEMS) and "agents {OpenHands} vs {SWE-agent}" in systems.reason
    same_agent = compare(a, replace(a, model="m2"), CFG)
    assert (same_agent.rule, same_agent.verdict) == (10, COMPARABLE)
    plain = compare(BASE, OTHER, CFG)
    assert (plain.rule, plain.verdict) == (10, COMPARABLE)
    assert plain.reason == "same family, metric, version, run settings and verification class"


def test_the_first_rule_in_the_seed_order_wins_and_the_others_are_listed():
    other = replace(OTHER, family="mmlu", units=frozenset({"percent"}), verification_class="vendor_reported")
    got = compare(BASE, other, CFG)
    assert (got.rule, got.verdict, got.also) == (1, NOT_COMPARABLE, (2, 8))
    # unverified counts as self-reported, community as external (seed 002's verification boundary)
    assert compare(replace(BASE, verification_class="community"),
                   replace(OTHER, verification_class="unverified"), CFG).rule == 8
    assert compare(replace(BASE, verification_class="community"), OTHER, CFG).rule == 10


def test_harness_parts_follow_the_declared_column_roles():
    columns = ["submission_type", "methodology.tau2_bench_version", "methodology.user_simulator"]
    parts = harness_parts("standard | 1.0.1 | gpt-5.2", columns, CFG["harness_columns"], "tau2/x")
    assert parts == {"agent": {"standard"}, "version": {"1.0.1"}, "setting": {"gpt-5.2"}}
    # an empty part was dropped on ingest: no alignment, the string is a setting, and an agent (the file has one)
    short = harness_parts("standard | 1.0.1", columns, CFG["harness_columns"], "tau2/x")
    assert short == {"agent": {"standard | 1.0.1"}, "version": set(), "setting": {"standard | 1.0.1"}}
    assert harness_parts(None, ["Agent"], CFG["harness_columns"], "f") == {"agent": set(), "version": set(),
                                                                           "setting": set()}
    with pytest.raises(KeyError, match="epoch_hub/new.csv: harness column\\(s\\) \\['Temperature'\\] have no role"):
        harness_parts("0.7", ["Temperature"], CFG["harness_columns"], "epoch_hub/new.csv")


def _row(model, state, family, u, **extra):
    row = {"model": model, "reasoning_state": state, "family": family, "kind": "bounded", "u": u,
           "verification_class": "independent", "selection": "primary", "n_components": 1,
           "released_on": pd.Timestamp("2025-01-01"), "benchmarks": [family], "row_key": f"{model}/{state}/{family}",
           "source": "epoch_hub", "file": "f.csv", "benchmark": family, "score_column": "Score", "harness": None,
           "shots": None, "evaluated_on": pd.NaT, "effective_protocol": "single", "harness_columns": [],
           "unit": "fraction", "benchmark_kind": "bounded"}
    row.update(extra)
    return row


def test_leaderboard_neighbours_overall_and_per_family():
    rows = pd.DataFrame([
        _row("a", "high", "swe", 0.7, harness="OpenHands", harness_columns=["Agent"]),
        _row("a", "high", "gpqa", 0.8),
        _row("b", "default", "swe", 0.6, harness="OpenHands", harness_columns=["Agent"], row_key="b1"),
        _row("b", "default", "swe", 0.62, harness="SWE-agent", harness_columns=["Agent"], row_key="b2"),
        _row("b", "default", "gpqa", 0.7, verification_class="vendor_reported"),
        _row("c", "default", "mmlu", 0.9),
        _row("d", "default", "gpqa", 0.75),  # not eligible: never on a leaderboard
    ])
    observations = observations_from_rows(rows, CFG)
    assert observations[("b", "default", "swe")].agents == frozenset({"OpenHands", "SWE-agent"})
    states = pd.DataFrame({"model": ["a", "b", "c", "d"], "reasoning_state": ["high", "default", "default", "default"],
                           "display_mean": [150.0, 140.0, 130.0, 145.0], "eligible": [True, True, True, False]})
    cells = rows.drop_duplicates(["model", "reasoning_state", "family"])[["model", "reasoning_state", "family", "u"]]
    pairs = leaderboard_pairs(states, observations, cells, CFG)
    overall = pairs[pairs["scope"] == "overall"].set_index(["rank_a", "family_a"])
    assert overall.loc[(1, "gpqa"), "rule"] == 8 and overall.loc[(1, "swe"), "rule"] == 9
    no_common = overall.loc[(2, "{gpqa, swe}")]  # b and c share no family: their families are listed
    assert (no_common["rule"], no_common["family_b"], no_common["n_shared_families"]) == (2, "{mmlu}", 0)
    gpqa = pairs[pairs["scope"] == "family:gpqa"]
    assert list(zip(gpqa["model_a"], gpqa["model_b"])) == [("a", "b")]  # d is not eligible
    counts = verdict_counts(pairs).set_index("rule")
    assert counts.loc[8, "overall"] == 1 and counts.loc[8, "per_family"] == 1 and counts.loc[2, "overall"] == 1
