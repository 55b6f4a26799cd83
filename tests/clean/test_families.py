"""Stage 5 (sql/05_family_observations.sql): scaling and family aggregation, one test per rule."""

import pytest

from .fixtures import LOOSE, Panel, exclusions, table


def run(panel: Panel, config=LOOSE):
    return panel.run(config, until="family_observations")


def obs(conn):
    return table(
        conn,
        "SELECT model, family, kind, round(u, 6), correct, items, round(floor, 6), n_components "
        "FROM family_observations ORDER BY model, family",
    )


def test_bounded_score_goes_on_the_declared_range_and_keeps_whole_items():
    p = Panel().benchmark("gpqa", range_max=100.0, unit="percent", items=198, floor=0.25).model("a").model("b")
    p.score("a", "gpqa", 95.45)
    p.score("b", "gpqa", 50.0)
    assert obs(run(p)) == [("a", "gpqa", "bounded", 0.9545, 189, 198, 0.25, 1), ("b", "gpqa", "bounded", 0.5, 99, 198, 0.25, 1)]


def test_ratings_are_standardized_within_the_family():
    p = Panel().benchmark("arena", kind="rating", range_min=None, range_max=None, unit="elo")
    for m, s in zip("abc", (1000.0, 1100.0, 1200.0)):
        p.model(m).score(m, "arena", s)
    assert obs(run(p)) == [
        ("a", "arena", "rating", -1.0, None, None, 0.0, 1),
        ("b", "arena", "rating", 0.0, None, None, 0.0, 1),
        ("c", "arena", "rating", 1.0, None, None, 0.0, 1),
    ]


def family_panel():
    # family "swe": primary "verified" (models a, b, c), components "lite" and "multi" (a..e)
    p = Panel()
    p.benchmark("verified", family="swe", role="primary", items=500)
    p.benchmark("lite", family="swe", role="component", items=300, floor=0.1)
    p.benchmark("multi", family="swe", role="component", floor=0.3)
    for i, m in enumerate("abcde"):
        p.model(m)
        if m in "abc":
            p.score(m, "verified", 0.5 + 0.1 * i)
        p.score(m, "lite", 0.2 + 0.1 * i)
        if m != "e":
            p.score(m, "multi", 0.4 + 0.1 * i)
    return p


def test_family_uses_its_primary_when_the_primary_alone_is_covered():
    conn = run(family_panel(), LOOSE.replace(primary_min_models=3, primary_min_share=0.5))
    assert obs(conn) == [
        ("a", "swe", "bounded", 0.5, 250, 500, 0.0, 1),
        ("b", "swe", "bounded", 0.6, 300, 500, 0.0, 1),
        ("c", "swe", "bounded", 0.7, 350, 500, 0.0, 1),
    ]
    dropped = exclusions(conn, "family_observations")
    assert len(dropped) == 9 and set(dropped.values()) == {"family_uses_primary"}


@pytest.mark.parametrize("config", [LOOSE.replace(primary_min_models=4), LOOSE.replace(primary_min_models=3, primary_min_share=0.8)])
def test_an_under_covered_primary_gives_way_to_the_single_best_covered_component(config):
    # issue 7 item 8: the family's column means one benchmark for every state. "lite" (5 models)
    # is better covered than "multi" (4): every state gets lite's u, its whole items and its
    # floor; no state gets an average of whatever subset of components it happens to have
    conn = run(family_panel(), config)
    assert obs(conn) == [
        ("a", "swe", "bounded", 0.2, 60, 300, 0.1, 1),
        ("b", "swe", "bounded", 0.3, 90, 300, 0.1, 1),
        ("c", "swe", "bounded", 0.4, 120, 300, 0.1, 1),
        ("d", "swe", "bounded", 0.5, 150, 300, 0.1, 1),
        ("e", "swe", "bounded", 0.6, 180, 300, 0.1, 1),
    ]
    assert table(conn, "SELECT DISTINCT selection, benchmarks FROM family_observations") == [("component", ["lite"])]
    dropped = exclusions(conn, "family_observations")
    assert dropped == {
        **{f"{m} / default :: verified": "primary_under_covered" for m in "abc"},
        **{f"{m} / default :: multi": "family_uses_component" for m in "abcd"},
    }


