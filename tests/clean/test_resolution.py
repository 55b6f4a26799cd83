"""Stage 3 (sql/03_resolved_cells.sql): duplicate resolution, one test per rule."""

import pytest

from .fixtures import LOOSE, Panel, exclusions, table


def run(panel: Panel, config=LOOSE):
    return panel.run(config, until="resolved_cells")


def cells(conn):
    return table(
        conn,
        "SELECT model_id, harness, benchmark, round(score, 6), n_reports, resolution FROM resolved_cells ORDER BY ALL",
    )


def test_single_report_passes():
    p = Panel().benchmark("gpqa")
    p.score("a", "gpqa", 0.5)
    assert cells(run(p)) == [("a", None, "gpqa", 0.5, 1, "single_report")]


def test_exact_duplicates_collapse_without_extra_weight():
    p = Panel().benchmark("gpqa")
    keys = [p.score("a", "gpqa", 0.5) for _ in range(3)]
    conn = run(p)
    assert cells(conn) == [("a", None, "gpqa", 0.5, 3, "consensus")]
    assert table(conn, "SELECT row_keys FROM resolved_cells") == [(sorted(keys),)]
    assert exclusions(conn, "resolved_cells") == {}


def test_reports_within_span_tolerance_collapse_to_their_median():
    # tolerance 0.02 of the 0..100 span = 2 points
    p = Panel().benchmark("mmlu", range_max=100.0, unit="percent")
    for s in (70.0, 71.0, 71.5):
        p.score("a", "mmlu", s)
    assert cells(run(p)) == [("a", None, "mmlu", 71.0, 3, "consensus")]


def test_published_stderr_widens_the_tolerance_to_twice_the_run_to_run_noise():
    # |0.50 - 0.58| = 0.08 > 0.02 of span, but <= 2 * sqrt(0.03^2 + 0.03^2) = 0.0849
    p = Panel().benchmark("gpqa")
    p.score("a", "gpqa", 0.50, stderr=0.03)
    p.score("a", "gpqa", 0.58, stderr=0.03)
    assert cells(run(p)) == [("a", None, "gpqa", 0.54, 2, "consensus")]
    # the same pair without stderr is a conflict; and so with stderr_multiplier = 0
    q = Panel().benchmark("gpqa")
    q.score("a", "gpqa", 0.50, stderr=0.03)
    q.score("a", "gpqa", 0.58, stderr=0.03)
    assert cells(run(q, LOOSE.replace(stderr_multiplier=0.0))) == []


def test_averaged_run_beats_a_conflicting_single_attempt():
    p = Panel().benchmark("gpqa")
    avg = p.score("a", "gpqa", 0.50, sampling_protocol="average")
    single = p.score("a", "gpqa", 0.60, sampling_protocol="single")
    conn = run(p)
    assert cells(conn) == [("a", None, "gpqa", 0.5, 1, "tiebreak")]
    assert table(conn, "SELECT row_keys FROM resolved_cells") == [([avg],)]
    assert exclusions(conn, "resolved_cells") == {single: "single_attempt_vs_average"}


def test_mixed_shot_counts_resolve_to_the_benchmarks_modal_regime():
    p = Panel().benchmark("mmlu")
    for m in "bcd":  # the benchmark is mostly reported 5-shot
        p.score(m, "mmlu", 0.6, shots=5)
    p.score("e", "mmlu", 0.6, shots=0)
    five = p.score("a", "mmlu", 0.70, shots=5)
    zero = p.score("a", "mmlu", 0.60, shots=0)
    conn = run(p)
    assert ("a", None, "mmlu", 0.7, 1, "tiebreak") in cells(conn)
    assert exclusions(conn, "resolved_cells") == {zero: "non_modal_shots"}
    assert five in table(conn, "SELECT row_keys FROM resolved_cells WHERE model_id = 'a'")[0][0]


def test_majority_removes_a_lone_outlier_among_three_or_more():
    p = Panel().benchmark("gpqa")
    a = p.score("a", "gpqa", 0.50)
    b = p.score("a", "gpqa", 0.51)
    outlier = p.score("a", "gpqa", 0.70)
    conn = run(p)
    assert cells(conn) == [("a", None, "gpqa", 0.505, 2, "majority")]
    assert exclusions(conn, "resolved_cells") == {outlier: "majority_outlier"}


