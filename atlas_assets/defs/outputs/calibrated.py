"""Calibrate-in (issue 13): every model outside the main fit that has a result on a fitted family gets a capability.

Asset `calibrated_states` reads the latest publishable fit exactly like the other outputs
(`publishable_inputs`: refused, naming the gate, when the fit may not be published) and the
stage-05 table `family_observations` (before the coverage filter), calibrates each model that
is not in the fit from the fit's posterior (atlas_assets/outputs/calibrate.py: per draw, no
refit, seconds) and writes three tables in one transaction, each stamped with the fit:

- `calibrated_states`: one row per calibrated state, path "calibrated", status
  "calibrated (thin evidence): ..." saying whether it passes the fit's rank-eligibility gate,
  display and latent summaries on the fit's display scale (per draw), rank probabilities for
  eligible states only (among the fitted headline states and the calibrated eligible ones),
  why the model was outside the fit, and `feedback_ess_share` (how far a refit would move);
- `calibrated_cell_predictions`: the columns of `cell_predictions` (+ path) for every fitted
  family x calibrated state; `state_pos` there is the state's `cal_pos`;
- `calibrated_exclusions`: what was not calibrated and why (a model with no row on a fitted
  family, unusable rows, new states of fitted models), so nothing is dropped silently;
- `calibrated_skill_scores`: every calibrated state x category, by the design of `skill_scores`
  (outputs/skill_scores.py `calibrated_skill_scores`: calibrate-in's prior and draws in the place of the
  fitted population and posterior, the deviation sd the fitted states learned, read from
  `skill_deviations` of the same fit), path "calibrated", the same "not enough data" rule.
"""

import time

import dagster as dg
import duckdb as duckdb_module
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.outputs.assets import _md, _registry_benchmarks, _stamp, publishable_inputs
from atlas_assets.defs.outputs.predicted_states import _registry
from atlas_assets.defs.refresh import asset_refresh
from atlas_assets.storage import replace_tables

OBSERVATION_COLUMNS = "model, reasoning_state, family, kind, u, correct, items, floor"


def _read(duckdb: DuckDBResource) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    with duckdb.get_connection() as conn:
        observations = conn.execute(f"SELECT {OBSERVATION_COLUMNS} FROM family_observations").df()
        try:
            # release dates place a model's theta prior on the fit's release trend (outputs.yaml calibrate)
            released = conn.execute("SELECT model, released_on FROM registry_models").df()
        except duckdb_module.Error:
            released = pd.DataFrame(columns=["model", "released_on"])  # no registry: the program's prior (said per row)
        observations = observations.merge(released.drop_duplicates("model"), on="model", how="left")
        try:
            audit = conn.execute("SELECT model, family, reason FROM audit_exclusions "
                                 "WHERE stage = 'modeled_observations'").df()
        except duckdb_module.Error:
            audit = None
    return observations, audit


def _unmeasured_settings(observations: pd.DataFrame, model_config: dict, registry) -> tuple[dict, pd.DataFrame]:
    """Per calibrated model, the settings it plausibly has without results (the registry rule of predicted_states:
    atlas_assets/outputs/predicted_states.py), and the implausible ones as calibrated_exclusions rows."""
    from atlas_assets.defs.outputs.predicted_states import plausibility
    from atlas_assets.outputs.calibrate import EXCLUSION_COLUMNS

    if observations.empty:
        return {}, pd.DataFrame(columns=EXCLUSION_COLUMNS)
    states = observations[["model", "reasoning_state"]].drop_duplicates()
    models = observations.groupby("model", as_index=False)["released_on"].first()
    plaus = plausibility(states, models, model_config, registry)
    placed = plaus[plaus["plausible"]]
    unmeasured = placed.groupby("model")["reasoning_state"].agg(list).to_dict()
    rejected = plaus[~plaus["plausible"]]
    not_placed = pd.DataFrame({"model": rejected["model"], "reasoning_state": rejected["reasoning_state"], "family": None,
                               "n_obs": 0, "reason": "unmeasured setting not placed: " + rejected["basis"]},
                              columns=EXCLUSION_COLUMNS)
    return unmeasured, not_placed


