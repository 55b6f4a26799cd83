"""Model: Stan data from the cleaned matrix, the NUTS fit (in its own process), diagnostics, capability scores.

The fit runs through Dagster Pipes in a subprocess: PyStan leaves worker processes that
would keep a Dagster step process alive, and a subprocess also streams the sampler's
progress into the run log. Each fit lives in a folder named by the fingerprint of its
data and specification (atlas_assets/spec.py: SQL, Stan, config, the package's code,
library versions); an unchanged fingerprint reuses the finished fit instead of sampling
again. Only a fit that completed AND passed every convergence gate is moved into its
final folder; a failing one is kept beside it as `<name>.failed` for inspection, is
never reused, and nothing publishes from it (atlas_assets/model/publishable.py).
"""

import json
from pathlib import Path

import dagster as dg
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets import settings
from atlas_assets.defs.fit_folders import fit_in_subprocess
from atlas_assets.defs.refresh import asset_refresh, tables_exist
from atlas_assets.model.diagnostics import failure_reasons
from atlas_assets.model.stan_data import build_stan_data, load_model_config
from atlas_assets.model.publishable import UnpublishableFit, require_publishable_fit
from atlas_assets.model.warm_start import warm_start_source
from atlas_assets.spec import (
    changed_files,
    frame_hash,
    manifest_fingerprint,
    specification_fingerprint,
    specification_manifest,
)
from atlas_assets.storage import replace_rows, replace_tables

SCORE_TABLES = {
    "state_scores": "capability_state_scores",
    "model_scores": "capability_model_scores",
    "reasoning_effects": "reasoning_effects",
    "family_parameters": "family_parameters",
}


# (metric in diagnostics.json, its threshold key, its pass/fail key): one blocking check each.
DIAGNOSTIC_GATES = [
    ("max_rhat", "rhat_max", "rhat"),
    ("min_ess_bulk", "ess_bulk_min", "ess_bulk"),
    ("min_ess_tail", "ess_tail_min", "ess_tail"),
    ("divergences", "divergences_max", "divergences"),
    ("min_ebfmi", "ebfmi_min", "ebfmi"),
]


class FitConfig(dg.Config):
    """Sampler settings for one run; empty fields take the values in config/model.yaml."""

    chains: int | None = None
    warmup: int | None = None
    draws: int | None = None
    seed: int | None = None
    engine: str | None = None
    force_refit: bool = False


def model_dir() -> Path:
    return settings.atlas_home() / "model"


def _sampler_overrides(config: FitConfig) -> dict:
    chosen = {k: getattr(config, k) for k in ("chains", "warmup", "draws", "seed", "engine") if getattr(config, k) is not None}
    return {"sampler": chosen} if chosen else {}


