"""Property tests (hypothesis) for the chain's invariants on random small panels:
conservation of rows, every raw row accounted for exactly once, independence of input
row order, idempotence of the stages where re-running on the output applies."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atlas_assets.clean import STAGE_NAMES, run_chain, run_stage
from atlas_assets.clean.verify import ledger_complete

from .fixtures import LOOSE, Panel, table

CONFIG = LOOSE.replace(min_models_per_family=2, min_families_per_model=2, primary_min_models=3)

BENCHMARKS = {
    "mc": dict(floor=0.25, items=200),
    "pct": dict(range_max=100.0, unit="percent"),
    "err": dict(direction="lower", floor=0.1),
    "vote": dict(sampling_protocol="consensus"),
    "prim": dict(family="fam", role="primary"),
    "comp1": dict(family="fam", role="component", items=50),
    "comp2": dict(family="fam", role="component"),
    "elo": dict(kind="rating", range_min=None, range_max=None, unit="elo"),
    "diag": dict(role="diagnostic"),
    "odd": dict(direction="target"),
}
MODEL_IDS = {
    "a": ("a", "default"), "a_high": ("a", "high"), "a_route": ("a", "default"),
    "b": ("b", "default"), "c": ("c", "low"), "d": ("d", "default"), "e": ("e", "default"),
    "nomodel": (None, "high"),
}
LEVELS = [0.0, 0.05, 0.3, 0.31, 0.5, 0.52, 0.7, 0.9, 1.0]

report = st.tuples(
    st.sampled_from(sorted(MODEL_IDS) + ["unregistered"]),
    st.sampled_from(sorted(BENCHMARKS)),
    st.sampled_from(LEVELS),
    st.sampled_from([None, "single", "average", "consensus"]),
    st.sampled_from([None, 0, 5]),
    st.sampled_from([None, "A", "B"]),
    st.sampled_from([None, 0.02]),
)
panels = st.lists(report, min_size=1, max_size=60)


def build(reports, order=None) -> Panel:
    p = Panel()
    for name, values in BENCHMARKS.items():
        p.benchmark(name, **values)
    for model_id, (model, state) in MODEL_IDS.items():
        p.model(model_id, model, state)
    rows = list(enumerate(reports))
    if order is not None:
        rows = [rows[i] for i in order]
    for i, (model_id, bench, level, protocol, shots, harness, stderr) in rows:
        spec = BENCHMARKS[bench]
        score = 1000 + 500 * level if spec.get("kind") == "rating" else level * spec.get("range_max", 1.0)
        p.score(model_id, bench, score, row_key=f"r{i:03d}", sampling_protocol=protocol, shots=shots,
                harness=harness, stderr=stderr)
    return p


def snapshot(conn) -> dict[str, list]:
    return {
        "modeled": table(conn, "SELECT model, reasoning_state, family, round(u, 9), correct, items, n_components "
                               "FROM modeled_observations ORDER BY ALL"),
        "resolved": table(conn, "SELECT config_id, benchmark, round(score, 9), n_reports, resolution FROM resolved_cells ORDER BY ALL"),
        "ledger": table(conn, "SELECT stage, reason, subject, row_keys FROM audit_exclusions ORDER BY ALL"),
        "conflicts": table(conn, "SELECT row_key, set_aside_by FROM audit_conflicts ORDER BY ALL"),
    }


COMMON = dict(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings(**COMMON)
@given(panels)
def test_every_stage_conserves_rows_and_every_raw_row_lands_once(reports):
    conn = build(reports).connect()
    for counts in run_chain(conn, CONFIG):
        assert counts.conserved, counts
    assert ledger_complete(conn).passed
    landed = table(
        conn,
        """SELECT key, count(*) FROM (
               SELECT unnest(row_keys) AS key FROM audit_exclusions
               UNION ALL SELECT unnest(row_keys) FROM modeled_observations)
           GROUP BY key HAVING count(*) <> 1""",
    )
    assert landed == []


@settings(**COMMON)
@given(panels, st.randoms(use_true_random=False))
def test_results_do_not_depend_on_input_row_order(reports, rnd: random.Random):
    order = list(range(len(reports)))
    rnd.shuffle(order)
    first = build(reports).run(CONFIG)
    second = build(reports, order).run(CONFIG)
    assert snapshot(first) == snapshot(second)


@settings(**COMMON)
@given(panels)
def test_screen_is_idempotent(reports):
    conn = build(reports).run(CONFIG, until="screened_scores")
    before = table(conn, "SELECT * FROM screened_scores ORDER BY row_key")
    conn.execute(
        "CREATE OR REPLACE TABLE oriented_scores AS SELECT * EXCLUDE (effective_protocol, sampling_class) FROM screened_scores"
    )
    counts = run_stage(conn, "screened_scores", CONFIG)
    assert counts.rows_excluded == 0
    assert table(conn, "SELECT * FROM screened_scores ORDER BY row_key") == before


@settings(**COMMON)
@given(panels)
def test_resolution_is_idempotent_on_resolved_cells(reports):
    conn = build(reports).run(CONFIG, until="resolved_cells")
    before = table(conn, "SELECT model_id, harness, benchmark, score FROM resolved_cells ORDER BY ALL")
    # each resolved cell becomes one report of itself
    conn.execute(
        """CREATE OR REPLACE TABLE screened_scores AS
           SELECT config_id || ' :: ' || benchmark AS row_key, 'x' AS source, 'x' AS source_class, model_id, harness,
                  benchmark, score, score AS score_published, 'higher' AS direction, stderr, shots,
                  NULL::VARCHAR AS sampling_protocol, effective_protocol, NULL AS sampling_class, NULL::DATE AS evaluated_on,
                  'f.csv' AS file, verification_class
           FROM resolved_cells"""
    )
    counts = run_stage(conn, "resolved_cells", CONFIG)
    assert counts.rows_excluded == 0
    assert table(conn, "SELECT model_id, harness, benchmark, score FROM resolved_cells ORDER BY ALL") == before
    assert {r[0] for r in table(conn, "SELECT DISTINCT resolution FROM resolved_cells")} <= {"single_report"}


@settings(**COMMON)
@given(panels)
def test_coverage_filter_is_idempotent(reports):
    conn = build(reports).run(CONFIG)
    before = table(conn, "SELECT model, reasoning_state, family, round(u, 9) FROM modeled_observations ORDER BY ALL")
    conn.execute("CREATE OR REPLACE TABLE family_observations AS SELECT * EXCLUDE (released_on) FROM modeled_observations")
    counts = run_stage(conn, "modeled_observations", CONFIG)
    assert counts.rows_excluded == 0
    after = table(conn, "SELECT model, reasoning_state, family, round(u, 9) FROM modeled_observations ORDER BY ALL")
    assert after == before


def test_stage_names_are_in_pipeline_order():
    assert STAGE_NAMES == ("oriented_scores", "screened_scores", "resolved_cells", "pooled_states",
                           "family_observations", "modeled_observations")


def test_standardised_ratings_are_bitwise_the_same_whatever_the_row_order():
    # a rating family's scores are standardised by its mean and sd; a window aggregate sums in the order the rows
    # arrive, so two runs on the same data gave values that differed in the last bits (measured on the real panel:
    # 27 of 28 ratings, by up to 9e-16), and the same seed then drew a different NUTS trajectory. The statistics are
    # taken in a fixed order instead: the values are identical, not merely close
    models = [f"m{i}" for i in range(12)]
    scores = [1000.1, 1234.7, 987.3, 1500.9, 1111.1, 1333.3, 1049.9, 1277.7, 1444.4, 1010.1, 1299.3, 1188.8]

    def panel(order) -> Panel:
        p = Panel()
        p.benchmark("elo", kind="rating", range_min=None, range_max=None, unit="elo")
        p.benchmark("mc", floor=0.25, items=200)
        p.benchmark("pct", range_max=100.0, unit="percent")
        for m in models:
            p.model(m)
        rows = [(m, "elo", s) for m, s in zip(models, scores)]
        rows += [(m, "mc", 0.3 + 0.05 * i) for i, m in enumerate(models)]
        rows += [(m, "pct", 20.0 + 5 * i) for i, m in enumerate(models)]
        for i in order:
            model, bench, score = rows[i]
            p.score(model, bench, score, row_key=f"r{i:03d}")
        return p

    def ratings(conn, table_name: str) -> list:
        return table(conn, f"SELECT model, u FROM {table_name} WHERE kind = 'rating' ORDER BY model")

    n = 3 * len(models)
    baseline = panel(range(n)).run(CONFIG)
    expected = {name: ratings(baseline, name) for name in ("family_observations", "modeled_observations")}
    assert len(expected["modeled_observations"]) == len(models)
    for seed in range(8):
        order = list(range(n))
        random.Random(seed).shuffle(order)
        conn = panel(order).run(CONFIG)
        for name, rows in expected.items():
            assert ratings(conn, name) == rows, (seed, name)
