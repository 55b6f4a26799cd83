"""Outputs of the capability fit (issue 9, group `outputs`), each from the posterior draws of the latest fit.

Every asset publishes only from a publishable fit: the latest `capability_fit`'s folder
must pass `publishable.require_publishable_fit` under the specification now in force
(else dg.Failure names the gate or the changed parts, and the tables stay as they were).
The fit folder is read once per process (`load_fit`) and shared by the four assets of a
run. Logic: atlas_assets/outputs/; thresholds: atlas_assets/config/outputs.yaml. Every
table carries `fit` (the fit folder's name) so publication can refuse a mix of fits.
"""


import functools
from pathlib import Path

import dagster as dg
import duckdb as duckdb_module
import numpy as np
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.refresh import asset_refresh
from atlas_assets.model.publishable import UnpublishableFit, require_publishable_fit
from atlas_assets.spec import specification_fingerprint
from atlas_assets.storage import replace_rows, replace_tables


def latest_fit_dir(context: dg.AssetExecutionContext) -> Path:
    event = context.instance.get_latest_materialization_event(dg.AssetKey("capability_fit"))
    if event is None or event.asset_materialization is None or "fit_dir" not in event.asset_materialization.metadata:
        raise dg.Failure(description="capability_fit has not been materialized: no fit to publish from")
    return Path(event.asset_materialization.metadata["fit_dir"].value)


def publishable_fit_dir(context: dg.AssetExecutionContext) -> Path:
    """The latest capability fit, or dg.Failure naming why it may not be published (a failed gate, or a fit
    made under another specification)."""
    fit_dir = latest_fit_dir(context)
    try:
        require_publishable_fit(fit_dir, specification_fingerprint())
    except UnpublishableFit as refusal:
        raise dg.Failure(description=str(refusal)) from None
    return fit_dir


@functools.lru_cache(maxsize=1)
def _load(fit_dir: str, stamp: float):
    from atlas_assets.model.fit_process import load_fit
    from atlas_assets.outputs.draws import from_fit

    loaded = load_fit(fit_dir)
    return loaded, from_fit(loaded)


def publishable_inputs(context: dg.AssetExecutionContext):
    """(fit folder, LoadedFit, thinned PosteriorDraws, outputs config, rank-eligible mask) of the latest fit,
    or dg.Failure when that fit may not be published."""
    from atlas_assets.model.scores import rank_eligible
    from atlas_assets.outputs.config import load_outputs_config

    fit_dir = publishable_fit_dir(context)
    loaded, draws = _load(str(fit_dir), (fit_dir / "posterior.nc").stat().st_mtime)
    cfg = load_outputs_config()
    return fit_dir, loaded, draws.thin(int(cfg["draws"]["max_draws"])), cfg, rank_eligible(loaded.stan_input, loaded.config)


def _md(frame: pd.DataFrame, rows: int = 25) -> dg.MetadataValue:
    return dg.MetadataValue.md(frame.head(rows).to_markdown(index=False, floatfmt=".3g"))


def _stamp(frame: pd.DataFrame, fit_dir: Path) -> pd.DataFrame:
    frame = frame.copy()
    frame["fit"] = fit_dir.name
    return frame


