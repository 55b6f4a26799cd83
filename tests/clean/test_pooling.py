"""Stage 4 (sql/04_pooled_states.sql): harness pooling, one test per rule."""

from .fixtures import LOOSE, Panel, exclusions, table


def run(panel: Panel, config=LOOSE):
    return panel.run(config, until="pooled_states")


def test_harness_configurations_of_one_state_collapse_to_their_median_with_one_vote():
    p = Panel().benchmark("tb").model("opus")
    for harness, score in (("Droid", 0.70), ("Terminus 2", 0.60), ("Mux", 0.66)):
        p.score("opus", "tb", score, harness=harness)
    conn = run(p)
    assert table(conn, "SELECT model, reasoning_state, benchmark, score, n_configs FROM pooled_states") == [
        ("opus", "default", "tb", 0.66, 3)
    ]
    audit = table(conn, "SELECT n_configs, config_ids, harnesses, round(spread, 6), round(spread_unit, 6) FROM audit_harness_spread")
    assert audit == [(3, ["opus | Droid", "opus | Mux", "opus | Terminus 2"], ["Droid", "Mux", "Terminus 2"], 0.1, 0.1)]


def test_identifiers_naming_the_same_model_and_state_are_pooled():
    # provider routes / aliases: two published ids, one model, one reasoning state
    p = Panel().benchmark("gpqa").model("qwen/qwen3", "qwen3", "high").model("Qwen/Qwen3", "qwen3", "high")
    p.score("qwen/qwen3", "gpqa", 0.60)
    p.score("Qwen/Qwen3", "gpqa", 0.64)
    conn = run(p)
    assert table(conn, "SELECT model, reasoning_state, score, n_configs FROM pooled_states") == [("qwen3", "high", 0.62, 2)]
    assert table(conn, "SELECT model_ids FROM audit_harness_spread") == [(["Qwen/Qwen3", "qwen/qwen3"],)]


def test_different_reasoning_states_stay_apart():
    p = Panel().benchmark("gpqa").model("m_high", "m", "high").model("m_low", "m", "low")
    p.score("m_high", "gpqa", 0.8)
    p.score("m_low", "gpqa", 0.6)
    conn = run(p)
    assert table(conn, "SELECT reasoning_state, score FROM pooled_states ORDER BY 1") == [("high", 0.8), ("low", 0.6)]
    assert table(conn, "SELECT count(*) FROM audit_harness_spread") == [(0,)]


def test_unmapped_identifiers_are_excluded_with_a_reason():
    p = Panel().benchmark("gpqa").model("nomodel", None, "high").model("nostate", "x", None)
    p.score("nomodel", "gpqa", 0.5)
    p.score("nostate", "gpqa", 0.5)
    p.score("unknown", "gpqa", 0.5)
    conn = run(p)
    assert table(conn, "SELECT count(*) FROM pooled_states") == [(0,)]
    assert exclusions(conn, "pooled_states") == {
        "nomodel :: gpqa": "unmapped_model",
        "nostate :: gpqa": "unmapped_reasoning_state",
        "unknown :: gpqa": "unknown_model_id",
    }


def test_a_conflicted_configuration_blocks_its_state():
    p = Panel().benchmark("tb").model("opus")
    p.score("opus", "tb", 0.30, harness="A")
    p.score("opus", "tb", 0.70, harness="A")  # configuration A is a conflict
    p.score("opus", "tb", 0.55, harness="B")
    conn = run(p)
    assert table(conn, "SELECT count(*) FROM pooled_states") == [(0,)]
    assert exclusions(conn, "pooled_states") == {"opus | B :: tb": "conflict_blocks_state"}
    # with the rule switched off, B alone fills the state
    conn = run(p, LOOSE.replace(conflict_blocks_state=False))
    assert table(conn, "SELECT score, n_configs FROM pooled_states") == [(0.55, 1)]