def test_the_primary_stays_when_no_component_is_better_covered():
    # the primary misses the bar (3 < 4 models) but each component covers only 2 models:
    # the best covered single benchmark is the primary itself
    p = Panel().benchmark("prim", family="f", role="primary").benchmark("c1", family="f", role="component")
    p.benchmark("c2", family="f", role="component")
    for m, s in zip("abc", (0.3, 0.5, 0.7)):
        p.model(m).score(m, "prim", s)
    p.model("d").model("e")
    for m, bench, score in (("a", "c1", 0.4), ("d", "c1", 0.6), ("b", "c2", 0.4), ("e", "c2", 0.6)):
        p.score(m, bench, score)
    conn = run(p, LOOSE.replace(primary_min_models=4))
    assert [row[:4] for row in obs(conn)] == [("a", "f", "bounded", 0.3), ("b", "f", "bounded", 0.5), ("c", "f", "bounded", 0.7)]
    assert set(exclusions(conn, "family_observations").values()) == {"family_uses_primary"}


def test_a_conflicted_component_is_not_refilled_from_another_benchmark():
    # issue 7 item 7: state "a" has an irreconcilable conflict on the family's selected component
    # "lite"; its "multi" score must not stand in for it. The state's family cell is dropped and
    # its remaining rows are charged to the conflict.
    p = family_panel()
    p.score("a", "lite", 0.9)  # 0.2 and 0.9 on one configuration: unresolved conflict
    conn = run(p, LOOSE.replace(primary_min_models=4))
    assert "a" not in {row[0] for row in obs(conn)}
    assert {row[0] for row in obs(conn)} == set("bcde")
    dropped = exclusions(conn, "family_observations")
    assert dropped["a / default :: multi"] == "conflict_blocks_family"
    assert dropped["a / default :: verified"] == "conflict_blocks_family"
    values = table(conn, "SELECT \"values\"->>'conflicted_benchmark' FROM audit_exclusions WHERE subject = 'a / default :: multi'")
    assert values == [("lite",)]


def test_a_family_with_only_a_primary_uses_it_however_covered():
    p = Panel().benchmark("solo", role="primary").model("a")
    p.score("a", "solo", 0.5)
    p.model("b").score("b", "solo", 0.6)
    conn = run(p, LOOSE.replace(primary_min_models=10))
    assert [row[:4] for row in obs(conn)] == [("a", "solo", "bounded", 0.5), ("b", "solo", "bounded", 0.6)]


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"role": "diagnostic"}, "diagnostic_role"),
        ({"is_safety": True}, "safety_benchmark"),
        ({"is_composite": True}, "composite_index"),
        ({"kind": "unbounded", "range_min": None, "range_max": None, "unit": "minutes"}, "unbounded_kind"),
    ],
)
def test_benchmarks_that_never_enter_a_family(values, reason):
    p = Panel().benchmark("x", **values).model("a").model("b")
    p.score("a", "x", 0.4)
    p.score("b", "x", 0.6)
    if reason == "composite_index":  # stage 1 catches it first; stage 5 repeats the rule for safety
        conn = p.run(LOOSE, until="pooled_states")
        assert table(conn, "SELECT count(*) FROM pooled_states") == [(0,)]
        return
    conn = run(p)
    assert obs(conn) == []
    assert set(exclusions(conn, "family_observations").values()) == {reason}


def test_benchmark_whose_scores_never_vary_is_dropped():
    p = Panel().benchmark("flat").benchmark("live").model("a").model("b")
    for m in "ab":
        p.score(m, "flat", 0.9)
    p.score("a", "live", 0.4)
    p.score("b", "live", 0.6)
    conn = run(p)
    assert {row[1] for row in obs(conn)} == {"live"}
    assert exclusions(conn, "family_observations") == {
        "a / default :: flat": "benchmark_constant", "b / default :: flat": "benchmark_constant"
    }


def test_a_family_mixing_bounded_and_rating_benchmarks_is_excluded():
    p = Panel().benchmark("b1", family="mix", role="component").model("a").model("b")
    p.benchmark("r1", family="mix", role="component", kind="rating", range_min=None, range_max=None)
    for m, s in (("a", 0.4), ("b", 0.6)):
        p.score(m, "b1", s)
        p.score(m, "r1", 1000 + 100 * s)
    conn = run(p)
    assert obs(conn) == []
    assert set(exclusions(conn, "family_observations").values()) == {"family_mixed_kinds"}