@dg.asset(
    deps=["capability_scores"],
    pool="duckdb",
    kinds={"duckdb", "python"},
    description="Per family, on the display scale: difficulty (the midpoint crossing b) with its 90% interval; a bound "
    "flag (≳ / ≲) when the posterior median difficulty lies outside the 5th-95th percentile of the posterior-mean "
    "capability of the states evaluated on the family (config difficulty.evaluated_range_percentiles); saturation "
    "point (capability where the curve reaches 90% of its headroom, difficulty.saturation_share); expected score of "
    "the frontier state (highest posterior-mean eligible state); discrimination with interval.",
)
def difficulty_bounds(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.outputs.difficulty import difficulty_bounds as compute

    refresh = asset_refresh(context, "publication", reads_fit=True)
    if reused := refresh.reuse_tables(duckdb, 'difficulty_bounds'):
        return reused
    fit_dir, loaded, draws, cfg, eligible = publishable_inputs(context)
    si = loaded.stan_input
    table = _stamp(compute(draws, si.families, si.observations, si.states, eligible, cfg), fit_dir)
    with duckdb.get_connection() as conn:
        replace_rows(conn, "difficulty_bounds", table, create=True)
    flagged = table[table["bound"].notna()]
    return refresh.computed({
        "fit_dir": dg.MetadataValue.path(str(fit_dir)),
        "families": len(table),
        "flagged_as_bounds": len(flagged),
        "rule": str(table["bound_rule"].iloc[0]),
        "frontier_state": str(table["frontier_state"].iloc[0]),
        "draws_used": draws.n_draws,
        "bounds": _md(flagged[["family", "difficulty_display", "difficulty_median", "evaluated_low", "evaluated_high",
                               "share_observed_past_midpoint"]]),
        "difficulty": _md(table.sort_values("difficulty_median", ascending=False)[
            ["family", "difficulty_display", "saturation_mean", "frontier_expected_mean", "discrimination_mean"]], 60),
    })


@dg.asset(
    deps=["capability_scores"],
    pool="duckdb",
    kinds={"duckdb", "python"},
    description="Per family (seed 003): reliability = variance of the expected scores of the states scored on it / "
    "(that + mean noise variance under the fitted likelihood), per draw; mean and 90% interval; again over every "
    "state in the fit ('if every model had been scored'). Grade A/B/C when P(reliability >= 0.85/0.70/0.50) >= 0.9, "
    "D otherwise, ungraded below reliability.min_models models; R^2 on the logit scale (seed 000 section 9).",
)
def reliability_grades(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.outputs.reliability import reliability_grades as compute

    refresh = asset_refresh(context, "publication", reads_fit=True)
    if reused := refresh.reuse_tables(duckdb, 'reliability_grades'):
        return reused
    fit_dir, loaded, draws, cfg, _ = publishable_inputs(context)
    si = loaded.stan_input
    table = _stamp(compute(draws, si.families, si.observations, si.states, cfg), fit_dir)
    with duckdb.get_connection() as conn:
        replace_rows(conn, "reliability_grades", table, create=True)
    counts = table["grade"].fillna("ungraded").value_counts().to_dict()
    return refresh.computed({
        "fit_dir": dg.MetadataValue.path(str(fit_dir)),
        "families": len(table),
        "grades": dg.MetadataValue.json({g: int(counts.get(g, 0)) for g in ("A", "B", "C", "D", "ungraded")}),
        "rule": str(table["grade_rule"].iloc[0]),
        "draws_used": draws.n_draws,
        "reliability": _md(table.sort_values(["grade", "family"], na_position="last")[
            ["family", "grade", "n_models", "reliability_mean", "reliability_lower", "reliability_upper",
             "reliability_all_mean", "r2_logit"]], 80),
    })


@dg.asset(
    deps=["capability_scores"],
    pool="duckdb",
    kinds={"duckdb", "python"},
    description="Is capability one number (seed 003)? Mean squared correlation of the residuals (score minus its "
    "expected value) over family pairs sharing >= 12 states, against the same statistic on >= 200 posterior-"
    "predictive replicate tables; tail probability P(T_replicate >= T_data) and the most correlated pairs. "
    "Tables dimensionality_test (one row) and dimensionality_pairs.",
)
def dimensionality_test(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.outputs.dimensionality import dimensionality_test as compute

    refresh = asset_refresh(context, "publication", reads_fit=True)
    if reused := refresh.reuse_tables(duckdb, 'dimensionality_test', 'dimensionality_pairs'):
        return reused
    fit_dir, loaded, draws, cfg, _ = publishable_inputs(context)
    si = loaded.stan_input
    if draws.mu_obs is None or draws.u_rep is None:
        raise dg.Failure(description=f"fit {fit_dir.name} carries no per-observation expected scores / replicates "
                         "(posterior.nc groups expected_score, posterior_predictive)")
    summary, pairs = compute(si.observations["u"].to_numpy(dtype=float), draws.mu_obs, draws.u_rep,
                             si.observations, si.families, cfg)
    summary, pairs = _stamp(summary, fit_dir), _stamp(pairs, fit_dir)
    with duckdb.get_connection() as conn:
        replace_tables(conn, {"dimensionality_test": summary, "dimensionality_pairs": pairs})
    row = summary.iloc[0]
    return refresh.computed({
        "fit_dir": dg.MetadataValue.path(str(fit_dir)),
        "pairs": int(row["n_pairs"]),
        "replicates": int(row["n_replicates"]),
        "statistic": float(row["statistic"]),
        "replicate_mean": float(row["replicate_mean"]),
        "ratio": float(row["ratio"]),
        "tail_probability": float(row["tail_probability"]),
        "rule": str(row["rule"]),
        "most_correlated_pairs": _md(pairs, int(cfg["dimensionality"]["top_pairs"])),
    })


def _registry_benchmarks(duckdb: DuckDBResource) -> pd.DataFrame | None:
    try:
        with duckdb.get_connection() as conn:
            return conn.execute("SELECT family, role, kind, range_min, range_max, direction, unit FROM registry_benchmarks").df()
    except duckdb_module.Error:
        return None


@dg.asset(
    deps=["capability_scores"],
    pool="duckdb",
    kinds={"duckdb", "python"},
    description="For every rank-eligible state x family cell NOT observed: the posterior predictive mean, median, 50% "
    "and 90% intervals, on the unit scale and on the family's own score scale (its benchmarks' declared range); "
    "observed cells carry their posterior predictive p-value (mid-p, P(u_rep > u) + P(u_rep = u) / 2).",
)
def cell_predictions(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.outputs.cell_predictions import cell_predictions as compute
    from atlas_assets.outputs.cell_predictions import family_score_scales

    refresh = asset_refresh(context, "publication", reads_fit=True, also=("registry_benchmarks",))
    if reused := refresh.reuse_tables(duckdb, 'cell_predictions'):
        return reused
    fit_dir, loaded, draws, cfg, eligible = publishable_inputs(context)
    si = loaded.stan_input
    scales = family_score_scales(si.families, _registry_benchmarks(duckdb))
    table = _stamp(compute(draws, si.families, si.observations, si.states, eligible, cfg, scales), fit_dir)
    with duckdb.get_connection() as conn:
        replace_rows(conn, "cell_predictions", table, create=True)
    observed = table[table["observed"]]
    tail = float(cfg["cell_predictions"]["ppp_tail"])
    return refresh.computed({
        "fit_dir": dg.MetadataValue.path(str(fit_dir)),
        "cells": len(table),
        "predicted_cells": int((~table["observed"]).sum()),
        "observed_cells": len(observed),
        "eligible_states": int(np.sum(eligible)),
        "families_on_declared_range": int(scales["range_min"].notna().sum()),
        "observed_ppp_outside_tails": float(((observed["ppp"] < tail) | (observed["ppp"] > 1 - tail)).mean()),
        "draws_used": draws.n_draws,
        "sample": _md(table[~table["observed"]][["model", "reasoning_state", "family", "pred_mean", "lower_90",
                                                 "upper_90", "score_mean", "score_scale"]], 15),
    })
