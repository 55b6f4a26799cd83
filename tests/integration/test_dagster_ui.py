"""The real UI server: `dagster dev` serves the asset graph by stage group and materializes assets over HTTP."""

from __future__ import annotations

import pytest

from tests.conftest import MIRROR, require_shared_data
from tests.integration.dagster_dev import DagsterDev

pytestmark = pytest.mark.slow

INGEST_AND_REGISTRY = ["registry_benchmarks", "epoch_hub_scores", "swe_bench_scores", "raw_scores", "registry_model_ids"]


@pytest.fixture(scope="module")
def dagster_dev(tmp_path_factory):
    require_shared_data()
    work = tmp_path_factory.mktemp("ui")
    server = DagsterDev(work, {"ATLAS_HOME": str(work / "atlas_home"), "ATLAS_MIRROR": str(MIRROR)}).start()
    yield server
    server.stop()


def test_ui_lists_assets_grouped_by_stage(dagster_dev):
    nodes = dagster_dev.graphql("{ assetNodes { assetKey { path } groupName hasAssetChecks } }")["assetNodes"]
    groups = {node["assetKey"]["path"][-1]: node["groupName"] for node in nodes}
    assert {groups[name] for name in ("registry_benchmarks", "registry_model_ids")} == {"registry"}
    assert {groups[name] for name in ("epoch_hub_scores", "swe_bench_scores", "raw_scores")} == {"ingest"}
    assert {"clean", "model"} <= set(groups.values())


def test_ui_materializes_ingest_and_registry_and_shows_checks(dagster_dev):
    run_id = dagster_dev.launch_assets(INGEST_AND_REGISTRY)
    assert dagster_dev.wait_for_run(run_id) == "SUCCESS", dagster_dev.log_path.read_text()[-4000:]
    data = dagster_dev.graphql(
        """{ assetNodes(assetKeys: [{path: ["raw_scores"]}]) {
               assetMaterializations(limit: 1) { runId metadataEntries { label ... on IntMetadataEntry { intValue } } }
               assetChecksOrError { ... on AssetChecks { checks { name executionForLatestMaterialization { status } } } }
           } }"""
    )["assetNodes"][0]
    materialization = data["assetMaterializations"][0]
    assert materialization["runId"] == run_id
    rows = {entry["label"]: entry.get("intValue") for entry in materialization["metadataEntries"]}
    assert rows["dagster/row_count"] > 3000
    statuses = {check["name"]: (check["executionForLatestMaterialization"] or {}).get("status") for check in data["assetChecksOrError"]["checks"]}
    assert statuses["raw_scores_expectations"] == "SUCCEEDED"
    assert statuses["raw_scores_benchmarks_registered"] == "SUCCEEDED"
