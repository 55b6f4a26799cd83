"""Model: Stan data from the cleaned matrix, the NUTS fit (in its own process), diagnostics, capability scores.

The fit runs through Dagster Pipes in a subprocess: PyStan leaves worker processes that
would keep a Dagster step process alive, and a subprocess also streams the sampler's
progress into the run log. Each fit lives in a folder named by the fingerprint of its
data and specification; an unchanged fingerprint reuses the finished fit instead of
sampling again, and a fit is only moved into place when it completed.
"""

import json
import shutil
import sys
from pathlib import Path

import dagster as dg
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets import settings
from atlas_assets.model.stan_data import build_stan_data, load_model_config
from atlas_assets.spec import frame_hash, specification_fingerprint
from atlas_assets.storage import replace_rows

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
    with duckdb.get_connection() as conn:
        observations = conn.execute("SELECT * FROM modeled_observations").df()
    config = load_model_config()
    stan_input = build_stan_data(observations, config)
    data_hash = frame_hash(observations, ["model", "reasoning_state", "family"])
    spec_hash = specification_fingerprint()
    folder = model_dir() / "inputs" / f"{data_hash[:16]}-{spec_hash[:16]}"
    folder.mkdir(parents=True, exist_ok=True)
    observations.to_csv(folder / "modeled_observations.csv", index=False)
    with duckdb.get_connection() as conn:
        replace_rows(conn, "model_index_states", stan_input.states, create=True)
        replace_rows(conn, "model_index_models", stan_input.models, create=True)
        replace_rows(conn, "model_index_families", stan_input.families, create=True)
    (folder / "fingerprint.json").write_text(json.dumps({"data_sha256": data_hash, "spec_sha256": spec_hash}))
    data = stan_input.data
    return dg.MaterializeResult(
        metadata={
            "data_sha256": data_hash,
            "spec_sha256": spec_hash,
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

    if (final / "fit_summary.json").exists() and not config.force_refit:
        summary = json.loads((final / "fit_summary.json").read_text())
        context.log.info(f"data and specification unchanged: reusing the fit in {final}")
        return dg.MaterializeResult(metadata={**common, "reused": True, "engine": summary["engine"], "passes": summary["passes"]})

    staging = final.with_name(name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    command = [sys.executable, "-m", "atlas_assets.model.fit_process", "--observations", str(observations_path), "--out", str(staging)]
    for key, value in overrides.get("sampler", {}).items():
        command += [f"--{key}", str(value)]
    context.log.info(f"fitting in a subprocess: {' '.join(command)}")
    result = pipes_subprocess_client.run(command=command, context=context).get_materialize_result()
    if not (staging / "fit_summary.json").exists():
        raise dg.Failure(f"the fit process ended without writing {staging / 'fit_summary.json'}")
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    summary = json.loads((final / "fit_summary.json").read_text())
    return dg.MaterializeResult(metadata={**result.metadata, **common, "reused": False, "out_dir": str(final), "engine": summary["engine"]})


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
    fit_dir = _fit_dir(context)
    diagnostics = json.loads((fit_dir / "diagnostics.json").read_text())
    rows = pd.DataFrame([
        {"metric": metric, "value": diagnostics[metric], "threshold": diagnostics["thresholds"][threshold],
         "passes": diagnostics["checks"][check]}
        for metric, threshold, check in DIAGNOSTIC_GATES
    ])
    rows["fit_dir"] = str(fit_dir)
    with duckdb.get_connection() as conn:
        replace_rows(conn, "fit_diagnostics", rows, create=True)
    return dg.MaterializeResult(
        metadata={
            "fit_dir": dg.MetadataValue.path(str(fit_dir)),
            "passes": bool(diagnostics["passes"]),
            "engine": diagnostics.get("engine", "unknown"),
            "diagnostics": dg.MetadataValue.md(rows.drop(columns=["fit_dir"]).to_markdown(index=False)),
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
    fit_dir = _fit_dir(context)
    from atlas_assets.model.fit_process import read_table

    tables = {table: read_table(fit_dir / f"{stem}.parquet") for stem, table in SCORE_TABLES.items()}
    with duckdb.get_connection() as conn:
        for table, frame in tables.items():
            replace_rows(conn, table, frame, create=True)
    models = tables["capability_model_scores"]
    top = models.sort_values("display_mean", ascending=False).head(15)[
        ["model", "headline_state", "display_mean", "display_lower", "display_upper", "p_rank1", "n_families"]
    ]
    return dg.MaterializeResult(
        metadata={
            "fit_dir": dg.MetadataValue.path(str(fit_dir)),
            "models": len(models),
            "states": len(tables["capability_state_scores"]),
            "top_models": dg.MetadataValue.md(top.to_markdown(index=False)),
            "reasoning_effects": dg.MetadataValue.md(tables["reasoning_effects"].to_markdown(index=False)),
        }
    )
