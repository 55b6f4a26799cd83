"""Stage 2 (sql/02_screened_scores.sql): protocol screen and guards, one test per rule."""

from .fixtures import Panel, exclusions, table


def run(panel: Panel):
    return panel.run(until="screened_scores")


def kept(conn):
    return {row[0] for row in table(conn, "SELECT row_key FROM screened_scores")}


def test_consensus_scores_are_excluded_from_a_single_attempt_benchmark():
    p = Panel().benchmark("gpqa", sampling_protocol="single")
    single = p.score("a", "gpqa", 0.5, sampling_protocol="single")
    average = p.score("b", "gpqa", 0.5, sampling_protocol="average")
    unpublished = p.score("c", "gpqa", 0.5)
    vote = p.score("d", "gpqa", 0.5, sampling_protocol="consensus")
    best = p.score("e", "gpqa", 0.5, sampling_protocol="best_of_n")
    conn = run(p)
    assert kept(conn) == {single, average, unpublished}
    assert exclusions(conn, "screened_scores") == {vote: "protocol_class_mismatch", best: "protocol_class_mismatch"}
    # an unpublished protocol is read as the benchmark's dominant one
    assert table(conn, f"SELECT effective_protocol, sampling_class FROM screened_scores WHERE row_key = '{unpublished}'") == [
        ("single", "single")
    ]


def test_single_attempts_are_excluded_from_a_consensus_benchmark():
    p = Panel().benchmark("aime", sampling_protocol="consensus")
    single = p.score("a", "aime", 0.5, sampling_protocol="single")
    average = p.score("b", "aime", 0.5, sampling_protocol="average")
    best = p.score("c", "aime", 0.5, sampling_protocol="best_of_n")
    unpublished = p.score("d", "aime", 0.5)
    conn = run(p)
    assert kept(conn) == {best, unpublished}
    assert exclusions(conn, "screened_scores") == {single: "protocol_class_mismatch", average: "protocol_class_mismatch"}


def test_unknown_protocol_is_excluded():
    p = Panel().benchmark("gpqa")
    key = p.score("a", "gpqa", 0.5, sampling_protocol="pass@k")
    conn = run(p)
    assert exclusions(conn, "screened_scores") == {key: "unknown_protocol"}


def test_score_below_half_the_guessing_floor_is_excluded():
    p = Panel().benchmark("mc4", floor=0.25).benchmark("pct", floor=0.25, range_max=100.0, unit="percent")
    low = p.score("a", "mc4", 0.12)
    ok = p.score("b", "mc4", 0.13)
    low_pct = p.score("c", "pct", 12.0)
    ok_pct = p.score("d", "pct", 12.6)
    conn = run(p)
    assert kept(conn) == {ok, ok_pct}
    assert exclusions(conn, "screened_scores") == {low: "below_half_floor", low_pct: "below_half_floor"}


def test_floor_guard_sees_reflected_scores():
    # lower-is-better on 0..1 with a floor: a published 0.95 error rate is 0.05 after reflection
    p = Panel().benchmark("err", direction="lower", floor=0.2)
    bad = p.score("a", "err", 0.95)
    good = p.score("b", "err", 0.5)
    conn = run(p)
    assert kept(conn) == {good}
    assert exclusions(conn, "screened_scores") == {bad: "below_half_floor"}


def test_score_outside_the_declared_range_is_excluded():
    p = Panel().benchmark("gpqa")
    over = p.score("a", "gpqa", 1.2)
    under = p.score("b", "gpqa", -0.1)
    edge = p.score("c", "gpqa", 1.0000000001)
    p.score("d", "gpqa", 0.3)
    p.score("e", "gpqa", 0.4)
    p.score("f", "gpqa", 0.5)
    p.score("g", "gpqa", 0.6)
    conn = run(p)
    assert exclusions(conn, "screened_scores") == {over: "outside_declared_range", under: "outside_declared_range"}
    assert edge in kept(conn)


def test_benchmark_with_too_many_scores_at_its_bounds_is_excluded():
    # 2 of 5 at exactly the declared max (40% > 25%): the declared bounds are wrong
    p = Panel().benchmark("capped").benchmark("fine")
    capped = [p.score(m, "capped", s) for m, s in zip("abcde", [1.0, 1.0, 0.8, 0.7, 0.6])]
    # exactly 25% at a bound is allowed (the rule is "more than")
    fine = [p.score(m, "fine", s) for m, s in zip("abcd", [1.0, 0.8, 0.7, 0.6])]
    conn = run(p)
    assert kept(conn) == set(fine)
    assert exclusions(conn, "screened_scores") == {key: "bounds_suspect" for key in capped}


