"""End to end through a Dagster instance: `publication` and `report` with their checks, loaded the way
definitions.py loads the stage, from a fixture fit folder announced as the latest `capability_fit` and
fixture tables in a DuckDB file under ATLAS_HOME; then the refusals leave the publication as it was.

The instance is an ephemeral one (in-memory run and event storage, the same DagsterInstance API the assets
use to find the latest fit): a SQLite-backed test instance costs ~4 s to create here and ~60 ms per event.
The CLI path of the whole project is covered by the other stages' CLI tests."""

from __future__ import annotations

import json
import shutil

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from atlas_assets.defs import publish as publish_stage
from atlas_assets.publish import store
from tests.publish.fixtures import write_tables

pytestmark = pytest.mark.slow

STAGE_ASSETS = dg.load_assets_from_package_module(publish_stage, group_name="publish")
STAGE_CHECKS = dg.load_asset_checks_from_package_module(publish_stage)


def announce(instance: dg.DagsterInstance, fit_dir) -> None:
    instance.report_runless_asset_event(
        dg.AssetMaterialization("capability_fit", metadata={"fit_dir": dg.MetadataValue.path(str(fit_dir))}))


def run(instance, home, selection=None) -> dg.ExecuteInProcessResult:
    return dg.materialize([*STAGE_ASSETS, *STAGE_CHECKS], instance=instance, raise_on_error=False,
                          resources={"duckdb": DuckDBResource(database=str(home / "atlas.duckdb"))},
                          selection=selection)


def failure_text(result: dg.ExecuteInProcessResult) -> str:
    return " ".join(str(event.event_specific_data) for event in result.get_step_failure_events())


def test_stage_loads_into_the_publish_group_with_a_blocking_check():
    assert {a.key.to_user_string() for a in STAGE_ASSETS} == {"publication", "report"}
    assert {spec.group_name for a in STAGE_ASSETS for spec in a.specs} == {"publish"}
    blocking = {spec.name for c in STAGE_CHECKS for spec in c.check_specs if spec.blocking}
    assert "publication_current_verified" in blocking
    publication = next(a for a in STAGE_ASSETS if a.key.to_user_string() == "publication")
    assert publication.op.pool == "duckdb"
    parents = {k.to_user_string() for k in publication.asset_deps[publication.key]}
    assert {"capability_scores", "cell_predictions", "validation_summary"} <= parents


def test_publication_and_report_through_dagster(home, bundle):
    fit_dir = home / "model" / "fits" / bundle.fit
    root = home / "publications"
    with dg.DagsterInstance.ephemeral() as instance:
        announce(instance, fit_dir)
        result = run(instance, home)
        assert result.success, failure_text(result)
        checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
        assert checks == {"publication_current_verified": True, "publication_validation_present": True,
                          "publication_data_is_current": True, "publication_versions_readable": True,
                          "report_matches_publication": True, "publication_headlines_pass_the_gate": True}
        published = result.asset_materializations_for_node("publication")[0].metadata
        name = published["publication"].value
        assert published["new_version"].value is True and store.current_name(root) == name
        assert published["fit"].value == bundle.fit and published["data_sha256"].value == bundle.data_sha256
        shown = result.asset_materializations_for_node("report")[0].metadata
        page = root / name / "report" / "index.html"
        assert shown["report"].value == str(page) and page.exists()
        assert shown["report_url"].value == page.resolve().as_uri()
        assert shown["figure_leaderboard"].value.startswith("![leaderboard](data:image/png;base64,")
        assert {"figure_difficulty", "figure_reliability", "figure_calibration", "figure_forward"} <= set(shown)

        # the same fit and tables again: no new version, nothing even collected, and the materialization says why
        again = run(instance, home, "publication")
        assert again.success, failure_text(again)
        reused = again.asset_materializations_for_node("publication")[0].metadata
        assert reused["new_version"].value is False and reused["refresh/recomputed"].value is False
        assert reused["refresh/reason"].value.startswith("skipped: ")
        assert reused["refresh/reason"].value.endswith(f"publication {name} stays current, nothing republished")
        assert store.list_versions(root) == [name] and store.current_name(root) == name


def test_refusals_through_dagster_leave_the_publication_as_it_was(home, bundle):
    fit_dir = home / "model" / "fits" / bundle.fit
    root = home / "publications"
    with dg.DagsterInstance.ephemeral() as instance:
        announce(instance, fit_dir)
        assert run(instance, home, "publication").success
        name = store.current_name(root)
        before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}

        # a cell_predictions table of another fit
        other = bundle.tables["cell_predictions"].assign(fit="0123456789abcdef-0123456789abcdef-c4w1000d750s1")
        write_tables(home / "atlas.duckdb", {"cell_predictions": other})
        refused = run(instance, home, "publication")
        assert not refused.success
        assert "cell_predictions is stamped fit ['0123456789abcdef-0123456789abcdef" in failure_text(refused)
        write_tables(home / "atlas.duckdb", {"cell_predictions": bundle.tables["cell_predictions"]})

        # a fit made under another specification than the one in force
        stale = fit_dir.with_name(f"{bundle.data_sha256[:16]}-{'6' * 16}-c2w100d100s1")
        shutil.copytree(fit_dir, stale)
        (stale / "fingerprint.json").write_text(json.dumps({"data_sha256": bundle.data_sha256,
                                                            "spec_sha256": "6" * 64}))
        announce(instance, stale)
        refused = run(instance, home, "publication")
        assert not refused.success and "was made under specification" in failure_text(refused)

        # a fit that failed its gates
        failed = fit_dir.with_name(fit_dir.name + ".failed")
        shutil.copytree(fit_dir, failed)
        diagnostics = json.loads((failed / "diagnostics.json").read_text())
        diagnostics.update(passes=False, checks={**diagnostics["checks"], "divergences": False}, divergences=7)
        (failed / "diagnostics.json").write_text(json.dumps(diagnostics))
        announce(instance, failed)
        refused = run(instance, home, "publication")
        assert not refused.success and "gate_divergences failed" in failure_text(refused)

        assert store.current_name(root) == name
        assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_tampering_with_the_current_publication_fails_the_blocking_check(home, bundle):
    from atlas_assets.defs.publish.checks import publication_current_verified

    fit_dir = home / "model" / "fits" / bundle.fit
    root = home / "publications"
    with dg.DagsterInstance.ephemeral() as instance:
        announce(instance, fit_dir)
        assert run(instance, home, "publication").success
        tampered = store.current_name(root)
        target = root / tampered / "cell_predictions.csv"
        target.chmod(0o644)
        with open(target, "a") as handle:
            handle.write(target.read_text().splitlines()[-1] + "\n")  # one row more than was published
        checked = run(instance, home, dg.AssetSelection.checks(publication_current_verified))
        assert not checked.success
        (evaluation,) = checked.get_asset_check_evaluations()
        assert evaluation.passed is False
        assert "cell_predictions.csv" in json.dumps(evaluation.metadata["problems"].value)

        # publishing again does not reuse the damaged version: a new one, current and intact; the damaged
        # one stays (nothing is deleted) and the WARN check on every version names it
        again = run(instance, home)
        assert again.success, failure_text(again)
        assert store.current_name(root) not in (None, tampered)
        assert store.list_versions(root) == sorted([tampered, store.current_name(root)])
        readable = {e.check_name: e for e in again.get_asset_check_evaluations()}["publication_versions_readable"]
        assert readable.passed is False and tampered in json.dumps(readable.metadata["problems"].value)
        assert again.asset_materializations_for_node("report")
