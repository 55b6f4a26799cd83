"""Validation studies (issue 9, group `validation`): one partition per study x fold, then a summary.

`validation_fold` is partitioned (keys from config/validation.yaml via `splits.fold_keys`), so folds run
in parallel from a backfill and re-run alone. Each partition refits the production specification
without its held-out cells (a Pipes subprocess, warm from the production fit), predicts them by the model
and by every baseline, and replaces its own slice (column `fold`) of the shared tables
validation_folds / validation_predictions / validation_family_ranks / validation_sensitivity. Every row
carries `fit`, the production fit it validates, so the summary and the publication never mix fits.
Logic: atlas_assets/validation/.
"""


import json
import sys
from pathlib import Path

import dagster as dg
import duckdb as duckdb_module
import pandas as pd
import tenacity
from dagster_duckdb import DuckDBResource

from atlas_assets import settings
from atlas_assets.defs.outputs.assets import publishable_fit_dir
from atlas_assets.defs.refresh import asset_refresh, fit_folder, partitioned_data_version, tables_exist
from atlas_assets.storage import replace_partition, replace_tables
from atlas_assets.validation.config import load_validation_config
from atlas_assets.validation.splits import ACTIVE_STUDIES, fold_keys, study_of

FOLD_TABLES = ["validation_folds", "validation_predictions", "validation_family_ranks", "validation_sensitivity",
               "active_panel_scores", "validation_unscored"]

validation_partitions = dg.StaticPartitionsDefinition(fold_keys(load_validation_config()))


def production_fit(context: dg.AssetExecutionContext) -> Path:
    """The latest capability fit, which must be publishable under the specification in force."""
    return publishable_fit_dir(context)


def validation_dir() -> Path:
    return settings.atlas_home() / "model" / "validation"


