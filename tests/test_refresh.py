"""The refresh decision (atlas_assets/defs/refresh.py) on a two-asset graph in a real Dagster instance: a step
reuses its last result only while its upstream data versions, its specification and its products are unchanged,
and says so in its materialization; anything that moved makes it recompute, naming what moved."""

import dagster as dg
import pytest

from atlas_assets.defs import refresh as refresh_module
from atlas_assets.defs.refresh import COMPUTED_IN, REASON, RECOMPUTED, asset_refresh

WORK: list[str] = []        # one entry per real computation of `summary`
PRODUCT = {"present": True}  # whether what `summary` wrote is still there


class SourceConfig(dg.Config):
    content: str = "v1"


@dg.asset
def source_table(config: SourceConfig) -> dg.MaterializeResult:
    return dg.MaterializeResult(data_version=dg.DataVersion(f"content-{config.content}"))


@dg.asset(deps=[source_table])
def summary(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    refresh = asset_refresh(context, "fit")
    if reused := refresh.reuse(still_there=PRODUCT["present"], what="its table is in place"):
        return reused
    WORK.append(context.run_id)
    return refresh.computed({"rows": len(WORK)})


def run(instance, content: str = "v1") -> tuple[dg.ExecuteInProcessResult, dict]:
    result = dg.materialize([source_table, summary], instance=instance,
                            run_config={"ops": {"source_table": {"config": {"content": content}}}})
    assert result.success
    return result, result.asset_materializations_for_node("summary")[0]


def value(materialization, key):
    return materialization.metadata[key].value


@pytest.fixture
def instance():
    WORK.clear()
    PRODUCT["present"] = True
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def test_unchanged_inputs_reuse_the_result_and_say_since_which_run(instance):
    first, computed = run(instance)
    assert value(computed, RECOMPUTED) is True and value(computed, REASON) == "recomputed: first materialization"
    second, reused = run(instance)
    third, reused_again = run(instance)
    assert WORK == [first.run_id]  # computed once
    for materialization in (reused, reused_again):
        assert value(materialization, RECOMPUTED) is False
        reason = value(materialization, REASON)
        assert reason.startswith("skipped: source_table content-v1") and f"since run {first.run_id[:8]}" in reason
        assert reason.endswith("its table is in place")
        assert value(materialization, COMPUTED_IN) == first.run_id
        assert value(materialization, "rows") == 1  # the earlier metadata is carried
        assert materialization.tags["dagster/data_version"] == computed.tags["dagster/data_version"]


def test_a_new_upstream_version_recomputes_and_names_it(instance):
    run(instance, "v1")
    second, changed = run(instance, "v2")
    assert len(WORK) == 2 and WORK[-1] == second.run_id
    assert value(changed, RECOMPUTED) is True
    assert value(changed, REASON) == "recomputed: changed: source_table content-v1 -> content-v2"
    _, back = run(instance, "v1")  # back to the first content: the last result was of v2, so compute again
    assert len(WORK) == 3 and value(back, RECOMPUTED) is True


def test_a_changed_specification_or_a_missing_product_recomputes(instance, monkeypatch):
    run(instance)
    monkeypatch.setattr("atlas_assets.spec.specification_fingerprint", lambda scope="fit": "f" * 64)
    _, moved = run(instance)
    assert len(WORK) == 2 and value(moved, REASON).startswith("recomputed: changed: fit_specification ")
    PRODUCT["present"] = False
    _, missing = run(instance)
    assert len(WORK) == 3 and "earlier result is gone" in value(missing, REASON)


def test_table_version_is_a_content_hash():
    import duckdb

    with duckdb.connect() as conn:
        conn.execute("CREATE TABLE t AS SELECT range AS a, range * 0.5 AS b FROM range(100)")
        before = refresh_module.table_version(conn, "t")
        conn.execute("CREATE OR REPLACE TABLE t AS SELECT * FROM t ORDER BY a DESC")  # same rows, other order
        assert refresh_module.table_version(conn, "t") == before
        conn.execute("UPDATE t SET b = 1.5 WHERE a = 7")
        assert refresh_module.table_version(conn, "t") != before
