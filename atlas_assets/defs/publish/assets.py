"""Publish stage (group `publish`): one versioned publication of the latest fit, and the report built from it.

`publication` gathers the artifacts of the latest `capability_fit` (its score tables from the fit
folder; the outputs and validation tables from DuckDB, each required to carry that fit's name),
stamps them with the fit's data hash and specification fingerprint, and writes them as a new
version under ATLAS_HOME/publications/ whose pointer `CURRENT` is switched last (atomic; see
atlas_assets/publish/store.py). It refuses, publishing nothing, when the fit is not publishable
(gates, specification), or when any artifact is missing, empty or of another fit. `report` reads
only the files of the current publication and writes its HTML page and PNGs beside them.
"""

import base64
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.outputs.assets import publishable_fit_dir
from atlas_assets.defs.refresh import asset_refresh, tables_exist, table_version


def _md_table(headers: list[str], rows: list[list]) -> dg.MetadataValue:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return dg.MetadataValue.md("\n".join(lines))


def _latest_cost_fit(context) -> Path | None:
    """The folder of the newest cost fit materialized (passed or failed its gates), if any."""
    event = context.instance.get_latest_materialization_event(dg.AssetKey("cost_fit"))
    if event is None or event.asset_materialization is None or "fit_dir" not in event.asset_materialization.metadata:
        return None
    return Path(event.asset_materialization.metadata["fit_dir"].value)


