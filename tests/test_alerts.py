"""A failed run leaves one line in the alerts log naming its failed steps and the checks that did not pass."""

import json

import dagster as dg

from atlas_assets.defs.alerts import alerts_log_path, run_failure_alerts


@dg.asset
def guarded_table() -> None:
    return None


@dg.asset_check(asset=guarded_table, blocking=True)
def guarded_table_is_sound() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False, metadata={"problem": "a broken input"})


@dg.asset(deps=[guarded_table])
def downstream_table() -> None:
    return None


def test_a_failed_blocking_check_is_alerted_with_its_name(tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_HOME", str(tmp_path))
    with dg.instance_for_test() as instance:
        result = dg.materialize([guarded_table, guarded_table_is_sound, downstream_table], instance=instance,
                                raise_on_error=False)
        assert not result.success
        run = instance.get_run_by_id(result.run_id)
        failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.RUN_FAILURE)
        context = dg.build_run_status_sensor_context(
            sensor_name="run_failure_alerts", dagster_instance=instance, dagster_run=run, dagster_event=failure,
        ).for_run_failure()
        run_failure_alerts(context)
    lines = alerts_log_path().read_text().splitlines()
    assert len(lines) == 1
    alert = json.loads(lines[0])
    assert alert["run_id"] == result.run_id
    assert {"check": "guarded_table_is_sound", "asset": "guarded_table", "severity": "ERROR"} in alert["failed_checks"]
    assert alert["failed_steps"]  # the check's step failed the run; downstream_table never ran
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert materialized == {"guarded_table"}
