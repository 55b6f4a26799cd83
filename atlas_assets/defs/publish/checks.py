"""Checks beside the publication: blocking where a reader would get files other than those published, WARN
for what a reader should know (empty validation, data newer than the fit, an earlier version gone bad)."""

import json

import dagster as dg

from atlas_assets.publish.artifacts import VALIDATION_ARTIFACTS
from atlas_assets.publish.store import (
    NoPublication,
    current_folder,
    list_versions,
    publications_root,
    read_manifest,
    verify_publication,
)


def _current():
    try:
        return current_folder(publications_root()), None
    except NoPublication as missing:
        return None, dg.AssetCheckResult(passed=False, metadata={"problems": str(missing)})


@dg.asset_check(asset="publication", blocking=True, description="The publication CURRENT names exists, and its "
                "files are exactly those of its manifest: each with the recorded bytes and sha256, every table "
                "with the recorded rows and stamped (fit, data_sha256, spec_sha256) as the manifest says, the "
                "methodology record too; nothing unlisted beside them (the report aside).")
def publication_current_verified() -> dg.AssetCheckResult:
    return verify_current()


def verify_current() -> dg.AssetCheckResult:
    """The blocking check's result (a plain function too, so tests need not build a Dagster context)."""
    folder, failed = _current()
    if failed:
        return failed
    problems = verify_publication(folder)
    manifest = read_manifest(folder)
    return dg.AssetCheckResult(passed=not problems, metadata={
        "publication": folder.name, "files": len(manifest.get("files", {})),
        "stamps": dg.MetadataValue.json(manifest.get("stamps")), "problems": dg.MetadataValue.json(problems[:30])})


@dg.asset_check(asset="publication", description="Completeness (WARN): every validation table of the current "
                "publication has rows; an empty one is published with a note and the report says so.")
def publication_validation_present() -> dg.AssetCheckResult:
    folder, failed = _current()
    if failed:
        return failed
    artifacts = read_manifest(folder)["artifacts"]
    empty = {name: artifacts.get(name, {}).get("note") or "absent" for name in VALIDATION_ARTIFACTS
             if artifacts.get(name, {}).get("rows", 0) == 0}
    return dg.AssetCheckResult(passed=not empty, severity=dg.AssetCheckSeverity.WARN,
                               metadata={"empty": dg.MetadataValue.json(empty)})


@dg.asset_check(asset="publication", description="Freshness (WARN): the current publication's data hash is the "
                "one of the latest stan_data materialization (otherwise newer data awaits a fit).")
def publication_data_is_current(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    folder, failed = _current()
    if failed:
        return failed
    published = read_manifest(folder)["stamps"]["data_sha256"]
    event = context.instance.get_latest_materialization_event(dg.AssetKey("stan_data"))
    latest = None
    if event is not None and event.asset_materialization is not None:
        value = event.asset_materialization.metadata.get("data_sha256")
        latest = getattr(value, "value", value)
    return dg.AssetCheckResult(passed=latest is None or latest == published, severity=dg.AssetCheckSeverity.WARN,
                               metadata={"published_data": published, "latest_stan_data": str(latest)})


@dg.asset_check(asset="publication", description="Every earlier version is still readable (WARN): its manifest "
                "parses and its files are present with the recorded sizes (hashes are verified for the current "
                "one by the blocking check).")
def publication_versions_readable() -> dg.AssetCheckResult:
    root = publications_root()
    problems = [p for name in list_versions(root) for p in verify_publication(root / name, hashes=False)]
    return dg.AssetCheckResult(passed=not problems, severity=dg.AssetCheckSeverity.WARN,
                               metadata={"versions": len(list_versions(root)), "problems": dg.MetadataValue.json(problems[:30])})


@dg.asset_check(asset="report", description="The report of the current publication exists and was built from it "
                "(its report.json names the version and content hash), every image it lists is there and on the "
                "page, and its leaderboard equals the top of the published model_scores.")
def report_matches_publication() -> dg.AssetCheckResult:
    import pandas as pd

    from atlas_assets.publish.config import load_publish_config
    from atlas_assets.publish.report import REPORT_FILE, REPORT_RECORD, leaderboard_rows

    folder, failed = _current()
    if failed:
        return failed
    report_dir = folder / "report"
    if not (report_dir / REPORT_FILE).exists() or not (report_dir / REPORT_RECORD).exists():
        return dg.AssetCheckResult(passed=False, metadata={"problems": f"no report in {report_dir}"})
    record = json.loads((report_dir / REPORT_RECORD).read_text())
    manifest = read_manifest(folder)
    page = (report_dir / REPORT_FILE).read_text()
    problems = []
    if record.get("publication") != folder.name or record.get("content_sha256") != manifest.get("content_sha256"):
        problems.append(f"report built from {record.get('publication')}, the current publication is {folder.name}")
    for image in record.get("images", []):
        if not (report_dir / image).is_file() or f'src="{image}"' not in page:
            problems.append(f"image {image} missing or not on the page")
    top = int(load_publish_config()["report"]["leaderboard_models"])
    expected = leaderboard_rows(pd.read_csv(folder / "model_scores.csv"), top)
    shown = pd.DataFrame(record.get("leaderboard", []), columns=["model", "display_mean"])
    if list(shown["model"]) != list(expected["model"]) or \
            not (shown["display_mean"].to_numpy() == expected["display_mean"].to_numpy()).all():
        problems.append("the report's leaderboard differs from the published model_scores")
    return dg.AssetCheckResult(passed=not problems, metadata={
        "publication": folder.name, "images": len(record.get("images", [])), "notes": dg.MetadataValue.json(record.get("notes")),
        "problems": dg.MetadataValue.json(problems)})


@dg.asset_check(asset="publication", blocking=True, description="The gate is applied in the current publication: "
                "every published headline in model_scores is a state that passes headline_gates, every state in "
                "state_scores carries the gate's verdict (published / not enough evidence), and each withheld one "
                "its reason.")
def publication_headlines_pass_the_gate() -> dg.AssetCheckResult:
    import pandas as pd

    from atlas_assets.publish.gates import FAIL, PASS

    folder, failed = _current()
    if failed:
        return failed
    gates = pd.read_csv(folder / "headline_gates.csv", keep_default_na=False, na_values=[""])
    models = pd.read_csv(folder / "model_scores.csv")
    states = pd.read_csv(folder / "state_scores.csv")
    verdict = dict(zip(zip(gates["model"], gates["reasoning_state"]), gates["gate_pass"].astype(bool)))
    problems = []
    shown = models[models["headline_status"] == PASS]
    bad = [m for m, s in zip(shown["model"], shown["headline_state"]) if not verdict.get((m, s), False)]
    if bad:
        problems.append(f"published headlines whose state fails the gate: {bad[:10]}")
    if "headline_gate" not in states.columns:
        problems.append("state_scores carries no headline_gate column")
    else:
        expected = [PASS if verdict.get(k) else FAIL for k in zip(states["model"], states["reasoning_state"])]
        if list(states["headline_gate"]) != expected:
            problems.append("state_scores' headline_gate disagrees with headline_gates")
        if states.loc[states["headline_gate"] == FAIL, "headline_gate_reason"].isna().any():
            problems.append("a withheld state without its reason in state_scores")
    return dg.AssetCheckResult(passed=not problems, metadata={
        "published_headlines": len(shown), "withheld_headlines": int((models["headline_status"] == FAIL).sum()),
        "problems": dg.MetadataValue.json(problems)})
