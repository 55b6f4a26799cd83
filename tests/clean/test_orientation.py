"""Stage 1 (sql/01_oriented_scores.sql): one test per rule."""

import pytest

from .fixtures import Panel, exclusions, table


def run(panel: Panel):
    return panel.run(until="oriented_scores")


def test_higher_is_better_passes_unchanged():
    p = Panel().benchmark("gpqa")
    key = p.score("a", "gpqa", 0.61)
    conn = run(p)
    assert table(conn, "SELECT row_key, score, score_published FROM oriented_scores") == [(key, 0.61, 0.61)]


def test_lower_is_better_is_reflected_on_the_declared_range():
    p = Panel().benchmark("err", direction="lower", range_min=0.0, range_max=100.0, unit="percent")
    key = p.score("a", "err", 20.0)
    conn = run(p)
    assert table(conn, "SELECT row_key, score, score_published, direction FROM oriented_scores") == [
        (key, 80.0, 20.0, "lower")
    ]


@pytest.mark.parametrize(
    ("direction", "reason"),
    [("zero_best", "direction_zero_best"), ("target", "direction_target"), ("custom", "direction_custom"),
     (None, "direction_unknown")],
)
def test_undeclared_directions_are_excluded(direction, reason):
    p = Panel().benchmark("x", direction=direction)
    key = p.score("a", "x", 0.5)
    conn = run(p)
    assert table(conn, "SELECT count(*) FROM oriented_scores") == [(0,)]
    assert exclusions(conn, "oriented_scores") == {key: reason}


def test_composite_indexes_are_excluded():
    p = Panel().benchmark("eci", is_composite=True, kind="rating", range_min=None, range_max=None)
    key = p.score("a", "eci", 140.0)
    conn = run(p)
    assert exclusions(conn, "oriented_scores") == {key: "composite_index"}


def test_unregistered_benchmark_is_excluded():
    p = Panel()
    key = p.score("a", "mystery", 0.5)
    conn = run(p)
    assert exclusions(conn, "oriented_scores") == {key: "unregistered_benchmark"}


def test_lower_without_a_range_cannot_be_reflected():
    p = Panel().benchmark("err", direction="lower", range_min=None, range_max=None)
    key = p.score("a", "err", 3.0)
    conn = run(p)
    assert exclusions(conn, "oriented_scores") == {key: "lower_without_range"}


def test_first_rule_wins_and_each_row_is_charged_once():
    p = Panel().benchmark("eci", direction="custom", is_composite=True)
    key = p.score("a", "eci", 0.5)
    conn = run(p)
    assert table(conn, "SELECT reason FROM audit_exclusions") == [("direction_custom",)]
    assert exclusions(conn, "oriented_scores") == {key: "direction_custom"}
