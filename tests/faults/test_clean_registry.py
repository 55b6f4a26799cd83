"""Value and identity faults the cleaning chain and the model registry must catch: the real SQL chain
(sql/01-07) on a real DuckDB file, fed raw rows through the cleaning tests' Panel, and the real registry
builder (registry/model_ids.py) on published identifiers.

Nothing lost here means: every raw row is either carried on or charged to exactly one audited reason
(audit_exclusions: stage, reason, subject = the row key), every stage conserves its rows
(rows_in = rows_kept + rows_excluded), and a re-run on the cleaned input keeps every good row.
"""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from atlas_assets.clean import run_chain
from atlas_assets.registry.model_ids import build_model_registry
from tests.clean.fixtures import LOOSE, Panel

MODELS = [f"m{i}" for i in range(1, 7)]


def panel(extra=None) -> Panel:
    """Six models on two bounded benchmarks (fractions), every score well inside the range."""
    p = Panel().benchmark("gpqa", floor=0.0).benchmark("mmlu", floor=0.25)
    for i, model in enumerate(MODELS, start=1):
        p.model(model)
        p.score(model, "gpqa", 0.4 + 0.05 * i)
        p.score(model, "mmlu", 0.35 + 0.06 * i)
    if extra:
        extra(p)
    return p


def run(p: Panel, path) -> tuple[duckdb.DuckDBPyConnection, list]:
    conn = p.connect(duckdb.connect(str(path)))
    return conn, run_chain(conn, LOOSE)


def accounted(conn) -> dict[str, str]:
    """Every raw row key -> 'kept' or the one reason it was excluded for (row stages 01-02)."""
    kept = {k for (k,) in conn.execute("SELECT row_key FROM screened_scores").fetchall()}
    excluded = conn.execute("SELECT subject, reason FROM audit_exclusions WHERE stage IN ('oriented_scores', "
                            "'screened_scores')").fetchall()
    subjects = [s for s, _ in excluded]
    assert len(subjects) == len(set(subjects)), "a row charged to two reasons"
    assert not kept & set(subjects)
    return {**{k: "kept" for k in kept}, **dict(excluded)}


def assert_nothing_lost(conn, counts, bad: dict[str, str]) -> None:
    raw = {k for (k,) in conn.execute("SELECT row_key FROM raw_scores").fetchall()}
    ledger = accounted(conn)
    assert set(ledger) == raw, f"raw rows neither kept nor audited: {raw - set(ledger)}"
    assert {k: ledger[k] for k in bad} == bad
    assert all(ledger[k] == "kept" for k in raw - set(bad))
    assert all(c.conserved for c in counts), [c.as_dict() for c in counts if not c.conserved]


@pytest.mark.parametrize("score,reason", [(-0.2, "outside_declared_range"), (1.35, "outside_declared_range"),
                                          (0.05, "below_half_floor")],
                         ids=["negative_score", "score_above_range", "score_below_half_the_guessing_floor"])
def test_an_impossible_score_is_excluded_with_its_reason(score, reason, tmp_path):
    bad = {}
    benchmark = "mmlu" if reason == "below_half_floor" else "gpqa"  # gpqa has no guessing floor, mmlu 0.25
    key = f"bad#1/{benchmark}"
    conn, counts = run(panel(lambda p: bad.setdefault(p.score("m1", benchmark, score, row_key=key), reason)),
                       tmp_path / "atlas.duckdb")
    assert_nothing_lost(conn, counts, bad)
    detail = conn.execute("SELECT stage, reason, benchmark, model_id, score, row_keys FROM audit_exclusions "
                          "WHERE subject = ?", [key]).fetchall()
    assert detail == [("screened_scores", reason, benchmark, "m1", pytest.approx(score), [key])]
    # the good report of the same cell still stands
    assert conn.execute("SELECT count(*) FROM modeled_observations WHERE model = 'm1'").fetchone()[0] == 2
    conn.close()
    again, counts = run(panel(), tmp_path / "rerun.duckdb")
    assert_nothing_lost(again, counts, {})


