"""Checks beside `calibrated_states`: blocking where a wrong or invented number would be published, WARN where the
calibrated numbers disagree with the fit they came from (a refit would move them)."""

import dagster as dg
import numpy as np
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.outputs.checks import _combine, _one_fit, _ordered, _table
from atlas_assets.quality.expectations import Expectation, validate_frame

# WARN below these (module constants like calibrate.py's settings; candidates for outputs.yaml `calibrate`)
MIN_FEEDBACK_ESS_SHARE = 0.5
MIN_REASONING_TERM_ESS_SHARE = 0.1


@dg.asset_check(asset="calibrated_states", blocking=True, description="Calibrated states are outside the fit, each "
                "once, flagged 'calibrated (thin evidence)' with the gate in its status (a plausible setting without "
                "results: 'predicted setting', n_obs 0, never eligible, of a model with a measured state); display summaries finite and "
                "ordered; rank probabilities only where the rank-eligibility gate passes, in [0, 1]; every model of "
                "family_observations outside the fit is calibrated or named in calibrated_exclusions (none dropped "
                "silently); one fit for the three tables.")
def calibrated_states_valid(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    from atlas_assets.outputs.calibrate import PATH, STATUS

    states = _table(duckdb, "SELECT * FROM calibrated_states")
    excluded = _table(duckdb, "SELECT * FROM calibrated_exclusions")
    fitted = set(_table(duckdb, "SELECT DISTINCT model FROM capability_state_scores")["model"])
    observed = set(_table(duckdb, "SELECT DISTINCT model FROM family_observations")["model"])
    problems = _one_fit(pd.concat([states[["fit"]], excluded[["fit"]]])) if len(states) else []
    inside = sorted(set(states["model"]) & fitted)
    if inside:
        problems.append(f"calibrated models that are in the fit: {inside[:10]}")
    if states.duplicated(["model", "reasoning_state"]).any():
        problems.append("duplicated calibrated states")
    missing = sorted(observed - fitted - set(states["model"]) - set(excluded["model"]))
    if missing:
        problems.append(f"models outside the fit neither calibrated nor excluded: {missing[:10]}")
    if len(states):
        if not (states["path"] == PATH).all() or not states["status"].str.startswith(STATUS).all():
            problems.append(f"rows without path {PATH!r} or status {STATUS!r}")
        measured = states["observed"].astype(bool)
        unknown = states["unknown_setting"].astype(bool)
        gated = states["status"].str.contains("below the rank-eligibility gate")
        if (gated == states["eligible"])[measured & ~unknown].any():
            problems.append("status and eligibility disagree")
        if states.loc[unknown, "eligible"].any() or not states.loc[unknown, "status"].str.contains("unknown").all():
            problems.append("a state of unknown setting must say so and is never rank-eligible")
        unmeasured = states[~measured]
        if unmeasured["eligible"].any() or not unmeasured["status"].str.contains("predicted setting").all() \
                or (unmeasured["n_obs"] != 0).any() or (states.loc[measured, "n_obs"] < 1).any():
            problems.append("a state without results must have n_obs 0, status 'predicted setting' and no eligibility "
                            "(and one with results n_obs >= 1)")
        if not set(unmeasured["model"]) <= set(states.loc[measured, "model"]):
            problems.append("an unmeasured setting of a model with no measured state (nothing to place it from)")
        ranked = states["p_rank1"].notna()
        if (ranked != states["eligible"]).any():
            problems.append("rank probabilities must be given exactly for rank-eligible states")
        numeric = ["display_mean", "display_median", "display_lower", "display_upper", "display_sd", "latent_mean"]
        if not np.isfinite(states[numeric].to_numpy(dtype=float)).all():
            problems.append("non-finite display or latent summary")
    result = validate_frame(
        states,
        [*_ordered("display_lower", "display_median", "display_upper"),
         Expectation("ExpectColumnValuesToBeBetween", column="p_rank1", min_value=0, max_value=1),
         Expectation("ExpectColumnValuesToBeBetween", column="feedback_ess_share", min_value=0, max_value=1),
         Expectation("ExpectColumnValuesToBeBetween", column="n_obs", min_value=0)],
        suite_name="calibrated_states",
    ) if len(states) else dg.AssetCheckResult(passed=True)
    return _combine(result, problems, {"calibrated_states": len(states), "excluded_rows": len(excluded)})


@dg.asset_check(asset="calibrated_states", blocking=True, description="calibrated_cell_predictions has every fitted "
                "family x calibrated state exactly once, each observation used by the calibration once (with a p-value "
                "in [0, 1]); predictions finite, intervals nested, bounded predictions in [0, 1].")
def calibrated_cell_predictions_complete(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    states = _table(duckdb, "SELECT model, reasoning_state, n_obs FROM calibrated_states")
    cells = _table(duckdb, "SELECT * FROM calibrated_cell_predictions")
    problems = []
    if len(states):
        problems += _one_fit(cells)
        n_families = cells["family"].nunique()
        per_state = cells.groupby(["model", "reasoning_state"]).size()
        if len(per_state) != len(states) or (per_state != n_families).any():
            problems.append(f"not every calibrated state x family cell is present ({len(states)} states, {n_families} "
                            f"families, {len(cells)} cells)")
        if cells.duplicated(["model", "reasoning_state", "family"]).any():
            problems.append("duplicated cells")
        if int(cells["observed"].sum()) != int(states["n_obs"].sum()):
            problems.append(f"{int(cells['observed'].sum())} observed cells for {int(states['n_obs'].sum())} observations")
        if not cells.loc[cells["observed"], "ppp"].between(0, 1).all():
            problems.append("observed cell without a p-value in [0, 1]")
        bounded = ~cells["score_scale"].eq("standardised rating")
        if not (cells.loc[bounded, "lower_90"].ge(0) & cells.loc[bounded, "upper_90"].le(1)).all():
            problems.append("bounded prediction outside [0, 1]")
        if not np.isfinite(cells[["pred_mean", "pred_median", "lower_90", "upper_90"]].to_numpy(dtype=float)).all():
            problems.append("non-finite prediction")
        result = validate_frame(cells, [*_ordered("lower_90", "lower_50", "upper_50"),
                                        *_ordered("lower_50", "pred_median", "upper_50")],
                                suite_name="calibrated_cell_predictions")
    else:
        result = dg.AssetCheckResult(passed=True)
    return _combine(result, problems, {"cells": len(cells)})


@dg.asset_check(asset="calibrated_states", blocking=True, description="calibrated_skill_scores has every calibrated "
                "state x category exactly once, flagged path 'calibrated' and never ranked; a number only where the "
                "state has >= min_families families in the category, 'not enough data' and no number otherwise; "
                "published summaries finite with ordered intervals; each category's deviation sd is the one "
                "skill_deviations learned on the fitted states; one fit with calibrated_states and skill_deviations.")
def calibrated_skill_scores_valid(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    from atlas_assets.defs.outputs.skill_scores import skill_table_result
    from atlas_assets.outputs.calibrate import PATH

    skills = _table(duckdb, "SELECT * FROM calibrated_skill_scores")
    states = _table(duckdb, "SELECT fit FROM calibrated_states")
    taus = _table(duckdb, "SELECT category, deviation_sd, fit FROM skill_deviations")
    problems = []
    if len(skills):
        problems += _one_fit(pd.concat([skills[["fit"]], states[["fit"]], taus[["fit"]]]))
        if not (skills["path"] == PATH).all() or skills["category_rank"].notna().any():
            problems.append(f"rows without path {PATH!r}, or ranked (calibrated skills are not on the leaderboard)")
        learned = skills[["category", "deviation_sd"]].drop_duplicates().merge(taus, on="category", how="left",
                                                                              suffixes=("", "_fitted"))
        if not np.isclose(learned["deviation_sd"], learned["deviation_sd_fitted"]).all():
            problems.append("a category's deviation sd is not the one the fitted states learned (skill_deviations)")
    return skill_table_result(skills, len(states), "calibrated_skill_scores", problems)


@dg.asset_check(asset="calibrated_states", description="Signal (WARN): the calibrated numbers are consistent with the "
                f"fit: reweighting its draws by a model's marginal likelihood keeps >= {MIN_FEEDBACK_ESS_SHARE:.0%} "
                "effective draws (else a refit with the model would move the families: it should wait for the refit) "
                f"and the reasoning-term importance weights keep >= {MIN_REASONING_TERM_ESS_SHARE:.0%}.")
def calibrated_states_agree_with_the_fit(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    states = _table(duckdb, "SELECT model, reasoning_state, feedback_ess_share, reasoning_term_ess_share FROM "
                            "calibrated_states")
    tense = states[(states["feedback_ess_share"] < MIN_FEEDBACK_ESS_SHARE)
                   | (states["reasoning_term_ess_share"] < MIN_REASONING_TERM_ESS_SHARE)]
    return dg.AssetCheckResult(passed=tense.empty, severity=dg.AssetCheckSeverity.WARN, metadata={
        "in_tension": dg.MetadataValue.md(tense.to_markdown(index=False)) if len(tense) else "none",
        "min_feedback_ess_share": float(states["feedback_ess_share"].min()) if len(states) else float("nan")})
