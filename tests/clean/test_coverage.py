"""Stage 6 (sql/06_modeled_observations.sql): the iterative coverage filter."""

import datetime as dt

from atlas_assets.clean import run_stage

from .fixtures import LOOSE, Panel, exclusions, table

COVER = LOOSE.replace(min_models_per_family=2, min_families_per_model=2)


def run(panel: Panel, config=COVER):
    return panel.run(config)


def kept(conn):
    return table(conn, "SELECT model, reasoning_state, family FROM modeled_observations ORDER BY ALL")


CASCADE = COVER.replace(min_models_per_family=3)


def cascade_panel():
    # min 3 models per family, 2 families per model.
    # A, B: m1, m2, m5 (stable).  C: m3, m4, m6.  D: m3, m7.
    # round 1: D has two models -> (m3, D), (m7, D) go; m4 and m6 have one family -> (m4, C), (m6, C) go
    # round 2: C is left with m3 alone -> (m3, C) goes;  round 3 removes nothing
    p = Panel()
    for fam in "ABCD":
        p.benchmark(fam)
    plan = (("m1", "AB"), ("m2", "AB"), ("m5", "AB"), ("m3", "CD"), ("m4", "C"), ("m6", "C"), ("m7", "D"))
    for m, fams in plan:
        p.model(m)
        for fam in fams:
            p.score(m, fam, 0.1 * int(m[1]) + 0.01 * "ABCD".index(fam))
    return p


def test_cascade_takes_more_than_one_round_and_the_rounds_are_recorded():
    conn = run(cascade_panel(), CASCADE)
    assert kept(conn) == [(m, "default", f) for m in ("m1", "m2", "m5") for f in "AB"]
    assert exclusions(conn, "modeled_observations") == {
        "m3 / default :: D": "family_too_few_models",
        "m7 / default :: D": "family_too_few_models",
        "m4 / default :: C": "model_too_few_families",
        "m6 / default :: C": "model_too_few_families",
        "m3 / default :: C": "family_too_few_models",
    }
    assert table(conn, "SELECT iteration, rows_in, rows_removed FROM audit_coverage_iterations ORDER BY 1") == [
        (1, 11, 4), (2, 7, 1), (3, 6, 0)
    ]
    rounds = table(
        conn,
        "SELECT subject, \"values\"->>'iteration' FROM audit_exclusions WHERE stage = 'modeled_observations' ORDER BY 1",
    )
    assert rounds == [("m3 / default :: C", "2"), ("m3 / default :: D", "1"), ("m4 / default :: C", "1"),
                      ("m6 / default :: C", "1"), ("m7 / default :: D", "1")]


def test_family_whose_remaining_scores_never_vary_goes():
    # F varies only through m3, whom the model rule removes; then F is constant and goes too
    p = Panel()
    for fam in ("A", "B", "F"):
        p.benchmark(fam)
    for m in ("m1", "m2", "m3"):
        p.model(m)
    for m in ("m1", "m2"):
        p.score(m, "A", 0.2 if m == "m1" else 0.4)
        p.score(m, "B", 0.3 if m == "m1" else 0.5)
        p.score(m, "F", 0.7)
    p.score("m3", "F", 0.1)
    conn = run(p)
    assert {row[2] for row in kept(conn)} == {"A", "B"}
    assert exclusions(conn, "modeled_observations") == {
        "m3 / default :: F": "model_too_few_families",
        "m1 / default :: F": "family_no_variance",
        "m2 / default :: F": "family_no_variance",
    }


def test_a_sparse_state_borrows_from_its_model():
    # m1's "high" state has one family, but m1 has two across its states: it stays
    p = Panel()
    for fam in ("A", "B"):
        p.benchmark(fam)
    p.model("m1", "m1", "default").model("m1_high", "m1", "high").model("m2")
    p.score("m1", "A", 0.3)
    p.score("m1", "B", 0.4)
    p.score("m1_high", "A", 0.6)
    p.score("m2", "A", 0.5)
    p.score("m2", "B", 0.7)
    conn = run(p)
    assert ("m1", "high", "A") in kept(conn)
    assert exclusions(conn, "modeled_observations") == {}


def test_unknown_setting_rows_are_not_fitted_and_do_not_count_for_coverage():
    # m1's only second family is an unknown-setting run: it must not keep m1 in the fit
    p = Panel()
    for fam in ("A", "B"):
        p.benchmark(fam)
    p.model("m1").model("m1_unknown", "m1", None).model("m2").model("m3")
    p.score("m1", "A", 0.3)
    p.score("m1_unknown", "B", 0.4)
    for m, a, b in (("m2", 0.5, 0.7), ("m3", 0.2, 0.6)):
        p.score(m, "A", a)
        p.score(m, "B", b)
    conn = run(p)
    assert {row[0] for row in kept(conn)} == {"m2", "m3"}
    assert table(conn, "SELECT count(*) FROM family_observations WHERE reasoning_state = 'unknown'") == [(1,)]
    assert exclusions(conn, "modeled_observations") == {
        "m1 / default :: A": "model_too_few_families",
        "m1 / unknown :: B": "unknown_reasoning_state",
    }


def test_thresholds_come_from_config():
    conn = run(cascade_panel(), CASCADE.replace(min_models_per_family=4))
    assert kept(conn) == []
    conn = run(cascade_panel(), CASCADE.replace(min_families_per_model=1))
    assert ("m4", "default", "C") in kept(conn)


def test_output_contract_release_date_and_restandardized_ratings():
    p = Panel().benchmark("gpqa", items=198, floor=0.25)
    p.benchmark("arena", kind="rating", range_min=None, range_max=None, unit="elo")
    p.benchmark("arena_old", kind="rating", range_min=None, range_max=None, unit="elo")
    released = dt.date(2025, 5, 1)
    for i, m in enumerate(("a", "b", "c", "d")):
        p.model(m, released_on=released if m == "a" else None)
        p.score(m, "gpqa", 0.4 + 0.1 * i)
        p.score(m, "arena", 1000.0 + 50 * i)
    p.model("e")  # has arena only: removed by the model rule, so arena is standardized again
    p.score("e", "arena", 2000.0)
    conn = run(p)
    described = [(r[0], r[1]) for r in table(conn, "DESCRIBE modeled_observations")][:10]
    assert described == [
        ("model", "VARCHAR"), ("reasoning_state", "VARCHAR"), ("family", "VARCHAR"), ("kind", "VARCHAR"),
        ("u", "DOUBLE"), ("correct", "INTEGER"), ("items", "INTEGER"), ("floor", "DOUBLE"),
        ("n_components", "INTEGER"), ("released_on", "DATE"),
    ]
    assert table(conn, "SELECT released_on FROM modeled_observations WHERE model = 'a' LIMIT 1") == [(released,)]
    stats = table(conn, "SELECT round(avg(u), 9), round(stddev_samp(u), 9), count(*) FROM modeled_observations WHERE family = 'arena'")
    assert stats == [(0.0, 1.0, 4)]
    assert table(conn, "SELECT correct, items FROM modeled_observations WHERE model = 'b' AND family = 'gpqa'") == [(99, 198)]


def test_stage_is_a_fixed_point_on_its_own_output():
    conn = run(cascade_panel(), CASCADE)
    conn.execute("CREATE OR REPLACE TABLE family_observations AS SELECT * EXCLUDE (released_on) FROM modeled_observations")
    before = kept(conn)
    counts = run_stage(conn, "modeled_observations", CASCADE)
    assert kept(conn) == before
    assert counts.rows_excluded == 0 and counts.extra["iterations"] == [{"iteration": 1, "rows_in": 6, "rows_removed": 0}]
