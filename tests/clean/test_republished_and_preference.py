"""Issue 11 in the duplicate resolution: a result republished by another source is one cell (not two
votes), the seed-002 preference (verification class, newer evaluation, source trust) breaks ties that
consensus leaves, and every stage carries the verification class."""

from __future__ import annotations

import datetime as dt

from .fixtures import LOOSE, Panel, exclusions, table

COPY = ("epoch_hub", "aider_polyglot_external.csv")
ORIGINAL = ("aider", "polyglot_leaderboard.yml")


def republished_panel() -> Panel:
    p = Panel().benchmark("polyglot", range_min=0.0, range_max=100.0, unit="percent", items=225)
    p.republishes(*COPY, *ORIGINAL)
    # the same run under two identifiers, mapped to one model and state by the registry
    p.model("gpt-5-2025-08-07_high", model="gpt-5-2025-08-07", state="high")
    p.model("gpt-5 (high)", model="gpt-5-2025-08-07", state="high")
    return p


def resolved(conn):
    return table(conn, "SELECT config_id, benchmark, score, n_reports, resolution, verification_class, sources "
                       "FROM resolved_cells ORDER BY ALL")


def test_a_copy_and_its_original_are_one_cell_not_two_configurations():
    p = republished_panel()
    original = p.score("gpt-5 (high)", "polyglot", 88.0, source="aider", file=ORIGINAL[1], harness="diff",
                       verification_class="community", evaluated_on=dt.date(2025, 8, 23))
    copy = p.score("gpt-5-2025-08-07_high", "polyglot", 88.0, source="epoch_hub", file=COPY[1], harness="diff",
                   verification_class="community")
    conn = p.run(LOOSE)
    assert resolved(conn) == [("gpt-5-2025-08-07 @ high | diff", "polyglot", 88.0, 2, "consensus", "community",
                               ["aider", "epoch_hub"])]
    # one configuration reaches the state: no pooling of two votes
    assert table(conn, "SELECT model, reasoning_state, n_configs, row_keys FROM pooled_states") == [
        ("gpt-5-2025-08-07", "high", 1, sorted([original, copy]))]


def test_without_the_republishes_declaration_they_stay_two_configurations():
    p = republished_panel()
    p.files.clear()
    p.score("gpt-5 (high)", "polyglot", 88.0, source="aider", file=ORIGINAL[1], harness="diff")
    p.score("gpt-5-2025-08-07_high", "polyglot", 88.0, source="epoch_hub", file=COPY[1], harness="diff")
    conn = p.run(LOOSE)
    assert len(resolved(conn)) == 2
    assert table(conn, "SELECT n_configs FROM pooled_states") == [(2,)]


def test_a_disagreeing_copy_loses_to_the_dated_original():
    p = republished_panel()
    original = p.score("gpt-5 (high)", "polyglot", 88.0, source="aider", file=ORIGINAL[1], harness="diff",
                       verification_class="community", evaluated_on=dt.date(2025, 8, 23))
    copy = p.score("gpt-5-2025-08-07_high", "polyglot", 80.0, source="epoch_hub", file=COPY[1], harness="diff",
                   verification_class="community")
    conn = p.run(LOOSE)
    assert resolved(conn) == [("gpt-5-2025-08-07 @ high | diff", "polyglot", 88.0, 1, "tiebreak", "community", ["aider"])]
    assert exclusions(conn, "resolved_cells") == {copy: "older_evaluation"}
    assert original not in exclusions(conn, "resolved_cells")


def test_same_date_and_class_falls_to_the_source_trust_order():
    p = republished_panel()
    p.score("gpt-5 (high)", "polyglot", 88.0, source="aider", file=ORIGINAL[1], harness="diff",
            verification_class="community")
    copy = p.score("gpt-5-2025-08-07_high", "polyglot", 80.0, source="epoch_hub", file=COPY[1], harness="diff",
                   verification_class="community")
    conn = p.run(LOOSE)
    assert [row[2] for row in resolved(conn)] == [88.0]
    assert exclusions(conn, "resolved_cells") == {copy: "lower_source_trust"}
    # with the order reversed the copy wins: the rank is configuration, not code
    conn = p.run(LOOSE.replace(source_trust_order=["epoch_hub", "aider"]))
    assert [row[2] for row in resolved(conn)] == [80.0]


def test_verification_class_is_preferred_before_dates_and_then_carried_to_the_modeled_observation():
    p = Panel().benchmark("gpqa")
    p.model("m").model("other")
    p.score("other", "gpqa", 0.30, verification_class="unverified")  # so the family varies
    vendor = p.score("m", "gpqa", 0.80, verification_class="vendor_reported", evaluated_on=dt.date(2026, 1, 1))
    p.score("m", "gpqa", 0.60, verification_class="independent", evaluated_on=dt.date(2025, 1, 1))
    conn = p.run(LOOSE)
    assert exclusions(conn, "resolved_cells") == {vendor: "weaker_verification"}
    assert table(conn, "SELECT score, resolution, verification_class FROM resolved_cells WHERE model_id = 'm'") == [
        (0.6, "tiebreak", "independent")]
    assert table(conn, "SELECT verification_class FROM pooled_states WHERE model = 'm'") == [("independent",)]
    assert table(conn, "SELECT model, round(u, 6), verification_class FROM modeled_observations ORDER BY 1") == [
        ("m", 0.6, "independent"), ("other", 0.3, "unverified")]


def test_agreeing_reports_of_mixed_classes_keep_the_strongest_class():
    p = Panel().benchmark("gpqa")
    p.model("m")
    p.score("m", "gpqa", 0.60, verification_class="unverified")
    p.score("m", "gpqa", 0.605, verification_class="community")
    conn = p.run(LOOSE)
    assert table(conn, "SELECT resolution, verification_class FROM resolved_cells") == [("consensus", "community")]