def pipes_fitter(context: dg.AssetExecutionContext, client: dg.PipesSubprocessClient):
    """Fit a fold in its own process (like the production fit: PyStan workers, streamed progress)."""

    def fit(train: pd.DataFrame, out: Path, cfg: dict, warm_from: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        inputs = out.parent / "inputs"
        inputs.mkdir(exist_ok=True)
        train.to_csv(inputs / "train.csv", index=False)
        (inputs / "model_config.json").write_text(json.dumps(cfg, indent=1, default=str))
        command = [sys.executable, "-m", "atlas_assets.model.fit_process", "--observations", str(inputs / "train.csv"),
                   "--out", str(out), "--config", str(inputs / "model_config.json"), "--warm-from", str(warm_from)]
        client.run(command=command, context=context)

    return fit


@tenacity.retry(retry=tenacity.retry_if_exception_type(duckdb_module.IOException),
                wait=tenacity.wait_random_exponential(multiplier=0.5, max=10), stop=tenacity.stop_after_delay(300),
                reraise=True)
def write_slice(duckdb: DuckDBResource, frames: dict[str, pd.DataFrame], fold: str) -> None:
    """Replace this fold's rows of the shared tables (one transaction), waiting out another writer's lock."""
    with duckdb.get_connection() as conn:
        replace_partition(conn, frames, "fold", fold)


def _md(frame: pd.DataFrame, rows: int = 30) -> dg.MetadataValue:
    return dg.MetadataValue.md(frame.head(rows).to_markdown(index=False, floatfmt=".3g"))


@dg.asset(
    deps=["capability_scores", "active_panel"],
    partitions_def=validation_partitions,
    # no "duckdb" pool: a fold samples for a minute or more and writes for milliseconds; folds run in
    # parallel (a backfill), and their one write retries while another process holds the file's lock
    kinds={"stan", "duckdb"},
    description="One validation fold: the production specification refitted without the fold's held-out cells (warm "
    "from the production fit), its held-out cells predicted by the model and by the ECI form (least squares + "
    "bootstrap, with and without resampled residuals), the family mean and the model offset on the same cells; "
    "whole-family folds score each held-out leaderboard's order; sensitivity folds the top-20 rank shift.",
)
def validation_fold(context: dg.AssetExecutionContext, duckdb: DuckDBResource,
                    pipes_subprocess_client: dg.PipesSubprocessClient) -> dg.MaterializeResult:
    from atlas_assets.validation.folds import run_fold

    fold = context.partition_key
    refresh = asset_refresh(context, "publication", partition=fold, reads_fit=True)
    if refresh.unchanged():
        with duckdb.get_connection() as conn:
            done = tables_exist(conn, "validation_folds") and conn.execute(
                "SELECT count(*) FROM validation_folds WHERE fold = ?", [fold]).fetchone()[0] > 0
        if reused := refresh.reuse(still_there=done, what=f"fold {fold}'s rows are in place"):
            return reused
    fit_dir = production_fit(context)
    cfg = load_validation_config()
    if study_of(fold) in ACTIVE_STUDIES:
        cfg["active_panel"]["families"] = _active_families(duckdb, fit_dir.name)
    result = run_fold(fold, fit_dir, cfg, validation_dir() / fit_dir.name,
                      fitter=pipes_fitter(context, pipes_subprocess_client), log=context.log.info)
    frames = {"validation_folds": pd.DataFrame([result.info]), "validation_predictions": result.predictions,
              "validation_family_ranks": result.family_ranks, "validation_sensitivity": result.sensitivity,
              "active_panel_scores": result.active_scores, "validation_unscored": result.unscored}
    for name, frame in frames.items():
        if not frame.empty:
            frame["fold"] = fold
            frame["fit"] = fit_dir.name
    write_slice(duckdb, frames, fold)
    metadata = {"production_fit": dg.MetadataValue.path(str(fit_dir)), "study": result.study,
                **{k: v for k, v in result.info.items() if isinstance(v, (int, float, str, bool)) and v is not None}}
    if len(result.predictions):
        from atlas_assets.validation.summary import cell_study_metrics

        metadata["metrics"] = _md(cell_study_metrics(result.predictions, [float(x) for x in cfg["intervals"]]))
    for name in ("family_ranks", "sensitivity", "active_scores", "unscored"):
        frame = getattr(result, name)
        if len(frame):
            metadata[name] = _md(frame)
    return refresh.computed(metadata)


def _active_families(duckdb: DuckDBResource, fit: str) -> list[str]:
    """The active families of the production fit (the outputs' active_panel table), or dg.Failure."""
    with duckdb.get_connection() as conn:
        try:
            rows = conn.execute("SELECT family FROM active_panel WHERE fit = ? AND active ORDER BY 1", [fit]).fetchall()
        except duckdb_module.CatalogException:
            rows = []
    if not rows:
        raise dg.Failure(description=f"the active-panel folds need the active families of fit {fit}: materialize "
                         "active_panel (group outputs) for it first")
    return [family for (family,) in rows]


def _read(conn, table: str, fit: str) -> pd.DataFrame:
    try:
        return conn.execute(f"SELECT * FROM {table} WHERE fit = ?", [fit]).df()
    except duckdb_module.CatalogException:
        return pd.DataFrame()


@dg.asset(
    deps=["validation_fold", "reliability_grades"],
    pool="duckdb",
    kinds={"duckdb", "python"},
    description="Every study's metrics for the current production fit, one row per study x method (validation_metrics): "
    "n cells, RMSE / MAE (unit and points), CRPS, Spearman, 50/90/95% coverage; whole-family leaderboard agreement "
    "(mean / median / panel-weighted Spearman, standardised RMSE / MAE, share of families won); the largest top-20 "
    "rank shift; per-family held-out skill against the family mean with its rank correlation to reliability "
    "(validation_family_skill). Fails when a fold of the current fit is missing.",
)
def validation_summary(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.validation.summary import CELL_STUDIES, cell_shares, held_out_skill, validation_metrics

    cfg = load_validation_config()
    # one version for all folds: the summary reads every partition
    folds_version = partitioned_data_version(context.instance, dg.AssetKey("validation_fold"), fold_keys(cfg))
    refresh = asset_refresh(context, "publication", versions={"validation_fold": folds_version}, reads_fit=True)
    with duckdb.get_connection() as conn:
        present = tables_exist(conn, "validation_metrics", "validation_family_skill", "validation_folds")
        # every fold's rows must still be there (a fold deleted behind Dagster's back is not "unchanged")
        present = present and set(fold_keys(cfg)) <= {row[0] for row in conn.execute(
            "SELECT DISTINCT fold FROM validation_folds WHERE fit = ?", [fit_folder(context.instance)]).fetchall()}
    if reused := refresh.reuse(still_there=present, what="every fold's rows are in place"):
        return reused
    fit_dir = production_fit(context)
    with duckdb.get_connection() as conn:
        tables = {name: _read(conn, name, fit_dir.name) for name in FOLD_TABLES}
        reliability = _read(conn, "reliability_grades", fit_dir.name)
    done = set(tables["validation_folds"].get("fold", pd.Series(dtype=str)))
    missing = [k for k in fold_keys(cfg) if k not in done]
    if missing:
        raise dg.Failure(description=f"validation of fit {fit_dir.name} is incomplete: folds {missing} have not run "
                         "for it (materialize validation_fold for those partitions)")
    metrics = validation_metrics(tables["validation_predictions"], tables["validation_family_ranks"],
                                 tables["validation_sensitivity"], cfg)
    # never drop a held-out cell silently: how many each study (and each path of forward_thin) held out, the share
    # the model predicted and the share every method could score; the others are listed in validation_unscored
    metrics = cell_shares(metrics, tables["validation_folds"], tables["validation_predictions"],
                          tables["validation_unscored"])
    skill, rho = held_out_skill(tables["validation_predictions"], reliability if len(reliability) else None)
    metrics["fit"], skill["fit"] = fit_dir.name, fit_dir.name
    with duckdb.get_connection() as conn:
        replace_tables(conn, {"validation_metrics": metrics, "validation_family_skill": skill})
    folds = tables["validation_folds"]
    cells = metrics[metrics["study"].isin(CELL_STUDIES)]
    return refresh.computed({
        "production_fit": dg.MetadataValue.path(str(fit_dir)),
        "folds": len(folds),
        "refit_sample_seconds": float(folds["sample_seconds"].sum()),
        "refit_leapfrog": int(folds["leapfrog"].sum()),
        "skill_reliability_spearman": rho,
        "cell_studies": _md(cells.reindex(columns=["study", "method", "n_cells", "share_predicted", "share_scored",
                                                   "rmse_points", "mae_points", "crps", "spearman", "coverage_50",
                                                   "coverage_90", "coverage_95", "z_sd"]), 40),
        "paths": _md(metrics.loc[metrics["study"].str.contains(":") & (metrics["method"] == "atlas")].reindex(
            columns=["study", "n_cells", "heldout_cells", "share_predicted", "share_scored", "rmse_points", "crps",
                     "coverage_50", "coverage_90", "coverage_95", "z_mean", "z_sd"]), 20),
        "unscored_cells": _md(tables["validation_unscored"].groupby(["study", "reason"]).size().rename("cells")
                              .reset_index(), 40) if len(tables["validation_unscored"]) else "none",
        "family_study": _md(metrics[metrics["study"] == "family"].dropna(axis=1, how="all")),
        "sensitivity": _md(tables["validation_sensitivity"].sort_values("max_top20_rank_shift", ascending=False)),
        "refits": _md(folds[["fold", "n_train", "n_heldout", "n_scored", "max_rhat", "min_ess_bulk", "divergences",
                             "sample_seconds", "reused"]], 40),
    })
