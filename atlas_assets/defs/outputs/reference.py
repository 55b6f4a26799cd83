"""Scores on the frozen reference scale (issue 12): asset `reference_scores` and its checks.

The latest publishable fit linked onto the reference version named in outputs.yaml `reference_scale`
(atlas_assets/outputs/reference_scale.py): `reference_state_scores` and `reference_model_scores` (the fit's
state and model tables on the reference's display units) and `reference_scale_drift` (states whose modeled
observations are the same as in the fit of the current publication: how far each moved, on the reference and
on the fits' own anchored scales, and whether within its 90% interval) and `reference_conversions` (the
old->new conversion from the last good publication's reference version when the scale changed since, and from
every other frozen version; empty without either). Each table carries `fit`. With `version: null` the asset
records that no reference is in force and writes nothing.
"""


from pathlib import Path

import dagster as dg
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.refresh import asset_refresh
from atlas_assets.defs.outputs.assets import _md, _stamp, publishable_inputs
from atlas_assets.storage import replace_tables

TABLES = ("reference_state_scores", "reference_model_scores", "reference_scale_drift", "reference_conversions")


def _published() -> tuple[str | None, str | None]:
    """(fit, reference version) of the current publication, the last good one (publishing switches CURRENT only
    when it succeeded); None for what it does not say (nothing published, or it predates reference scales)."""
    import json

    from atlas_assets.publish.store import NoPublication, current_folder, read_manifest

    try:
        folder = current_folder()
        fit = read_manifest(folder)["stamps"]["fit"]
    except (NoPublication, OSError, KeyError, ValueError):
        return None, None
    try:
        rules = json.loads((folder / "methodology.json").read_text()).get("rules") or {}
    except (OSError, ValueError):
        rules = {}
    return fit, rules.get("reference_scale")


def _previous_fit_dir(current: Path) -> Path | None:
    """The fit of the current publication when it is another fit whose folder still exists."""
    fit, _ = _published()
    if fit is None:
        return None
    folder = current.parent / fit
    return folder if fit != current.name and (folder / "posterior.nc").exists() else None


def drift_table(previous_dir: Path, loaded, reference, min_shared: int, on_reference: pd.DataFrame) -> pd.DataFrame:
    from atlas_assets.model.fit_process import load_fit
    from atlas_assets.model.scores import state_scores
    from atlas_assets.outputs import reference_scale as rs

    previous = load_fit(previous_dir)
    untouched = rs.untouched_states(pd.read_csv(previous_dir / "modeled_observations.csv"),
                                    pd.read_csv(loaded.fit_dir / "modeled_observations.csv"))
    frozen = rs.scale_drift(rs.scores_on_reference(previous, reference, min_shared)["state_scores"], on_reference,
                            untouched).assign(scale=f"reference {reference.version}")
    anchored = rs.scale_drift(state_scores(previous.idata, previous.stan_input, previous.config),
                              state_scores(loaded.idata, loaded.stan_input, loaded.config),
                              untouched).assign(scale="anchored")
    return pd.concat([frozen, anchored], ignore_index=True).assign(previous_fit=previous_dir.name)