def test_majority_needs_three_reports():
    p = Panel().benchmark("gpqa")
    p.score("a", "gpqa", 0.50)
    p.score("a", "gpqa", 0.70)
    conn = run(p)
    assert cells(conn) == []
    assert set(exclusions(conn, "resolved_cells").values()) == {"unresolved_conflict"}


def test_no_lone_outlier_when_either_end_could_be_dropped():
    # 0.50-0.515 and 0.515-0.53 agree, 0.50-0.53 does not: dropping either end restores
    # agreement, so no single report is the outlier -> conflict
    p = Panel().benchmark("gpqa")
    keys = [p.score("a", "gpqa", s) for s in (0.50, 0.515, 0.53)]
    conn = run(p)
    assert cells(conn) == []
    assert exclusions(conn, "resolved_cells") == {k: "unresolved_conflict" for k in keys}


def test_irreconcilable_cell_goes_to_the_conflict_queue_with_every_report():
    p = Panel().benchmark("gpqa")
    avg = p.score("a", "gpqa", 0.30, sampling_protocol="average", source="epoch_hub")
    # same source, class and (no) date: the seed-002 preference cannot choose either
    avg2 = p.score("a", "gpqa", 0.60, sampling_protocol="average", source="epoch_hub")
    single = p.score("a", "gpqa", 0.45, sampling_protocol="single")
    p.score("b", "gpqa", 0.5)
    conn = run(p)
    assert cells(conn) == [("b", None, "gpqa", 0.5, 1, "single_report")]
    assert exclusions(conn, "resolved_cells") == {avg: "unresolved_conflict", avg2: "unresolved_conflict",
                                                  single: "unresolved_conflict"}
    queue = table(conn, "SELECT row_key, set_aside_by, n_reports, round(cell_spread, 6) FROM audit_conflicts ORDER BY row_key")
    assert queue == sorted([(avg, None, 3, 0.3), (avg2, None, 3, 0.3), (single, "single_attempt_vs_average", 3, 0.3)])


def test_harnesses_are_separate_configurations():
    p = Panel().benchmark("tb")
    p.score("a", "tb", 0.50, harness="Droid")
    p.score("a", "tb", 0.70, harness="Terminus 2")
    assert cells(run(p)) == [("a", "Droid", "tb", 0.5, 1, "single_report"), ("a", "Terminus 2", "tb", 0.7, 1, "single_report")]


def test_rating_tolerance_uses_the_observed_span():
    # no declared range: span = 1500 - 1000 = 500 -> tolerance 10 Elo
    p = Panel().benchmark("arena", kind="rating", range_min=None, range_max=None, unit="elo")
    p.score("x", "arena", 1000.0)
    p.score("y", "arena", 1500.0)
    p.score("a", "arena", 1200.0)
    p.score("a", "arena", 1208.0)
    p.score("b", "arena", 1200.0)
    p.score("b", "arena", 1230.0)
    got = {row[0]: row[3] for row in cells(run(p))}
    assert got == {"x": 1000.0, "y": 1500.0, "a": 1204.0}


@pytest.mark.parametrize("fraction,expected", [(0.02, []), (0.05, [("a", None, "gpqa", 0.52, 2, "consensus")])])
def test_tolerance_comes_from_config(fraction, expected):
    p = Panel().benchmark("gpqa")
    p.score("a", "gpqa", 0.50)
    p.score("a", "gpqa", 0.54)
    assert cells(run(p, LOOSE.replace(consensus_span_fraction=fraction))) == expected


def test_without_the_modal_regime_the_cells_most_common_regime_wins():
    # benchmark: 8-shot modal (3), then 4-shot (2), then 0-shot (1); cell reports 0 and 4 shots
    p = Panel().benchmark("gsm8k")
    for m in "bcd":
        p.score(m, "gsm8k", 0.6, shots=8)
    for m in "ef":
        p.score(m, "gsm8k", 0.6, shots=4)
    zero = p.score("a", "gsm8k", 0.115, shots=0)
    p.score("a", "gsm8k", 0.485, shots=4)
    conn = run(p)
    assert ("a", None, "gsm8k", 0.485, 1, "tiebreak") in cells(conn)
    assert exclusions(conn, "resolved_cells") == {zero: "non_modal_shots"}
