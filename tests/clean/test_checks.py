"""The clean-stage checks: their SQL verdicts on fixtures (passing and tampered), and the Dagster
assets + checks materialized in process on a small DuckDB file."""

from __future__ import annotations

import importlib

import dagster as dg
import duckdb
import pytest
from dagster_duckdb import DuckDBResource

from atlas_assets.clean import STAGE_NAMES, CleaningConfig, record_history, run_chain, stage_counts
from atlas_assets.clean import verify

from .fixtures import Panel

CONFIG = CleaningConfig.load().replace(min_models_per_family=3, min_families_per_model=2, primary_min_models=3)


def small_panel() -> Panel:
    p = Panel()
    p.benchmark("gpqa", floor=0.25, items=198)
    p.benchmark("mmlu", range_max=100.0, unit="percent", floor=0.25)
    p.benchmark("err", direction="lower")
    p.benchmark("arena", kind="rating", range_min=None, range_max=None, unit="elo")
    p.benchmark("odd", direction="target")
    for i in range(6):
        m = f"m{i}"
        p.model(m)
        p.score(m, "gpqa", 0.40 + 0.05 * i)
        p.score(m, "mmlu", 40.0 + 6 * i, shots=5)
        p.score(m, "err", 0.50 - 0.05 * i)
        p.score(m, "arena", 1000.0 + 30 * i)
        p.score(m, "odd", 0.5)
    p.score("m0", "gpqa", 0.41)          # consensus duplicate
    p.score("m1", "gpqa", 0.20)          # conflict
    p.score("m2", "mmlu", 10.0)          # below half the floor
    p.score("m3", "gpqa", 0.6, harness="agent")  # a second configuration -> pooled
    p.score("unknown", "gpqa", 0.5)      # unmapped identifier
    return p


@pytest.fixture
def chained():
    conn = small_panel().connect()
    run_chain(conn, CONFIG)
    return conn


def test_every_sql_verdict_passes_on_a_clean_run(chained):
    for stage in STAGE_NAMES:
        assert verify.conservation(chained, stage).passed, stage
    assert verify.ledger_complete(chained).passed
    assert verify.orientation_rules_hold(chained).passed
    assert verify.screen_rules_hold(chained, CONFIG).passed
    assert verify.coverage_holds(chained, CONFIG).passed
    assert verify.no_constant_families(chained, "family_observations", CONFIG).passed
    assert verify.contract_columns(chained).passed
    assert verify.conflict_queue_complete(chained).passed
    assert verify.harness_spread_consistent(chained).passed
    assert stage_counts(chained, "resolved_cells").extra["conflict_cells"] == 1


def test_conservation_fails_when_a_dropped_row_leaves_the_ledger(chained):
    chained.execute("DELETE FROM audit_exclusions WHERE stage = 'screened_scores'")
    verdict = verify.conservation(chained, "screened_scores")
    assert not verdict.passed and verdict.metadata["rows_excluded"] == 0
    assert not verify.ledger_complete(chained).passed


def test_conservation_fails_on_a_row_charged_twice(chained):
    chained.execute("INSERT INTO audit_exclusions SELECT * FROM audit_exclusions WHERE stage = 'oriented_scores' LIMIT 1")
    assert not verify.conservation(chained, "oriented_scores").passed


def test_coverage_check_catches_thresholds_the_output_does_not_meet(chained):
    stricter = CONFIG.replace(min_models_per_family=7)
    verdict = verify.coverage_holds(chained, stricter)
    assert not verdict.passed and verdict.metadata["thin_families"] > 0


def test_orientation_check_catches_an_unreflected_score(chained):
    chained.execute("UPDATE oriented_scores SET score = score_published WHERE direction = 'lower'")
    assert not verify.orientation_rules_hold(chained).passed


def test_conflict_share_drift_warns_on_a_jump(chained):
    counts = stage_counts(chained, "resolved_cells")
    quiet = counts.__class__(**{**counts.__dict__, "extra": {**counts.extra, "conflict_cells": 0}})
    record_history(chained, quiet, run_id="before", config=CONFIG)
    assert verify.conflict_share_drift(chained, CONFIG).passed  # one entry: nothing to compare
    record_history(chained, counts, run_id="now", config=CONFIG)
    verdict = verify.conflict_share_drift(chained, CONFIG)
    assert not verdict.passed and verdict.metadata["previous_conflict_share"] == 0
    assert verify.conflict_share_drift(chained, CONFIG.replace(conflict_share_jump=0.5)).passed