@dg.asset(
    deps=["capability_scores"],
    pool="duckdb",
    kinds={"duckdb", "python"},
    description="The fit's state and model scores on the frozen reference scale (outputs.yaml reference_scale), "
    "how far states with unchanged results moved since the current publication's fit, on both scales, and the "
    "old->new conversion (alpha, gamma, shared families) from the last publication's reference version when the "
    "scale changed since and from every other frozen version.",
)
def reference_scores(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.outputs import reference_scale as rs

    # also a function of which fit and reference version are published now (the drift compares with that fit, the
    # conversion starts from that version) and of the reference files, which the publication fingerprint covers
    published_fit, published_version = _published()
    refresh = asset_refresh(context, "publication", reads_fit=True,
                            settings={"published_fit": published_fit or "none",
                                      "published_reference": published_version or "none"})
    if reused := refresh.reuse_tables(duckdb, *TABLES):
        return reused
    fit_dir, loaded, _draws, cfg, _eligible = publishable_inputs(context)
    settings_ = cfg.get("reference_scale") or {}
    version = settings_.get("version")
    if not version:
        return refresh.computed({"reference_version": "none (outputs.yaml reference_scale.version: null)"})
    min_shared = int(settings_["min_shared_families"])
    try:
        reference = rs.load_reference(version)
        _, link = rs.fit_on_reference(loaded, reference, min_shared)
        tables = rs.scores_on_reference(loaded, reference, min_shared)
        conversions = rs.conversion_table(reference, published_version, min_shared)
    except rs.ReferenceScaleError as error:
        raise dg.Failure(description=str(error)) from None
    previous = _previous_fit_dir(fit_dir)
    drift = (drift_table(previous, loaded, reference, min_shared, tables["state_scores"]) if previous is not None
             else pd.DataFrame(columns=["model", "reasoning_state", "display_mean_old", "display_mean_new", "move",
                                        "within_interval", "scale", "previous_fit"]))
    frames = {"reference_state_scores": _stamp(tables["state_scores"], fit_dir),
              "reference_model_scores": _stamp(tables["model_scores"], fit_dir),
              "reference_scale_drift": _stamp(drift, fit_dir),
              "reference_conversions": _stamp(conversions, fit_dir)}
    with duckdb.get_connection() as conn:
        replace_tables(conn, frames)
    metadata = {
        "fit_dir": dg.MetadataValue.path(str(fit_dir)),
        "reference_version": reference.version,
        "reference_fit": reference.fit,
        "linked_families": len(link.families),
        "link_B_mean": float(link.B.mean()),
        "link_A_mean": float(link.A.mean()),
        "previous_fit": previous.name if previous is not None else "none (no other fit is published)",
        "published_reference": published_version or "none",
        "conversions": _md(conversions[["old_version", "new_version", "alpha", "gamma", "n_shared_families",
                                        "since_last_publication"]], 10) if len(conversions) else "none",
        "top_states": _md(tables["state_scores"].sort_values("display_mean", ascending=False)[
            ["model", "reasoning_state", "display_mean", "display_lower", "display_upper"]], 10),
    }
    for scale, rows in drift.groupby("scale"):
        summary = rs.drift_summary(rows)
        metadata[f"drift_{scale.split()[0]}"] = dg.MetadataValue.json(summary)
    return refresh.computed(metadata)


@dg.asset_check(asset=reference_scores, blocking=True,
                description="Every fitted state has a reference score with an ordered interval, from one fit.")
def reference_scores_complete(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    import duckdb as duckdb_module

    with duckdb.get_connection() as conn:
        try:
            states = conn.execute("SELECT fit, display_lower, display_mean, display_upper FROM reference_state_scores").df()
        except duckdb_module.Error:
            return dg.AssetCheckResult(passed=True, metadata={"note": "no reference scale in force"})
    ordered = bool(((states["display_lower"] <= states["display_mean"]) &
                    (states["display_mean"] <= states["display_upper"])).all())
    return dg.AssetCheckResult(passed=ordered and states["fit"].nunique() == 1 and len(states) > 0,
                               metadata={"states": len(states), "fits": int(states["fit"].nunique())})


@dg.asset_check(asset=reference_scores, blocking=False,
                description="States whose results did not change moved within their 90% interval on the reference "
                "scale (the frozen scale's promise; WARN, with the states that did not).")
def reference_drift_within_intervals(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    import duckdb as duckdb_module

    with duckdb.get_connection() as conn:
        try:
            drift = conn.execute("SELECT * FROM reference_scale_drift WHERE scale LIKE 'reference%'").df()
        except duckdb_module.Error:
            drift = pd.DataFrame()
    if drift.empty:
        return dg.AssetCheckResult(passed=True, metadata={"note": "no earlier published fit to compare with"})
    outside = drift[~drift["within_interval"].astype(bool)]
    return dg.AssetCheckResult(
        passed=outside.empty, severity=dg.AssetCheckSeverity.WARN,
        metadata={"untouched_states": len(drift), "outside_interval": len(outside),
                  "median_abs_move": float(drift["move"].abs().median()),
                  "outside": _md(outside[["model", "reasoning_state", "move"]], 20)})
