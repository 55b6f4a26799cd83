"""Predicted reasoning settings (issue 14): asset `predicted_states` and its checks.

For every fitted model and every setting it plausibly has but was not measured at, the capability
draws the fit's structure implies (atlas_assets/outputs/predicted_states.py), on the display scale,
with rank probabilities, flagged "predicted setting" and never rank-eligible; and every such
state's cells (the columns of `cell_predictions`). Tables, each with `fit` (the fit folder's name),
replaced in one transaction: `predicted_states`, `predicted_state_cells`, and
`predicted_state_exclusions` (the unobserved pairs NOT predicted, with the reason: the audit the
blocking check uses to prove the partition complete).

The registry facts (registry_models, registry_model_ids, models.yaml no_reasoning_mode /
reasoning_products) decide which pairs are plausible; without the registry tables only `default`
is predicted (no provider is known). Before anything is written the formula is proved on the fit
itself: the phi rebuilt from theta, the shared effects and the per-model terms must equal the fit's
phi on every observed state to 1e-8, else dg.Failure (the Stan program and the reconstruction
disagree, and nothing is published).
"""


import dagster as dg
import duckdb as duckdb_module
import numpy as np
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.outputs.assets import _md, _stamp, publishable_inputs
from atlas_assets.defs.outputs.checks import _combine, _one_fit, _ordered, _table
from atlas_assets.defs.refresh import asset_refresh
from atlas_assets.quality.expectations import Expectation, validate_frame
from atlas_assets.storage import replace_tables

REGISTRY_TABLES = {
    "registry_models": "SELECT model, organization, released_on FROM registry_models",
    "registry_model_ids": "SELECT model, reasoning_state FROM registry_model_ids",
    "registry_benchmarks": "SELECT family, role, kind, range_min, range_max, direction, unit FROM registry_benchmarks",
}


def _registry(duckdb: DuckDBResource) -> dict[str, pd.DataFrame | None]:
    out = {}
    with duckdb.get_connection() as conn:
        for name, sql in REGISTRY_TABLES.items():
            try:
                out[name] = conn.execute(sql).df()
            except duckdb_module.Error:
                out[name] = None
    return out


def plausibility(states: pd.DataFrame, models: pd.DataFrame, model_config: dict,
                 registry: dict[str, pd.DataFrame | None]) -> pd.DataFrame:
    """`setting_plausibility` from the fit's index frames, the registry tables and models.yaml."""
    from atlas_assets.outputs.predicted_states import setting_plausibility
    from atlas_assets.registry.model_ids import load_model_overrides

    overrides = load_model_overrides()
    dates = models.set_index("model")["released_on"].to_dict() if "released_on" in models else None
    return setting_plausibility(states[["model", "reasoning_state"]], model_config, registry["registry_models"],
                                registry["registry_model_ids"], overrides.no_reasoning_mode,
                                overrides.reasoning_products, dates)


UNKNOWN_ROWS = ("SELECT model, reasoning_state, family, kind, u, correct, items, floor FROM family_observations "
                "WHERE reasoning_state = 'unknown'")


