"""sql/08_cost_observations.sql on hand-written tables: the score chain's mapping, every drop audited, one run
counted once, evaluators and the harness flag by config/cost.yaml's rules."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from atlas_assets.cost.clean import run_cost_stage
from atlas_assets.cost.config import load_cost_config
from atlas_assets.storage import ensure_source_tables

COST = dict(source_class="benchmark_release", snapshot_sha256="s" * 64, model_name=None, tasks=None, harness=None,
            sampling_protocol=None, evaluated_on=None, cost_unit="usd_per_task")


def cost(source, file, row, model_id, benchmark, usd, column="c", **extra):
    return {**COST, "row_key": f"{source}/{file}#{row}/{benchmark}/cost:{column}", "source": source, "file": file,
            "row_number": row, "model_id": model_id, "benchmark": benchmark, "cost_column": column,
            "reported_value": usd, "usd_per_task": usd, **extra}


@pytest.fixture
def conn():
    con = duckdb.connect()
    ensure_source_tables(con)
    con.execute("""INSERT INTO registry_benchmarks (benchmark, name, unit, floor, family, role, kind, sampling_protocol,
                   category, is_safety, is_composite, contamination) VALUES
                   ('swe_bench_verified', 'SWE', 'fraction', 0, 'swe', 'primary', 'bounded', 'single', 'coding', false, false, 'static'),
                   ('aider_polyglot', 'Aider', 'percent', 0, 'aider', 'primary', 'bounded', 'single', 'coding', false, false, 'static')""")
    con.execute("""INSERT INTO registry_model_ids VALUES ('gpt-5 (high)', 'gpt-5', 'high', NULL, 'r'),
                   ('gpt-5_high', 'gpt-5', 'high', NULL, 'r'), ('m1', 'm1', 'default', NULL, 'r'),
                   ('odd', NULL, NULL, NULL, 'unknown'), ('m2_unknown', 'm2', NULL, NULL, 'label')""")
    rows = [
        # one SWE-bench run: its total and per-instance cost on the board, mirrored on a second board, and
        # Epoch's copy rounded to cents -> one run of 5 rows
        cost("swe_bench", "leaderboards.json:bash-only", 1, "gpt-5 (high)", "swe_bench_verified", 0.459958, "cost",
             cost_unit="usd_per_run", reported_value=229.979, tasks=500),
        cost("swe_bench", "leaderboards.json:bash-only", 1, "gpt-5 (high)", "swe_bench_verified", 0.459958, "instance_cost"),
        cost("swe_bench", "leaderboards.json:Verified", 7, "gpt-5 (high)", "swe_bench_verified", 0.459958, "instance_cost",
             harness="mini-SWE-agent + GPT-5 | 1.15.0"),
        cost("swe_bench", "leaderboards.json:Verified", 7, "gpt-5 (high)", "swe_bench_verified", 0.459958, "cost",
             cost_unit="usd_per_run", reported_value=229.979, tasks=500, harness="mini-SWE-agent + GPT-5 | 1.15.0"),
        cost("epoch_hub", "swe_bench_bash.csv", 3, "gpt-5_high", "swe_bench_verified", 0.46, "Avg. Cost ($)"),
        # a different, dearer run of the same state (a newer harness version): its own run
        cost("epoch_hub", "swe_bench_bash.csv", 4, "gpt-5_high", "swe_bench_verified", 0.75, "Avg. Cost ($)"),
        # an agent system on the Verified board: harnessed; a best-of-n run: harnessed
        cost("swe_bench", "leaderboards.json:Verified", 9, "m1", "swe_bench_verified", 2.0, "instance_cost",
             harness="TRAE + M1"),
        cost("swe_bench", "leaderboards.json:Verified", 10, "m1", "swe_bench_verified", 1.0, "instance_cost",
             harness="mini-SWE-agent + M1 | 1.0", sampling_protocol="best_of_n"),
        cost("epoch_hub", "aider_polyglot_external.csv", 2, "m1", "aider_polyglot", 0.05, "Cost"),
        cost("other", "x.csv", 1, "m1", "aider_polyglot", 0.06, "Cost"),
        # dropped: unknown identifier, unmapped model, unmapped state, unregistered benchmark, not a cost
        cost("epoch_hub", "aider_polyglot_external.csv", 5, "nobody", "aider_polyglot", 0.1, "Cost"),
        cost("epoch_hub", "aider_polyglot_external.csv", 6, "odd", "aider_polyglot", 0.1, "Cost"),
        cost("epoch_hub", "aider_polyglot_external.csv", 7, "m2_unknown", "aider_polyglot", 0.1, "Cost"),
        cost("epoch_hub", "aider_polyglot_external.csv", 8, "m1", "no_such_benchmark", 0.1, "Cost"),
        cost("epoch_hub", "aider_polyglot_external.csv", 9, "m1", "aider_polyglot", -1.0, "Cost"),
    ]
    frame = pd.DataFrame(rows)
    con.register("f", frame)
    con.execute("INSERT INTO raw_costs BY NAME SELECT * FROM f")
    con.unregister("f")
    return con


def test_costs_map_like_scores_and_every_drop_is_audited(conn):
    counts = run_cost_stage(conn, load_cost_config())
    assert counts.conserved and (counts.rows_in, counts.rows_kept, counts.rows_excluded) == (15, 10, 5)
    reasons = dict(conn.execute("SELECT subject, reason FROM audit_cost_exclusions").fetchall())
    assert sorted(reasons.values()) == ["not_a_cost", "unknown_model_id", "unmapped_model", "unmapped_reasoning_state",
                                        "unregistered_benchmark"]
    assert reasons["epoch_hub/aider_polyglot_external.csv#5/aider_polyglot/cost:Cost"] == "unknown_model_id"
    states = set(conn.execute("SELECT DISTINCT model, reasoning_state FROM cost_observations").fetchall())
    assert states == {("gpt-5", "high"), ("m1", "default")}  # both published spellings of GPT-5 high: one state


def test_one_run_counts_once(conn):
    run_cost_stage(conn, load_cost_config())
    runs = conn.execute("""SELECT run_id, count(*), sum(weight), min(usd_per_task), max(usd_per_task)
                           FROM cost_observations WHERE model = 'gpt-5' GROUP BY 1 ORDER BY 4""").fetchall()
    assert [(n, w) for _, n, w, _, _ in runs] == [(5, pytest.approx(1.0)), (1, 1.0)]  # 0.46 ~ 0.459958; 0.75 apart
    assert runs[0][3:] == (pytest.approx(0.459958), 0.46)
    # two sources' runs of m1 on aider (0.05 and 0.06) disagree beyond the tolerance and rounding: two runs
    assert conn.execute("SELECT count(DISTINCT run_id) FROM cost_observations WHERE model = 'm1' "
                        "AND benchmark = 'aider_polyglot'").fetchone()[0] == 2


def test_harness_flag_and_evaluators(conn):
    run_cost_stage(conn, load_cost_config())
    flags = dict(conn.execute("SELECT file || '#' || row_number, harness_reason FROM cost_observations "
                              "WHERE cost_column = 'instance_cost' OR file <> 'leaderboards.json:bash-only'").fetchall())
    assert flags["leaderboards.json:Verified#9"] == "agent_system"           # not the board's mini-SWE-agent
    assert flags["leaderboards.json:Verified#10"] == "protocol_best_of_n"
    assert flags["leaderboards.json:Verified#7"] is None                     # the bash-only mirror: standard
    assert flags["leaderboards.json:bash-only#1"] is None
    evaluators = dict(conn.execute("SELECT source || '/' || file, any_value(evaluator) FROM cost_observations "
                                   "GROUP BY 1").fetchall())
    assert evaluators["epoch_hub/swe_bench_bash.csv"] == "swe_bench" == evaluators["swe_bench/leaderboards.json:Verified"]
    assert evaluators["epoch_hub/aider_polyglot_external.csv"] == "aider"
    assert evaluators["other/x.csv"] == "other/x.csv"                          # unlisted: its own evaluator


def test_one_run_under_two_labels_counts_once_and_two_benchmarks_are_two_runs(conn):
    """'Same run, two labels' (docs/cost.md): one run of m1 on aider_polyglot published by Aider under its own label
    and copied by Epoch under another source, file and model spelling is one run, its rows weighted 1 / rows; the
    same dollars on another registered benchmark are another run (another task set), weight 1."""
    conn.execute("INSERT INTO registry_model_ids VALUES ('m1 (default)', 'm1', 'default', NULL, 'r')")
    extra = pd.DataFrame([
        cost("aider", "polyglot_leaderboard.yml", 4, "m1 (default)", "aider_polyglot", 0.13, "total_cost",
             cost_unit="usd_per_run", reported_value=29.25, tasks=225),
        cost("epoch_hub", "aider_polyglot_external.csv", 11, "m1", "aider_polyglot", 0.13, "Cost"),
        cost("epoch_hub", "swe_bench_bash.csv", 12, "m1", "swe_bench_verified", 0.13, "Avg. Cost ($)"),
    ])
    conn.register("extra", extra)
    conn.execute("INSERT INTO raw_costs BY NAME SELECT * FROM extra")
    run_cost_stage(conn, load_cost_config())
    rows = conn.execute("""SELECT source, benchmark, run_id, run_rows, weight FROM cost_observations
                           WHERE model = 'm1' AND usd_per_task = 0.13 ORDER BY source, benchmark""").df()
    aider = rows[rows.benchmark == "aider_polyglot"]
    assert len(aider) == 2 and aider.run_id.nunique() == 1
    assert list(aider.weight) == [0.5, 0.5] and list(aider.run_rows) == [2, 2]
    swe = rows[rows.benchmark == "swe_bench_verified"]
    assert len(swe) == 1 and swe.run_id.iloc[0] != aider.run_id.iloc[0] and swe.weight.iloc[0] == 1.0
    # every run of m1 weighs exactly 1 in the likelihood, however many rows report it
    per_run = conn.execute("SELECT run_id, sum(weight) FROM cost_observations WHERE model = 'm1' GROUP BY 1").fetchall()
    assert all(w == pytest.approx(1.0) for _, w in per_run)