def test_an_unknown_benchmark_is_audited_never_guessed(tmp_path):
    bad = {}
    conn, counts = run(panel(lambda p: bad.setdefault(p.score("m2", "gpqa_diamond_v9", 0.6), "unregistered_benchmark")),
                       tmp_path / "atlas.duckdb")
    assert_nothing_lost(conn, counts, bad)
    assert conn.execute("SELECT count(*) FROM modeled_observations WHERE family = 'gpqa_diamond_v9'").fetchone()[0] == 0
    (key,) = bad
    assert conn.execute("SELECT benchmark FROM audit_exclusions WHERE subject = ?", [key]).fetchone() == ("gpqa_diamond_v9",)


def test_duplicate_rows_are_one_report_not_two_votes(tmp_path):
    twins = []
    conn, counts = run(panel(lambda p: twins.extend(p.score("m3", "gpqa", 0.55) for _ in range(2))), tmp_path / "a.duckdb")
    assert_nothing_lost(conn, counts, {})
    cell = conn.execute("SELECT n_reports, resolution, score FROM resolved_cells WHERE model_id = 'm3' AND benchmark = 'gpqa'"
                        ).fetchall()
    # m3 already had 0.55 on gpqa: three identical reports, one consensus cell, no weight for repetition
    assert cell == [(3, "consensus", pytest.approx(0.55))]
    assert conn.execute("SELECT count(*) FROM modeled_observations WHERE model = 'm3' AND family = 'gpqa'").fetchone()[0] == 1


def test_an_unknown_reasoning_label_is_audited_and_kept_out_of_the_fit(tmp_path):
    ids = ["claude-opus-4-5-20251101_32K", "claude-opus-4-5-20251101_ultrathink"]
    published = pd.DataFrame({"model_id": ids, "model_name": None, "organization": None, "released_on": None,
                              "source": "epoch_hub", "file": "gpqa_diamond.csv"})
    model_ids, _, audit = build_model_registry(published)
    (unknown,) = audit[audit["kind"] == "unknown_reasoning_label"].to_dict("records")
    assert unknown["subject"] == ids[1] and unknown["source"] == "epoch_hub" and unknown["file"] == "gpqa_diamond.csv"
    assert "setting 'ultrathink' is in no rule" in unknown["detail"] and "not guessed" in unknown["detail"]
    mapped = model_ids.set_index("model_id")
    assert mapped.loc[ids[0], "reasoning_state"] == "high" and pd.isna(mapped.loc[ids[1], "reasoning_state"])

    def extra(p: Panel) -> None:
        for model_id in ids:
            row = mapped.loc[model_id]
            p.model(model_id, row["model"], None if pd.isna(row["reasoning_state"]) else row["reasoning_state"])
            p.score(model_id, "gpqa", 0.7)
            p.score(model_id, "mmlu", 0.72)

    conn, counts = run(panel(extra), tmp_path / "atlas.duckdb")
    assert_nothing_lost(conn, counts, {})  # the rows are not dropped at the row stages ...
    held = conn.execute("SELECT reason, subject FROM audit_exclusions WHERE stage = 'modeled_observations' "
                        "AND subject LIKE 'claude-opus-4-5-20251101 / %' ORDER BY subject").fetchall()
    # ... but the unknown setting never reaches the fit, and it is on the ledger with its reason
    assert held == [("unknown_reasoning_state", "claude-opus-4-5-20251101 / unknown :: gpqa"),
                    ("unknown_reasoning_state", "claude-opus-4-5-20251101 / unknown :: mmlu")]
    modeled = conn.execute("SELECT DISTINCT reasoning_state FROM modeled_observations "
                           "WHERE model = 'claude-opus-4-5-20251101'").fetchall()
    assert modeled == [("high",)]