@dg.asset(
    deps=["capability_scores", "skill_scores"],
    pool="duckdb",
    kinds={"duckdb", "python"},
    description="Calibrate-in (issue 13): every model outside the main fit (removed by the coverage filter, or new "
    "since the fit) with a result on a fitted family gets its posterior given the fit: per posterior draw, its "
    "capability from its own observations under the fit's likelihood, theta's prior from the fit's release-date "
    "trend (outputs.yaml calibrate.theta_prior), the program's reasoning terms integrated from their prior). Tables calibrated_states (status 'calibrated (thin evidence)', "
    "display scale, intervals, rank probabilities where the rank-eligibility gate passes), "
    "calibrated_cell_predictions (cell_predictions' columns), calibrated_exclusions (what was not calibrated, why) "
    "and calibrated_skill_scores (skill per calibrated state x category as skill_scores computes it, calibrate-in's "
    "prior and draws in place of the fit's; path 'calibrated').",
)
def calibrated_states(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.defs.outputs.skill_scores import family_membership, skill_deviations_of
    from atlas_assets.outputs import calibrate as cal_mod
    from atlas_assets.outputs.cell_predictions import family_score_scales
    from atlas_assets.outputs.skill_scores import PUBLISHED, calibrated_skill_scores

    refresh = asset_refresh(context, "publication", reads_fit=True,
                            also=("family_observations", "registry_models", "audit_exclusions", "registry_benchmarks"))
    if reused := refresh.reuse_tables(duckdb, 'calibrated_states', 'calibrated_cell_predictions', 'calibrated_exclusions',
                                      'calibrated_skill_scores'):
        return reused
    fit_dir, loaded, draws, cfg, eligible = publishable_inputs(context)
    si, model_cfg = loaded.stan_input, loaded.config
    reasoning = cal_mod.reasoning_draws_from_fit(loaded).thin(int(cfg["draws"]["max_draws"]))
    if reasoning.n_draws != draws.n_draws:
        raise dg.Failure(description=f"reasoning draws ({reasoning.n_draws}) and posterior draws ({draws.n_draws}) "
                         "of the fit disagree")
    family_observations, audit = _read(duckdb)
    # the skills of the calibrated states need the fitted states' learned deviations: refused before any work
    scfg = cfg["skill_scores"]
    taus = skill_deviations_of(duckdb, fit_dir.name)
    membership = family_membership(duckdb, si.families["family"], scfg.get("also_in"))
    started = time.perf_counter()
    candidates = cal_mod.candidate_observations(family_observations, si.observations, si.families, audit)
    released = candidates.observations.groupby("model")["released_on"].first().to_dict()
    priors = cal_mod.theta_priors_from_fit(loaded, draws.n_draws, released, cfg["calibrate"])
    unmeasured, not_placed = _unmeasured_settings(candidates.observations, si.config, _registry(duckdb))
    calibration = cal_mod.calibrate(draws, reasoning, si.families, candidates.observations, seed=int(cfg["draws"]["seed"]),
                                    theta_priors=priors, unmeasured=unmeasured)
    calibration = cal_mod.add_unknown_settings(calibration, candidates.unknown, draws, si.families,
                                               int(cfg["draws"]["seed"]))
    exclusions = pd.concat([candidates.exclusions, not_placed], ignore_index=True)
    rules = model_cfg.get("eligibility", {})
    interval = float(model_cfg["display"].get("interval", 0.9))
    top_k = int(model_cfg["display"].get("top_k", 10))
    headlines = cal_mod.fitted_headline_display(draws, si.states, eligible)
    states = cal_mod.calibrated_state_table(calibration, draws, headlines, rules, interval, top_k)
    if len(calibration.states):
        cells = cal_mod.calibrated_cell_predictions(
            calibration, draws, si.families, si.observations, cal_mod.eligibility(calibration.states, rules), cfg,
            family_score_scales(si.families, _registry_benchmarks(duckdb)))
    else:
        cells = pd.DataFrame(columns=["model", "reasoning_state", "state_pos", "family", "observed", "ppp", "path"])
    seconds = time.perf_counter() - started
    skills = calibrated_skill_scores(draws, si.families, calibration, reasoning, priors, membership, taus, scfg,
                                     float(cfg["draws"]["interval"]), int(cfg["draws"]["seed"]))
    skill_seconds = time.perf_counter() - started - seconds
    tables = {"calibrated_states": _stamp(states, fit_dir), "calibrated_cell_predictions": _stamp(cells, fit_dir),
              "calibrated_exclusions": _stamp(exclusions, fit_dir), "calibrated_skill_scores": _stamp(skills, fit_dir)}
    with duckdb.get_connection() as conn:
        replace_tables(conn, tables)
    n_models = int(states["model"].nunique()) if len(states) else 0
    return refresh.computed({
        "fit_dir": dg.MetadataValue.path(str(fit_dir)),
        "calibrated_states": len(states),
        "calibrated_models": n_models,
        "rank_eligible_states": int(states["eligible"].sum()) if len(states) else 0,
        "not_calibrated": dg.MetadataValue.json(candidates.exclusions["reason"].value_counts().to_dict()),
        "unmeasured_settings_placed": int((~states["observed"].astype(bool)).sum()) if len(states) else 0,
        "settings_not_placed": len(not_placed),
        "seconds": round(seconds, 2),
        "seconds_per_50_models": round(50 * seconds / max(n_models, 1), 2),
        "min_feedback_ess_share": float(states["feedback_ess_share"].min()) if len(states) else float("nan"),
        "draws_used": draws.n_draws,
        "predicted_cells": int((~cells["observed"].astype(bool)).sum()) if len(cells) else 0,
        "skill_scores_published": int((skills["status"] == PUBLISHED).sum()),
        "skill_seconds": round(skill_seconds, 2),
        "top": _md(states[["model", "reasoning_state", "display_mean", "display_lower", "display_upper", "n_obs",
                           "families", "status"]] if len(states) else states, 20),
    })