def test_bounds_guard_counts_only_rows_the_row_level_rules_keep():
    # zeros on a floored benchmark are refusals (below half floor), not evidence of wrong bounds
    p = Panel().benchmark("mc4", floor=0.25)
    zeros = [p.score(m, "mc4", 0.0) for m in "abc"]
    rest = [p.score(m, "mc4", s) for m, s in zip("defgh", [0.3, 0.4, 0.5, 0.6, 0.7])]
    conn = run(p)
    assert kept(conn) == set(rest)
    assert exclusions(conn, "screened_scores") == {key: "below_half_floor" for key in zeros}


# --- issue 7 item 5: the bounds guard is about wrong declared bounds, not about real zeros ---------


def test_zeros_on_a_benchmark_without_a_guessing_floor_are_scores_not_bound_hits():
    # BALROG NetHack: 10 of 28 models score exactly 0 on a floorless benchmark; those are real
    # measurements (the model's zero hurdle exists for them), not evidence of a wrong declared min
    p = Panel().benchmark("nethack")
    keys = [p.score(m, "nethack", s) for m, s in zip("abcde", [0.0, 0.0, 0.0, 0.02, 0.05])]
    conn = run(p)
    assert kept(conn) == set(keys)
    assert exclusions(conn, "screened_scores") == {}


def test_bound_hits_at_the_min_count_where_the_benchmark_has_a_guessing_floor():
    # a floored benchmark whose floor guard is below one item (0.01 * 50 * 0.5 < 1, so zeros are
    # kept by the guard): exact zeros where guessing alone scores 1 % mean the bounds are wrong
    p = Panel().benchmark("mc100", floor=0.01, items=50)
    keys = [p.score(m, "mc100", s) for m, s in zip("abcde", [0.0, 0.0, 0.3, 0.5, 0.6])]
    conn = run(p)
    assert exclusions(conn, "screened_scores") == {key: "bounds_suspect" for key in keys}


def test_a_suspect_benchmark_is_named_in_the_bounds_audit_and_the_warn_verdict():
    from atlas_assets.clean import verify

    p = Panel().benchmark("capped").benchmark("zeros")
    for m, s in zip("abcde", [1.0, 1.0, 0.8, 0.7, 0.6]):
        p.score(m, "capped", s)
    for m, s in zip("abcde", [0.0, 0.0, 0.0, 0.4, 0.5]):
        p.score(m, "zeros", s)
    conn = run(p)
    audit = table(conn, "SELECT benchmark, n_scores, at_min, at_max, counted, round(share, 3), suspect FROM audit_bounds ORDER BY 1")
    assert audit == [("capped", 5, 0, 2, 2, 0.4, True), ("zeros", 5, 3, 0, 0, 0.0, False)]
    verdict = verify.bounds_suspect_benchmarks(conn)
    assert not verdict.passed and verdict.metadata["suspect_benchmarks"] == "capped"
    from .fixtures import LOOSE

    assert verify.bounds_audit_consistent(conn, LOOSE).passed
    conn.execute("UPDATE audit_bounds SET suspect = false")
    assert not verify.bounds_audit_consistent(conn, LOOSE).passed


def test_half_floor_guard_does_not_apply_where_half_the_floor_is_below_one_item():
    # OTIS Mock AIME: floor 0.001 on 45 items; half the floor is 0.02 of an item, so a 0/45 is
    # a genuine zero, not a refusal. GPQA-like 0.25 on 198 items: half the floor is 24.75 items.
    p = Panel().benchmark("otis", floor=0.001, items=45).benchmark("mc", floor=0.25, items=198)
    p.benchmark("cont", floor=0.25)  # no item count: a continuous score, the guard applies
    zero_otis = p.score("a", "otis", 0.0)
    rest_otis = [p.score(m, "otis", s) for m, s in zip("bcde", [0.1, 0.2, 0.3, 0.4])]
    zero_mc = p.score("a", "mc", 0.0)
    zero_cont = p.score("a", "cont", 0.0)
    conn = run(p)
    assert {zero_otis, *rest_otis} <= kept(conn)
    assert exclusions(conn, "screened_scores") == {zero_mc: "below_half_floor", zero_cont: "below_half_floor"}
    from atlas_assets.clean import verify

    from .fixtures import LOOSE

    assert verify.screen_rules_hold(conn, LOOSE).passed