@pytest.mark.slow
def test_assets_and_checks_materialize_with_per_stage_metadata(tmp_path, monkeypatch):
    db = tmp_path / "atlas.duckdb"
    conn = duckdb.connect(str(db))
    small_panel().connect(conn)
    conn.close()
    package = importlib.import_module("atlas_assets.defs.clean")
    assets = dg.load_assets_from_package_module(package, group_name="clean")
    checks = dg.load_asset_checks_from_package_module(package)
    upstream = [dg.AssetSpec(key) for key in ("raw_scores", "registry_benchmarks", "registry_model_ids")]
    result = dg.materialize(
        [*upstream, *assets, *checks],
        resources={"duckdb": DuckDBResource(database=str(db))},
        selection=dg.AssetSelection.groups("clean"),
    )
    assert result.success
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert len(evaluations) == 29  # 27 + audit_bounds_suspect_benchmarks (WARN) + audit_bounds_consistent
    # the asset applies the production thresholds (config/cleaning.yaml), which this fixture meets
    assert {name for name, e in evaluations.items() if not e.passed} == set()
    blocking = {name for name, e in evaluations.items() if e.severity == dg.AssetCheckSeverity.ERROR}
    assert {f"{stage}_conservation" for stage in STAGE_NAMES} <= blocking
    metadata = result.asset_materializations_for_node("clean_screened_scores")[0].metadata
    assert metadata["rows_in"].value == metadata["rows_kept"].value + metadata["rows_excluded"].value
    assert "below_half_floor" in metadata["excluded_by_reason"].value


@pytest.mark.slow
def test_a_failing_blocking_check_stops_what_is_downstream(tmp_path, monkeypatch):
    # cap the coverage filter at one round on a panel that needs two: the output still holds a
    # model below the family minimum, the blocking coverage check fails, and the ledger summary
    # downstream of modeled_observations does not run
    capped = CleaningConfig.load().replace(min_models_per_family=2, min_families_per_model=2, max_iterations=1)
    monkeypatch.setattr(CleaningConfig, "load", classmethod(lambda cls, path=None: capped))
    p = Panel()
    for fam in "ABC":
        p.benchmark(fam)
    for m, fams in (("m1", "AB"), ("m2", "AB"), ("m3", "BC"), ("m4", "C")):
        p.model(m)
        for fam in fams:
            p.score(m, fam, 0.1 * int(m[1]) + 0.01 * "ABC".index(fam))
    db = tmp_path / "atlas.duckdb"
    conn = duckdb.connect(str(db))
    p.connect(conn)
    conn.close()
    package = importlib.import_module("atlas_assets.defs.clean")
    assets = dg.load_assets_from_package_module(package, group_name="clean")
    checks = [c for c in dg.load_asset_checks_from_package_module(package)
              if not any(k.name.endswith("_expectations") for k in c.check_keys)]  # no GX here: faster
    upstream = [dg.AssetSpec(key) for key in ("raw_scores", "registry_benchmarks", "registry_model_ids")]
    result = dg.materialize(
        [*upstream, *assets, *checks],
        resources={"duckdb": DuckDBResource(database=str(db))},
        selection=dg.AssetSelection.groups("clean"),
        raise_on_error=False,
    )
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not evaluations["modeled_observations_coverage"].passed
    assert evaluations["modeled_observations_coverage"].severity == dg.AssetCheckSeverity.ERROR
    materialized = {event.asset_key.to_user_string() for event in result.get_asset_materialization_events()}
    assert "modeled_observations" in materialized and "audit_exclusions" not in materialized


# --- issue 7 item 16: an empty stage table fails its checks instead of passing vacuously ---------


def test_coverage_check_fails_on_an_empty_modeled_observations(chained):
    chained.execute("DELETE FROM modeled_observations")
    verdict = verify.coverage_holds(chained, CONFIG)
    assert not verdict.passed and verdict.metadata["rows"] == 0


def test_ledger_check_fails_when_there_is_nothing_to_account_for():
    conn = Panel().connect()
    run_chain(conn, CONFIG)
    assert not verify.ledger_complete(conn).passed


@pytest.mark.parametrize("stage", STAGE_NAMES)
def test_every_stage_suite_fails_on_an_empty_table(chained, stage):
    from atlas_assets.quality.expectations import validate_frame

    chained.execute(f"DELETE FROM {stage}")
    suites = verify.table_suites(stage)
    results = [validate_frame(chained.execute(s.query).df(), s.expectations, suite_name=f"{stage}_{i}")
               for i, s in enumerate(suites)]
    assert not all(r.passed for r in results)
    assert "ExpectTableRowCountToBeBetween(min_value=1): observed 0" in results[0].metadata["failures"].value


def test_every_stage_suite_passes_on_the_clean_run(chained):
    from atlas_assets.quality.expectations import validate_frame

    for stage in STAGE_NAMES:
        for i, s in enumerate(verify.table_suites(stage)):
            result = validate_frame(chained.execute(s.query).df(), s.expectations, suite_name=f"{stage}_{i}")
            assert result.passed, (stage, result.metadata["failures"])