@dg.asset(
    deps=["capability_scores", "difficulty_bounds", "reliability_grades", "dimensionality_test", "cell_predictions",
          "calibrated_states", "predicted_states", "reference_scores", "active_panel", "cost_index", "cost_frontier",
          "family_quality", "comparability_verdicts", "skill_scores", "headline_gates",
          "validation_summary"],
    pool="duckdb",
    kinds={"duckdb", "python"},
    description="The artifacts of ONE fit (scores per state and model, reasoning effects, family parameters, "
    "difficulty bounds, reliability grades, dimensionality test, cell predictions, every validation table, a "
    "methodology record), each stamped with the fit's name, data hash and specification fingerprint, as CSV and "
    "parquet, written atomically as a new version under ATLAS_HOME/publications/<UTC time>-<data>-<spec>/ with a "
    "manifest (sha256 and rows per file); the pointer publications/CURRENT is switched last. Refuses when the fit "
    "is not publishable or any artifact is missing, empty or stamped with another fit. Identical content is not "
    "published twice.",
)
def publication(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.publish.artifacts import ARTIFACTS, PublicationRefused, collect_publication
    from atlas_assets.publish.config import load_publish_config
    from atlas_assets.publish.store import current_name, list_versions, publications_root, publish, verify_publication

    # what it would publish: the fit folder, and the content of every table it reads (also when written by hand)
    with duckdb.get_connection() as conn:
        tables = [a.name for a in ARTIFACTS if a.source != "fit_folder" and tables_exist(conn, a.name)]
        contents = {f"table {name}": table_version(conn, name) for name in tables}
    refresh = asset_refresh(context, "publication", reads_fit=True, also=contents, versions=contents)
    earlier = refresh.previous.metadata.get("publication") if refresh.previous is not None else None
    root = publications_root()
    current = current_name(root)
    intact = earlier is not None and current == earlier.value and not verify_publication(root / current)
    if reused := refresh.reuse(still_there=intact, what=f"publication {current} stays current, nothing republished",
                               overrides={"new_version": False, "pointer_moved": False}):
        return reused
    fit_dir = publishable_fit_dir(context)
    cfg = load_publish_config()
    refusal = None
    with duckdb.get_connection() as conn:
        try:
            bundle = collect_publication(conn, fit_dir, cfg["required_validation"], _latest_cost_fit(context))
        except PublicationRefused as refused:
            refusal = refused
    # raised outside the block: DuckDBResource.get_connection does not close its connection when the body
    # raises, and a connection left open in this process would hold the database file
    if refusal is not None:
        raise dg.Failure(description=str(refusal), metadata={"problems": dg.MetadataValue.json(refusal.problems)})
    outcome = publish(bundle, publications_root())
    if outcome.created:
        context.log.info(f"published {outcome.name} (previous: {outcome.previous})")
    else:
        context.log.info(f"identical content already published as {outcome.name}: no new version"
                         + (", pointer moved to it" if outcome.pointer_moved else ""))
    manifest = outcome.manifest
    artifacts = manifest["artifacts"]
    # the version folder's name: a new version (even of identical content, after a damaged one) is new data
    return refresh.computed(data_version=outcome.name, metadata={
        "publication": outcome.name,
        "folder": dg.MetadataValue.path(str(outcome.folder)),
        "new_version": outcome.created,
        "pointer_moved": outcome.pointer_moved,
        "previous": outcome.previous or "none",
        "fit": manifest["stamps"]["fit"],
        "data_sha256": manifest["stamps"]["data_sha256"],
        "spec_sha256": manifest["stamps"]["spec_sha256"],
        "content_sha256": manifest["content_sha256"],
        "files": len(manifest["files"]),
        "bytes": sum(f["bytes"] for f in manifest["files"].values()),
        "versions": len(list_versions(publications_root())),
        "empty_artifacts": dg.MetadataValue.json(manifest.get("notes") or {}),
        "artifacts": _md_table(["artifact", "rows", "note"],
                               [[a, info["rows"], info.get("note") or ""] for a, info in artifacts.items()]),
    })


@dg.asset(
    deps=["publication"],
    kinds={"html", "python"},
    description="One static HTML page with PNG figures built ONLY from the files of the current publication: "
    "leaderboard with intervals, reasoning effects, difficulty curves of contrasting families, reliability by "
    "grade, calibration and forward-in-time errors of the validation studies, the one-capability test, how it was "
    "made. Written into publications/<version>/report/ (a symlink switched atomically to the new build).",
)
def report(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    from atlas_assets.publish.config import load_publish_config
    from atlas_assets.publish.report import REPORT_FILE, build_report
    from atlas_assets.publish.store import (NoPublication, current_folder, current_name, install_report,
                                            publications_root, verify_publication)

    refresh = asset_refresh(context, "publication")
    page = refresh.previous.metadata.get("report") if refresh.previous is not None else None
    shown = refresh.previous.metadata.get("publication") if refresh.previous is not None else None
    in_place = (page is not None and Path(page.value).exists() and shown is not None
                and shown.value == current_name(publications_root()))
    if reused := refresh.reuse(still_there=in_place, what="its page of the current publication is in place"):
        return reused
    try:
        version = current_folder(publications_root())
    except NoPublication as missing:
        raise dg.Failure(description=str(missing)) from None
    problems = verify_publication(version)
    if problems:
        raise dg.Failure(description=f"publication {version.name} does not verify, no report built: {problems[:5]}",
                         metadata={"problems": dg.MetadataValue.json(problems)})
    cfg = load_publish_config()["report"]
    folder, result = install_report(version, lambda out: build_report(version, out, cfg))
    page = folder / REPORT_FILE
    for text in result.notes:
        context.log.warning(f"report: {text}")
    images = {
        f"figure_{name}": dg.MetadataValue.md(f"![{name}](data:image/png;base64,{base64.b64encode(png).decode()})")
        for name, png in result.images.items()
    }
    return refresh.computed({
        "report": dg.MetadataValue.path(str(page)),
        "report_url": dg.MetadataValue.url(page.resolve().as_uri()),
        "publication": result.publication,
        "sections": dg.MetadataValue.json(result.sections),
        "notes": dg.MetadataValue.json(result.notes),
        "leaderboard_top5": _md_table(
            ["#", "model", "state", "capability", "90% interval"],
            [[i + 1, r["model"], r["headline_state"], f"{r['display_mean']:.1f}",
              f"{r['display_lower']:.1f} – {r['display_upper']:.1f}"] for i, r in enumerate(result.leaderboard[:5])]),
        **images,
    })