def _unknown_settings(duckdb: DuckDBResource, si, post, draws, plaus: pd.DataFrame, cfg: dict,
                      scales: pd.DataFrame | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Unknown-setting runs of fitted models (state 'unknown', kept by sql/04, not fitted): each placed as a mixture
    over the model's observed and plausible settings weighted by its own scores (outputs/unknown_settings.py)."""
    from atlas_assets.outputs.calibrate import likelihood_pieces
    from atlas_assets.outputs.predicted_states import candidate_phi, predicted_cells, unknown_setting_candidates
    from atlas_assets.outputs.unknown_settings import STATUS, place, placement_table

    with duckdb.get_connection() as conn:
        try:
            rows = conn.execute(UNKNOWN_ROWS).df()
        except duckdb_module.Error:
            rows = pd.DataFrame(columns=["model", "reasoning_state", "family"])
    rows = rows[rows["model"].isin(set(si.models["model"]))]
    on_fit = rows[rows["family"].isin(set(si.families["family"]))]
    pieces = likelihood_pieces(on_fit, si.families) if len(on_fit) else on_fit.assign(drop_reason=[])
    usable = pieces[pieces["drop_reason"].isna()]
    seed = int(cfg["draws"]["seed"])
    placements = [place(model, candidates, candidate_phi(post, si, model, candidates, seed), model_rows, draws,
                        si.families, seed)
                  for model, model_rows in usable.groupby("model", sort=True)
                  for candidates in [unknown_setting_candidates(si.states, plaus, model)]]
    table = placement_table(placements, usable, draws, float(si.config["display"].get("interval", 0.9)), "fitted model")
    not_used = rows.groupby("model").size() - usable.groupby("model").size().reindex(rows["model"].unique(), fill_value=0)
    table["rows_not_used"] = table["model"].map(not_used).fillna(0).astype(int)
    if not placements:
        return table, pd.DataFrame(columns=["model", "reasoning_state", "family", "status"])
    phi = np.column_stack([p.phi for p in placements])
    cells = predicted_cells(table, phi, draws, si.families, si.observations, si.states, cfg, scales)
    cells["status"] = STATUS
    cells = cells.rename(columns={"pred_pos": "unknown_pos"})
    return table, cells


@dg.asset(
    deps=["capability_scores"],
    pool="duckdb",
    kinds={"duckdb", "python"},
    description="Every fitted model at every reasoning setting it plausibly has but was not measured at (registry rule: "
    "default where unobserved; for a model with a published reasoning setting, its provider's settings published for "
    "a model released on or before it; never for models.yaml no_reasoning_mode): capability draws phi = theta + shared "
    "effect + the model's ladder amplitude/curvature on the level's contrasts (prior draws when the model has none) or "
    "an off-ladder deviation from the setting's learned spread; display scale per draw, 90% intervals, rank "
    "probabilities among the other models' headlines; flagged 'predicted setting', never eligible. Their cells "
    "(predicted_state_cells, the columns of cell_predictions) and the pairs not predicted (predicted_state_exclusions). "
    "Runs of fitted models whose setting is unknown (state 'unknown'): a mixture over the model's observed and "
    "plausible settings weighted per draw by the run's own scores (unknown_setting_states, unknown_setting_cells).",
)
def predicted_states(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.outputs.cell_predictions import family_score_scales
    from atlas_assets.outputs.predicted_states import RECONSTRUCTION_TOLERANCE, predict_states, reasoning_posterior

    refresh = asset_refresh(context, "publication", reads_fit=True, also=tuple(REGISTRY_TABLES))
    if reused := refresh.reuse_tables(duckdb, 'predicted_states', 'predicted_state_cells', 'predicted_state_exclusions', 'unknown_setting_states', 'unknown_setting_cells'):
        return reused
    fit_dir, loaded, draws, cfg, eligible = publishable_inputs(context)
    si = loaded.stan_input
    post = reasoning_posterior(loaded.idata).thin(int(cfg["draws"]["max_draws"]))
    registry = _registry(duckdb)
    plaus = plausibility(si.states, si.models, si.config, registry)
    scales = family_score_scales(si.families, registry["registry_benchmarks"])
    result = predict_states(post, draws, si, cfg, plaus, eligible, scales)
    if not result.reconstruction_error < RECONSTRUCTION_TOLERANCE:
        raise dg.Failure(description=(
            f"phi rebuilt from the posterior's primitives differs from fit {fit_dir.name}'s phi by "
            f"{result.reconstruction_error:.3g} on an observed state (tolerance {RECONSTRUCTION_TOLERANCE:g}): the "
            "reconstruction no longer matches stan/atlas.stan, nothing published"))
    unknown, unknown_cells = _unknown_settings(duckdb, si, post, draws, plaus, cfg, scales)
    tables = {"predicted_states": _stamp(result.states, fit_dir), "predicted_state_cells": _stamp(result.cells, fit_dir),
              "predicted_state_exclusions": _stamp(result.exclusions, fit_dir),
              "unknown_setting_states": _stamp(unknown, fit_dir), "unknown_setting_cells": _stamp(unknown_cells, fit_dir)}
    with duckdb.get_connection() as conn:
        replace_tables(conn, tables)
    pred = result.states
    top_k = int(si.config["display"].get("top_k", 10))
    return refresh.computed({
        "fit_dir": dg.MetadataValue.path(str(fit_dir)),
        "predicted_pairs": len(pred),
        "models": int(pred["model"].nunique()),
        "by_setting": dg.MetadataValue.json({k: int(v) for k, v in pred["reasoning_state"].value_counts().items()}),
        "terms": dg.MetadataValue.json({f"{a}/{b}": int(n) for (a, b), n in
                                        pred.groupby(["ladder_terms", "deviation"]).size().items()}),
        "cells": len(result.cells),
        "not_predicted": len(result.exclusions),
        "registry_tables_read": dg.MetadataValue.json([k for k, v in registry.items() if v is not None]),
        "reconstruction_max_abs_error": float(result.reconstruction_error),
        "unknown_setting_runs": len(unknown),
        "unknown_setting_runs_placed": dg.MetadataValue.md(unknown[[
            "model", "n_obs", "most_probable_setting", "most_probable_share", "display_mean", "display_lower",
            "display_upper", "rows_not_used"]].to_markdown(index=False, floatfmt=".3g")) if len(unknown) else "none",
        "seconds": round(result.seconds, 2),
        "draws_used": draws.n_draws,
        "highest": _md(pred.sort_values("display_mean", ascending=False)[
            ["model", "reasoning_state", "observed_states", "display_mean", "display_lower", "display_upper",
             f"p_top{top_k}", "p_above_model_headline", "basis"]], 20),
    })


# ------------------------------------------------------------------------------------------ checks


@dg.asset_check(asset="predicted_states", blocking=True, description="Every plausible unobserved (model, setting) of "
                "the fit appears exactly once (recomputed from model_index_states, the registry and models.yaml), no "
                "observed one does, and with predicted_state_exclusions every unobserved pair is accounted for once; "
                "every row 'predicted setting', never eligible nor a reference; finite ordered intervals, rank "
                "probabilities in [0, 1]; every predicted state x fitted family cell once, unobserved, never "
                "eligible, nested intervals, bounded predictions inside [0, 1]; one fit across the three tables.")
def predicted_states_valid(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    from atlas_assets.model.stan_data import load_model_config
    from atlas_assets.outputs.predicted_states import STATUS

    pred = _table(duckdb, "SELECT * FROM predicted_states")
    cells = _table(duckdb, "SELECT * FROM predicted_state_cells")
    excl = _table(duckdb, "SELECT * FROM predicted_state_exclusions")
    states = _table(duckdb, "SELECT * FROM model_index_states")
    models = _table(duckdb, "SELECT * FROM model_index_models")
    families = _table(duckdb, "SELECT family, kind FROM model_index_families")
    problems = _one_fit(pd.concat([pred[["fit"]], cells[["fit"]], excl[["fit"]]]))

    expected = plausibility(states, models, load_model_config(), _registry(duckdb))
    key = lambda f: list(zip(f["model"], f["reasoning_state"]))  # noqa: E731
    want, got = set(key(expected[expected["plausible"]])), key(pred)
    if len(got) != len(set(got)):
        problems.append("a (model, setting) appears more than once")
    if set(got) != want:
        problems.append(f"predicted pairs differ from the rule: missing {sorted(want - set(got))[:10]}, "
                        f"unexpected {sorted(set(got) - want)[:10]}")
    observed = set(key(states))
    if observed & set(got):
        problems.append(f"observed states among the predicted: {sorted(observed & set(got))[:10]}")
    n_settings = 1 + len(load_model_config()["reasoning"]["ladder"]) + len(load_model_config()["reasoning"]["off_ladder"])
    accounted = key(pred) + key(excl)
    if len(accounted) != len(set(accounted)) or len(accounted) + len(states) != states["model"].nunique() * n_settings:
        problems.append(f"{len(pred)} predicted + {len(excl)} excluded + {len(states)} observed pairs do not cover "
                        f"{states['model'].nunique()} models x {n_settings} settings once")
    if not (pred["status"] == STATUS).all() or pred["eligible"].any() or pred["is_reference"].any():
        problems.append("a predicted state not flagged 'predicted setting', or eligible, or a display reference")
    numeric = [f"{p}_{k}" for p in ("latent", "display") for k in ("mean", "median", "lower", "upper", "sd")]
    if len(pred) and not np.isfinite(pred[numeric].to_numpy(dtype=float)).all():
        problems.append("non-finite state summaries")
    prob_cols = [c for c in pred.columns if c == "p_rank1" or c.startswith("p_top")]
    if len(pred) and not pred[prob_cols].stack().between(0, 1).all():
        problems.append("rank probability outside [0, 1]")

    if len(cells) != len(pred) * len(families) or cells.duplicated(["pred_pos", "family"]).any():
        problems.append(f"{len(cells)} cells for {len(pred)} predicted states x {len(families)} families")
    if cells["observed"].any() or cells["eligible"].any():
        problems.append("a predicted cell marked observed or eligible")
    by_pos = pred.set_index("pred_pos")
    if len(cells) and not (cells["model"].to_numpy() == by_pos.loc[cells["pred_pos"], "model"].to_numpy()).all():
        problems.append("cells do not name the predicted state of their pred_pos")
    bounded = cells[cells["family"].isin(families.loc[families["kind"] == "bounded", "family"])]
    if not (bounded["lower_90"].ge(0) & bounded["upper_90"].le(1) & bounded["pred_mean"].between(0, 1)).all():
        problems.append("bounded prediction outside [0, 1]")
    if len(cells) and not np.isfinite(cells[["pred_mean", "pred_median", "lower_90", "upper_90"]].to_numpy(dtype=float)).all():
        problems.append("non-finite cell prediction")

    result = validate_frame(
        pred,
        [Expectation("ExpectTableRowCountToBeBetween", min_value=0),
         *_ordered("display_lower", "display_median", "display_upper"),
         *_ordered("latent_lower", "latent_median", "latent_upper")],
        suite_name="predicted_states",
    )
    cell_result = validate_frame(
        cells,
        [*_ordered("lower_90", "lower_50", "upper_50"), *_ordered("lower_50", "pred_median", "upper_50"),
         Expectation("ExpectColumnPairValuesAToBeGreaterThanB", column_A="upper_90", column_B="upper_50", or_equal=True)],
        suite_name="predicted_state_cells",
    )
    if not cell_result.passed:
        problems.append("cell intervals not nested (see predicted_state_cells expectations)")
    return _combine(result, problems, {"predicted": len(pred), "cells": len(cells), "excluded": len(excl)})


@dg.asset_check(asset="predicted_states", description="Plausibility (WARN): no predicted setting is more certain "
                "than its model's best-measured observed state (display interval at least as wide), and none claims "
                "the top (P(rank 1) < 0.5): an unmeasured setting never outranks measurement.")
def predicted_states_plausible(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    pred = _table(duckdb, "SELECT model, reasoning_state, display_lower, display_upper, p_rank1 FROM predicted_states")
    # a display reference has width 0 by construction: compare with measured widths only
    observed = _table(duckdb, "SELECT model, min(display_upper - display_lower) AS narrowest "
                              "FROM capability_state_scores WHERE display_upper > display_lower GROUP BY model")
    width = pred.assign(width=pred["display_upper"] - pred["display_lower"]).merge(observed, on="model", how="left")
    too_sure = width[width["width"] < width["narrowest"] - 1e-9]
    top = pred[pred["p_rank1"] >= 0.5]
    cols = ["model", "reasoning_state", "width", "narrowest"]
    return dg.AssetCheckResult(passed=too_sure.empty and top.empty, severity=dg.AssetCheckSeverity.WARN, metadata={
        "narrower_than_measured": dg.MetadataValue.md(too_sure[cols].head(20).to_markdown(index=False))
        if len(too_sure) else "none",
        "claiming_the_top": dg.MetadataValue.json(list(map(list, zip(top["model"], top["reasoning_state"])))),
    })
