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
    # a known model whose setting is not known is kept, in the state 'unknown' (not invented, not lost)
    assert table(conn, "SELECT model, reasoning_state, score FROM pooled_states") == [("x", "unknown", 0.5)]
    assert exclusions(conn, "pooled_states") == {
        "nomodel :: gpqa": "unmapped_model",
        "unknown :: gpqa": "unknown_model_id",
    }


def test_configurations_of_unknown_setting_pool_into_one_unknown_state():
    p = Panel().benchmark("gpqa").model("x_unknown", "x", None).model("x-webapp", "x", None).model("x_high", "x", "high")
    p.score("x_unknown", "gpqa", 0.50)
    p.score("x-webapp", "gpqa", 0.60)
    p.score("x_high", "gpqa", 0.70)
    conn = run(p)
    assert table(conn, "SELECT reasoning_state, score, n_configs FROM pooled_states ORDER BY 1") == [
        ("high", 0.70, 1), ("unknown", 0.55, 2)]


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


# --- issue 7 item 9: seed 001's rule as a config option ------------------------------------------


def setup_panel() -> Panel:
    # opus reports tb under three agents; "Terminus 2" is the setup with the most models on tb
    # (opus, x, y), "Droid" has two (opus, x), "Mux" one. opus also has two provider routes under
    # Terminus 2 (one run, two published ids).
    p = Panel().benchmark("tb").model("opus").model("opus-route", "opus", "default").model("x").model("y")
    for harness, score in (("Droid", 0.70), ("Terminus 2", 0.60), ("Mux", 0.66)):
        p.score("opus", "tb", score, harness=harness)
    p.score("opus-route", "tb", 0.62, harness="Terminus 2")
    p.score("x", "tb", 0.40, harness="Terminus 2")
    p.score("x", "tb", 0.45, harness="Droid")
    p.score("y", "tb", 0.30, harness="Terminus 2")
    return p


def test_default_pooling_is_the_median_over_all_harness_configurations():
    conn = run(setup_panel())
    assert LOOSE.harness_pooling == "median_all"
    rows = table(conn, "SELECT model, round(score, 6), n_configs FROM pooled_states ORDER BY 1")
    assert rows == [("opus", 0.64, 4), ("x", 0.425, 2), ("y", 0.3, 1)]
    assert exclusions(conn, "pooled_states") == {}


def test_pooling_under_the_setup_with_the_most_models():
    conn = run(setup_panel(), LOOSE.replace(harness_pooling="most_models_setup"))
    rows = table(conn, "SELECT model, round(score, 6), n_configs, harnesses FROM pooled_states ORDER BY 1")
    # opus: the two Terminus 2 routes collapse to their median; Droid and Mux are set aside
    assert rows == [("opus", 0.61, 2, ["Terminus 2", "Terminus 2"]), ("x", 0.4, 1, ["Terminus 2"]), ("y", 0.3, 1, ["Terminus 2"])]
    assert exclusions(conn, "pooled_states") == {
        "opus | Droid :: tb": "other_setup", "opus | Mux :: tb": "other_setup", "x | Droid :: tb": "other_setup",
    }
    setup = table(conn, "SELECT \"values\"->>'pooled_setup' FROM audit_exclusions WHERE subject = 'opus | Mux :: tb'")
    assert setup == [("Terminus 2",)]


def test_a_state_without_the_top_setup_uses_its_best_ranked_one():
    p = setup_panel()
    p.model("z")
    p.score("z", "tb", 0.5, harness="Mux")
    p.score("z", "tb", 0.55, harness="Other")
    conn = run(p, LOOSE.replace(harness_pooling="most_models_setup"))
    # z has no Terminus 2 run: of its setups, Mux (opus, z: 2 models) beats Other (1)
    assert table(conn, "SELECT model, round(score, 6), harnesses FROM pooled_states WHERE model = 'z'") == [("z", 0.5, ["Mux"])]
    assert exclusions(conn, "pooled_states")["z | Other :: tb"] == "other_setup"


def test_an_unknown_pooling_rule_is_a_config_error():
    import pytest

    from atlas_assets.clean import CleaningConfig

    with pytest.raises(ValueError, match="harness_pooling"):
        CleaningConfig.from_mapping({"pooling": {"harness_pooling": "mean"}})
