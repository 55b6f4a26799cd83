"""The one Definitions object loads, with the stage groups, the job, the schedule and the pools users rely on."""

from __future__ import annotations

import dagster as dg

from atlas_assets.definitions import defs

STAGE_GROUPS = {"registry", "ingest", "clean", "model", "outputs", "cost", "validation", "publish"}


def asset_groups() -> dict[str, str]:
    graph = defs.resolve_asset_graph()
    return {key.to_user_string(): graph.get(key).group_name for key in graph.get_all_asset_keys()}


def test_definitions_load_and_every_asset_sits_in_a_stage_group():
    groups = asset_groups()
    assert set(groups.values()) == STAGE_GROUPS
    expected = {
        "registry_benchmarks": "registry", "registry_model_ids": "registry",
        "epoch_hub_scores": "ingest", "swe_bench_scores": "ingest", "raw_scores": "ingest",
        "validation_fold": "validation", "validation_summary": "validation",
        "publication": "publish", "report": "publish",
        "raw_costs": "ingest", "cost_observations": "cost", "audit_cost_exclusions": "cost", "cost_fit": "cost",
        "cost_index": "cost", "cost_frontier": "cost",
    }
    for asset, group in expected.items():
        assert groups[asset] == group, asset


def test_lineage_runs_from_registry_through_ingest():
    graph = defs.resolve_asset_graph()
    parents = lambda name: {k.to_user_string() for k in graph.get(dg.AssetKey(name)).parent_keys}  # noqa: E731
    assert "registry_benchmarks" in parents("epoch_hub_scores")
    assert {"epoch_hub_scores", "swe_bench_scores"} <= parents("raw_scores")
    assert "raw_scores" in parents("registry_model_ids")


# a fold samples for minutes and writes once, retrying on the file's lock (test_validation_writes.py)
RETRYING_WRITERS = {"validation_fold"}


def test_duckdb_writers_share_the_single_writer_pool():
    for assets_def in defs.resolve_asset_graph().assets_defs:
        if "duckdb" in {kind for spec in assets_def.specs for kind in spec.kinds}:
            if {k.to_user_string() for k in assets_def.keys} & RETRYING_WRITERS:
                assert assets_def.op.pool is None, assets_def.key
                continue
            assert assets_def.op.pool == "duckdb", assets_def.key


def test_every_asset_has_a_check_and_blocking_checks_exist():
    graph = defs.resolve_asset_graph()
    checked = {key.asset_key for key in graph.asset_check_keys}
    for key in graph.get_all_asset_keys():
        if graph.get(key).group_name in STAGE_GROUPS:
            assert key in checked, f"{key.to_user_string()} has no asset check"


def test_main_job_and_nightly_schedule():
    job = defs.resolve_job_def("atlas_job")
    assert job is not None
    schedule = defs.resolve_schedule_def("nightly_refresh")
    assert schedule.cron_schedule == "0 3 * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING


def test_the_jobs_split_at_the_partitioned_folds():
    # atlas_job stops before the folds (one partition per study x fold); publish_job needs every fold
    selected = lambda job: {k.to_user_string() for k in defs.resolve_job_def(job).asset_layer.selected_asset_keys}  # noqa: E731
    assert "capability_scores" in selected("atlas_job") and "validation_fold" not in selected("atlas_job")
    assert selected("validation_job") == {"validation_fold"}
    # the cost model has a job of its own: a failed cost fit must not stop the capability refresh
    assert {"cost_fit", "cost_index"} <= selected("cost_job") and not selected("cost_job") & selected("atlas_job")
    assert defs.resolve_schedule_def("nightly_cost_refresh").job_name == "cost_job"
    assert selected("publish_job") == {"validation_summary", "publication", "report"}
    # intraday calibrate-in: ingest and cleaning feed calibrated_states against the current fit, never a refit
    intraday = selected("calibrate_job")
    assert {"calibrated_states", "family_observations", "audit_exclusions", "epoch_hub_scores"} <= intraday
    assert not intraday & {"stan_data", "capability_fit", "fit_diagnostics", "capability_scores"}
    assert defs.resolve_schedule_def("intraday_calibrate").job_name == "calibrate_job"
    graph = defs.resolve_asset_graph()
    keys = graph.get(dg.AssetKey("validation_fold")).partitions_def.get_partition_keys()
    assert keys[:2] == ["forward", "forward_strict"] and "masked_4" in keys and "sensitivity_7" in keys
