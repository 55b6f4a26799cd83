"""Checks beside the validation studies: blocking where a mixed or partial result would be published, WARN for
what the studies say about the model (calibration, baselines, convergence of the refits)."""


import dagster as dg
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets.quality.expectations import Expectation, validate_frame
from atlas_assets.validation.config import load_validation_config
from atlas_assets.validation.splits import fold_keys

CELL_STUDIES = ["forward", "forward_strict", "forward_thin", "masked", "masked_state"]


def _table(duckdb: DuckDBResource, sql: str) -> pd.DataFrame:
    with duckdb.get_connection() as conn:
        return conn.execute(sql).df()


@dg.asset_check(asset="validation_fold", blocking=True, description="The folds' rows are sound: one validation_folds row "
                "per fold and fit; in each cell study's fold every held-out cell is scored or listed in "
                "validation_unscored with its reason (none dropped silently); in each fold every method scored the "
                "same cells; predictive summaries ordered "
                "(lower_95 <= lower_90 <= lower_50 <= median <= upper_50 <= upper_90 <= upper_95), bounded families' "
                "predictions inside [0, 1], CRPS finite and >= 0.")
def validation_fold_rows_valid(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    folds = _table(duckdb, "SELECT fold, fit FROM validation_folds")
    problems = []
    if folds.duplicated(["fold", "fit"]).any():
        problems.append(f"duplicated fold rows: {folds[folds.duplicated(['fold', 'fit'])].to_dict('records')}")
    try:
        predictions = _table(duckdb, "SELECT * FROM validation_predictions")
    except Exception:  # no cell study has run yet
        predictions = pd.DataFrame()
    problems += _silently_dropped(duckdb)
    if predictions.empty:
        return dg.AssetCheckResult(passed=not problems, metadata={"problems": dg.MetadataValue.json(problems)})
    per_method = predictions.groupby(["fit", "fold", "method"]).size().unstack("method")
    uneven = per_method[per_method.nunique(axis=1) != 1]
    if len(uneven):
        problems.append(f"methods scored different cells in {uneven.index.tolist()}")
    bounded = predictions[predictions["kind"] == "bounded"]
    if not (bounded["lower_95"].ge(0) & bounded["upper_95"].le(1)).all():
        problems.append("a bounded family's prediction outside [0, 1]")
    if not (predictions["crps"].ge(0) & predictions["crps"].notna()).all():
        problems.append("CRPS missing or negative")
    chain = ["lower_95", "lower_90", "lower_50", "pred_median", "upper_50", "upper_90", "upper_95"]
    result = validate_frame(predictions, [
        Expectation("ExpectColumnPairValuesAToBeGreaterThanB", column_A=high, column_B=low, or_equal=True)
        for low, high in zip(chain, chain[1:])], suite_name="validation_predictions")
    return dg.AssetCheckResult(passed=bool(result.passed and not problems), metadata={
        **result.metadata, "problems": dg.MetadataValue.json(problems[:20]), "cells": len(predictions)})


def _silently_dropped(duckdb: DuckDBResource) -> list[str]:
    """Cell-study folds whose held-out cells are neither scored nor listed in validation_unscored (folds that record
    n_predicted: a row written before the list existed is not judged by it)."""
    from atlas_assets.validation.summary import CELL_STUDIES as ALL_CELL_STUDIES

    folds = _table(duckdb, "SELECT * FROM validation_folds")
    if "n_predicted" not in folds:
        return []
    folds = folds[folds["study"].isin(ALL_CELL_STUDIES) & folds["n_predicted"].notna()]
    if folds.empty:
        return []
    try:
        listed = _table(duckdb, "SELECT fit, fold, count(*) AS n FROM validation_unscored GROUP BY 1, 2")
    except Exception:  # no fold has had an unscored cell
        listed = pd.DataFrame(columns=["fit", "fold", "n"])
    joined = folds.merge(listed, on=["fit", "fold"], how="left").fillna({"n": 0})
    bad = joined[joined["n_heldout"] != joined["n_scored"] + joined["n"]]
    return [f"fold {r.fold} of fit {r.fit}: {int(r.n_heldout)} held out, {int(r.n_scored)} scored, {int(r.n)} listed "
            "unscored (cells dropped silently)" for r in bad.itertuples()]


@dg.asset_check(asset="validation_summary", blocking=True, description="validation_metrics comes from one production "
                "fit, every configured fold of that fit has run, every cell study scored cells for every method, and "
                "each fold's predictions are of that same fit.")
def validation_complete(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    metrics = _table(duckdb, "SELECT * FROM validation_metrics")
    problems = []
    fits = sorted(metrics["fit"].unique())
    if len(fits) != 1:
        problems.append(f"metrics from {len(fits)} fits: {fits}")
    fit = fits[0] if fits else None
    folds = _table(duckdb, "SELECT fold, fit FROM validation_folds")
    missing = sorted(set(fold_keys(load_validation_config())) - set(folds.loc[folds["fit"] == fit, "fold"]))
    if missing:
        problems.append(f"folds not run for fit {fit}: {missing}")
    cells = metrics[metrics["study"].isin(CELL_STUDIES)]
    for study in CELL_STUDIES:
        rows = cells[cells["study"] == study]
        if len(rows) == 0 or (rows["n_cells"].fillna(0) <= 0).any():
            problems.append(f"study {study} scored no cells for some method ({rows[['method', 'n_cells']].to_dict('records')})")
        elif rows["n_cells"].nunique() != 1:
            problems.append(f"study {study}: methods scored on different cells {rows[['method', 'n_cells']].to_dict('records')}")
    return dg.AssetCheckResult(passed=not problems, metadata={"problems": dg.MetadataValue.json(problems), "fit": str(fit)})


@dg.asset_check(asset="validation_summary", blocking=False, description="The model's 50/90/95% predictive intervals "
                "cover the held-out scores within ±checks.coverage_tolerance of nominal in every cell study and in "
                "every path of one (forward_thin:fit, forward_thin:calibrate_in, ...).")
def validation_coverage(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    tolerance = float(load_validation_config()["checks"]["coverage_tolerance"])
    rows = _table(duckdb, "SELECT * FROM validation_metrics WHERE method = 'atlas'")
    rows = rows[rows["study"].str.split(":").str[0].isin(CELL_STUDIES) & (rows["n_cells"].fillna(0) > 0)]
    off = []
    for _, r in rows.iterrows():
        for nominal in (50, 90, 95):
            value = r.get(f"coverage_{nominal}")
            if pd.notna(value) and abs(value - nominal / 100) > tolerance:
                off.append(f"{r['study']}: {nominal}% interval covers {100 * value:.1f}%")
    return dg.AssetCheckResult(passed=not off, severity=dg.AssetCheckSeverity.WARN,
                               metadata={"off_nominal": dg.MetadataValue.json(off)})


@dg.asset_check(asset="validation_summary", blocking=False, description="The model beats every baseline (ECI form, "
                "ECI form with residuals, family mean, model offset) on RMSE and on CRPS in every cell study.")
def validation_beats_baselines(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    rows = _table(duckdb, "SELECT * FROM validation_metrics")
    rows = rows[rows["study"].isin(CELL_STUDIES)]
    losses = []
    for study, r in rows.groupby("study"):
        model = r[r["method"] == "atlas"].iloc[0]
        for _, base in r[r["method"] != "atlas"].iterrows():
            for metric in ("rmse", "crps"):
                if base[metric] <= model[metric]:
                    losses.append(f"{study}: {base['method']} {metric} {base[metric]:.4f} <= model {model[metric]:.4f}")
    return dg.AssetCheckResult(passed=not losses, severity=dg.AssetCheckSeverity.WARN,
                               metadata={"losses": dg.MetadataValue.json(losses)})


@dg.asset_check(asset="validation_summary", blocking=False, description="Each refit converged well enough to measure "
                "with: max R-hat <= refit.rhat_warn and no divergent transitions.")
def validation_refits_converged(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    limit = float(load_validation_config()["refit"]["rhat_warn"])
    folds = _table(duckdb, "SELECT f.* FROM validation_folds f JOIN (SELECT DISTINCT fit FROM validation_metrics) m USING (fit)")
    bad = folds[(folds["max_rhat"] > limit) | (folds["divergences"] > 0)]
    return dg.AssetCheckResult(
        passed=bad.empty, severity=dg.AssetCheckSeverity.WARN,
        metadata={"unconverged": dg.MetadataValue.md(bad[["fold", "max_rhat", "min_ess_bulk", "divergences"]]
                                                     .to_markdown(index=False) if len(bad) else "none")})