@dg.asset(
    deps=["modeled_observations"],
    pool="duckdb",
    kinds={"duckdb", "stan"},
    description="The Stan data: modeled_observations in Stan order, with index maps naming every model, state and family.",
)
def stan_data(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    refresh = asset_refresh(context, "fit")
    earlier = refresh.previous.metadata.get("observations_path") if refresh.previous is not None else None
    with duckdb.get_connection() as conn:
        present = tables_exist(conn, "model_index_states", "model_index_models", "model_index_families")
    if reused := refresh.reuse(still_there=present and earlier is not None and Path(earlier.value).exists()):
        return reused
    with duckdb.get_connection() as conn:
        observations = conn.execute("SELECT * FROM modeled_observations").df()
    config = load_model_config()
    stan_input = build_stan_data(observations, config)
    data_hash = frame_hash(observations, ["model", "reasoning_state", "family"])
    manifest = specification_manifest()
    spec_hash = manifest_fingerprint(manifest)
    folder = model_dir() / "inputs" / f"{data_hash[:16]}-{spec_hash[:16]}"
    folder.mkdir(parents=True, exist_ok=True)
    observations.to_csv(folder / "modeled_observations.csv", index=False)
    (folder / "specification.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
    with duckdb.get_connection() as conn:
        replace_rows(conn, "model_index_states", stan_input.states, create=True)
        replace_rows(conn, "model_index_models", stan_input.models, create=True)
        replace_rows(conn, "model_index_families", stan_input.families, create=True)
    (folder / "fingerprint.json").write_text(json.dumps({"data_sha256": data_hash, "spec_sha256": spec_hash}))
    data = stan_input.data
    # the version names the fit folder's first two parts: the modeled data and the specification
    return refresh.computed(
        data_version=f"{data_hash[:16]}-{spec_hash[:16]}",
        metadata={
            "data_sha256": data_hash,
            "spec_sha256": spec_hash,
            "specification_parts": dg.MetadataValue.json({part: manifest_fingerprint({part: files})[:12]
                                                          for part, files in manifest.items()}),
            "observations_path": dg.MetadataValue.path(str(folder / "modeled_observations.csv")),
            "observations": data["N"],
            "models": data["M"],
            "reference_models": data["M_ref"],
            "states": data["S"],
            "families": data["J"],
        }
    )


def _current_inputs(context: dg.AssetExecutionContext) -> tuple[Path, dict]:
    event = context.instance.get_latest_materialization_event(dg.AssetKey("stan_data"))
    if event is None or event.asset_materialization is None:
        raise dg.Failure("stan_data has not been materialized")
    metadata = event.asset_materialization.metadata
    return Path(metadata["observations_path"].value), {
        "data_sha256": metadata["data_sha256"].value, "spec_sha256": metadata["spec_sha256"].value,
    }


@dg.asset(
    deps=["stan_data"],
    kinds={"stan", "python"},
    description="Posterior of stan/atlas.stan by NUTS (CmdStanPy where CmdStan exists, else PyStan), fitted in a Pipes "
    "subprocess; stored as NetCDF with score tables under var/model/fits/<fingerprint>/.",
)
def capability_fit(
    context: dg.AssetExecutionContext, config: FitConfig, pipes_subprocess_client: dg.PipesSubprocessClient
) -> dg.MaterializeResult:
    observations_path, fingerprint = _current_inputs(context)
    overrides = _sampler_overrides(config)
    sampler = load_model_config(overrides=overrides)["sampler"]
    run_settings = {k: sampler[k] for k in ("chains", "warmup", "draws", "seed")}
    settings_tag = "c{chains}w{warmup}d{draws}s{seed}".format(**run_settings)
    name = f"{fingerprint['data_sha256'][:16]}-{fingerprint['spec_sha256'][:16]}-{settings_tag}"
    final = model_dir() / "fits" / name
    common = {"fit_dir": dg.MetadataValue.path(str(final)), **fingerprint, "sampler_settings": dg.MetadataValue.json(run_settings)}

    manifest = json.loads((observations_path.parent / "specification.json").read_text())
    previous = _previous_fit_dir(context)
    previous_manifest = _read_json(previous / "specification.json") if previous else None
    changes = changed_files(previous_manifest, manifest)
    common["spec_changes_since_last_fit"] = dg.MetadataValue.json(changes)
    if changes:
        context.log.info(f"specification changed since the last fit: {changes}")

    refresh = asset_refresh(context, "fit", settings={"sampler_settings": settings_tag})
    done = (final / "fit_summary.json").exists()
    if reused := refresh.reuse(
            still_there=done, force=config.force_refit,
            what=f"modeled_observations data hash {fingerprint['data_sha256'][:12]} and specification "
                 f"{fingerprint['spec_sha256'][:12]} are those of fit {name}, which stays current"):
        return reused
    if done and not config.force_refit:
        summary = json.loads((final / "fit_summary.json").read_text())
        context.log.info(f"data and specification unchanged: reusing the fit in {final}")
        return refresh.computed({**common, "reused": True, "engine": summary["engine"], "passes": summary["passes"]},
                                data_version=final.name)

    options = dict(overrides.get("sampler", {}))
    warm_from, warm_reason = warm_start_source(previous, changes, (sampler.get("precondition") or {}).get("warm_start", "none"),
                                               target=final)
    if warm_from is not None:
        options["warm-from"] = str(warm_from)
    context.log.info(f"fit start: {warm_reason}")
    common["warm_start"] = warm_reason
    result, destination, summary = fit_in_subprocess(
        context, pipes_subprocess_client, module="atlas_assets.model.fit_process", observations_path=observations_path,
        final=final, fingerprint=fingerprint, specification=json.dumps(manifest, indent=1, sort_keys=True),
        options=options, what="fit")
    common["fit_dir"] = dg.MetadataValue.path(str(destination))
    return refresh.computed({**result.metadata, **common, "reused": False, "out_dir": str(destination),
                             "engine": summary["engine"], "passes": summary["passes"]}, data_version=destination.name)


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def _previous_fit_dir(context: dg.AssetExecutionContext) -> Path | None:
    event = context.instance.get_latest_materialization_event(dg.AssetKey("capability_fit"))
    if event is None or event.asset_materialization is None or "fit_dir" not in event.asset_materialization.metadata:
        return None
    return Path(event.asset_materialization.metadata["fit_dir"].value)


def _fit_dir(context: dg.AssetExecutionContext) -> Path:
    event = context.instance.get_latest_materialization_event(dg.AssetKey("capability_fit"))
    if event is None or event.asset_materialization is None:
        raise dg.Failure("capability_fit has not been materialized")
    return Path(event.asset_materialization.metadata["fit_dir"].value)


@dg.asset(
    deps=["capability_fit"],
    pool="duckdb",
    kinds={"duckdb", "stan"},
    description="Convergence of the current fit: R-hat, bulk/tail ESS over capability, discrimination and difficulty; "
    "divergences; E-BFMI. Its blocking checks stop every publication downstream when the fit fails them.",
)
def fit_diagnostics(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    refresh = asset_refresh(context, "fit", reads_fit=True)
    if reused := refresh.reuse_tables(duckdb, "fit_diagnostics", what=""):
        return reused
    fit_dir = _fit_dir(context)
    diagnostics = json.loads((fit_dir / "diagnostics.json").read_text())
    failures = failure_reasons(diagnostics)
    rows = pd.DataFrame([
        {"metric": metric, "value": diagnostics.get(metric), "threshold": diagnostics["thresholds"][threshold],
         "passes": bool(diagnostics["checks"].get(check, False)), "detail": failures.get(check)}
        for metric, threshold, check in DIAGNOSTIC_GATES
    ]).astype({"value": "float64", "detail": "string"})
    rows["fit_dir"] = str(fit_dir)
    with duckdb.get_connection() as conn:
        replace_rows(conn, "fit_diagnostics", rows, create=True)
    return refresh.computed(
        metadata={
            "fit_dir": dg.MetadataValue.path(str(fit_dir)),
            "passes": bool(diagnostics["passes"]),
            "engine": diagnostics.get("engine", "unknown"),
            "diagnostics": dg.MetadataValue.md(rows.drop(columns=["fit_dir"]).to_markdown(index=False)),
            "failing_gates": dg.MetadataValue.json(failures),
            "worst_rhat": dg.MetadataValue.json(diagnostics.get("worst_rhat")),
            "worst_ess_bulk": dg.MetadataValue.json(diagnostics.get("worst_ess_bulk")),
            "mean_tree_depth": diagnostics.get("mean_tree_depth"),
            "sample_seconds": diagnostics.get("sample_seconds"),
        }
    )


@dg.asset(
    deps=["fit_diagnostics"],
    pool="duckdb",
    kinds={"duckdb"},
    description="Capability per reasoning state and per model (headline = best eligible state) on the display scale, with "
    "90% intervals, rank probabilities and evidence; shared reasoning effects; family difficulty and discrimination.",
)
def capability_scores(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    refresh = asset_refresh(context, "fit", reads_fit=True)
    if reused := refresh.reuse_tables(duckdb, *SCORE_TABLES.values(), what=""):
        return reused
    fit_dir = _fit_dir(context)
    try:
        require_publishable_fit(fit_dir, specification_fingerprint())
    except UnpublishableFit as refusal:
        raise dg.Failure(description=str(refusal)) from None
    from atlas_assets.model.fit_process import read_table

    tables = {table: read_table(fit_dir / f"{stem}.parquet") for stem, table in SCORE_TABLES.items()}
    with duckdb.get_connection() as conn:
        replace_tables(conn, tables)  # all four or none
    models = tables["capability_model_scores"]
    unranked = models.loc[models.headline_status != "published", ["model", "headline_status"]]
    top = models.sort_values("display_mean", ascending=False).head(15)[
        ["model", "headline_state", "display_mean", "display_lower", "display_upper", "p_rank1", "n_families"]
    ]
    return refresh.computed(
        metadata={
            "fit_dir": dg.MetadataValue.path(str(fit_dir)),
            "models": len(models),
            "models_without_headline": len(unranked),
            "without_headline": dg.MetadataValue.md(unranked.head(30).to_markdown(index=False)),
            "states": len(tables["capability_state_scores"]),
            "top_models": dg.MetadataValue.md(top.to_markdown(index=False)),
            "reasoning_effects": dg.MetadataValue.md(tables["reasoning_effects"].to_markdown(index=False)),
        }
    )
