"""A publishable fit folder and the DuckDB tables of its outputs and validation, built without sampling.

The posterior is the synthetic one of tests/outputs (draws around a simulated panel's truth, plus
shared reasoning effects); score tables come from atlas_assets.model.scores and the outputs tables
from atlas_assets.outputs, so their columns are the real ones. Validation tables are hand-made
with the columns the validation stage writes. `FitBundle` is built once per session; `make_home`
lays it out under a fresh ATLAS_HOME, with any table replaced or dropped.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import xarray as xr

from atlas_assets.spec import frame_hash

SPEC_SHA256 = "5" * 64          # the specification the fixture fit was "made under" (tests patch the current one)
SETTINGS_TAG = "c2w100d100s1"
OUTPUT_TABLES = ("difficulty_bounds", "reliability_grades", "dimensionality_test", "dimensionality_pairs",
                 "cell_predictions", "headline_gates")
# categories of the synthetic families (f00...), as the registry would give them: gates and skill scores need them
CATEGORIES = ("coding", "reasoning", "math", "coding", "science", "reasoning", "math")


@dataclass
class FitBundle:
    fit_dir: Path                     # the pristine fit folder (copied per test)
    data_sha256: str
    tables: dict[str, pd.DataFrame]   # DuckDB tables, `fit`-stamped where the real ones are

    @property
    def fit(self) -> str:
        return self.fit_dir.name


def build_bundle(root: Path) -> FitBundle:
    from atlas_assets.model import scores
    from atlas_assets.model.fit_process import write_table
    from atlas_assets.outputs.cell_predictions import cell_predictions, family_score_scales
    from atlas_assets.outputs.config import load_outputs_config
    from atlas_assets.outputs.difficulty import difficulty_bounds
    from atlas_assets.outputs.dimensionality import dimensionality_test
    from atlas_assets.outputs.reliability import reliability_grades
    from tests.outputs.fixtures import synthetic_fit

    si, idata, draws, cfg = synthetic_fit(chains=2, draws=100, n_models=36, n_families=7, target_obs=260)
    rng = np.random.default_rng(7)
    n_settings = len(si.settings)
    effects = 0.3 * np.arange(n_settings) - 0.6 + 0.05 * rng.standard_normal((2, 100, n_settings))
    idata.posterior["shared_effect"] = xr.DataArray(effects, dims=("chain", "draw", "shared_effect_dim_0"))

    data_sha256 = frame_hash(si.observations[["model", "reasoning_state", "family", "u"]],
                             ["model", "reasoning_state", "family"])
    fit_dir = root / f"{data_sha256[:16]}-{SPEC_SHA256[:16]}-{SETTINGS_TAG}"
    fit_dir.mkdir(parents=True)
    scale = scores.make_display_scale(idata, si, cfg)
    write_table(scores.state_scores(idata, si, cfg, scale), fit_dir / "state_scores")
    write_table(scores.model_scores(idata, si, cfg, scale), fit_dir / "model_scores")
    write_table(scores.reasoning_effects(idata, si, cfg, scale), fit_dir / "reasoning_effects")
    write_table(scores.family_parameters(idata, si, cfg, scale), fit_dir / "family_parameters")
    (fit_dir / "posterior.nc").write_bytes(b"not read by the publish stage")
    (fit_dir / "model_config.json").write_text(json.dumps(cfg, default=str))
    (fit_dir / "fingerprint.json").write_text(json.dumps({"data_sha256": data_sha256, "spec_sha256": SPEC_SHA256}))
    (fit_dir / "specification.json").write_text(json.dumps({"sql": {"sql/01.sql": "1" * 64},
                                                            "stan": {"stan/atlas.stan": "2" * 64}}))
    thresholds = {"rhat_max": 1.01, "ess_bulk_min": 400, "ess_tail_min": 400, "divergences_max": 0, "ebfmi_min": 0.3}
    gates = {g: True for g in ("rhat", "ess_bulk", "ess_tail", "divergences", "ebfmi")}
    (fit_dir / "diagnostics.json").write_text(json.dumps({
        "passes": True, "checks": gates, "thresholds": thresholds, "engine": "synthetic", "max_rhat": 1.004,
        "min_ess_bulk": 812.0, "min_ess_tail": 790.0, "divergences": 0, "min_ebfmi": 0.74, "n_chains": 2,
        "n_draws": 100, "sample_seconds": 12.5,
        "settings": {"chains": 2, "warmup": 100, "draws": 100, "seed": 1, "adapt_delta": 0.95}}))
    (fit_dir / "fit_summary.json").write_text(json.dumps({"passes": True, "engine": "synthetic",
                                                          "out_dir": str(fit_dir) + ".partial"}))

    oc = load_outputs_config(overrides={"dimensionality": {"replicates": 200, "min_shared_states": 5}})
    eligible = scores.rank_eligible(si, cfg)
    fit = fit_dir.name
    stamp = lambda frame: frame.assign(fit=fit)  # noqa: E731
    summary, pairs = dimensionality_test(si.observations["u"].to_numpy(float), draws.mu_obs, draws.u_rep,
                                         si.observations, si.families, oc)
    cells = cell_predictions(draws, si.families, si.observations, si.states, eligible, oc,
                             family_score_scales(si.families, None))
    gates, skills, deviations = gate_and_skill_tables(si, draws, fit_dir, oc)
    tables = {
        "difficulty_bounds": stamp(difficulty_bounds(draws, si.families, si.observations, si.states, eligible, oc)),
        "reliability_grades": stamp(reliability_grades(draws, si.families, si.observations, si.states, oc)),
        "dimensionality_test": stamp(summary),
        "dimensionality_pairs": stamp(pairs),
        "cell_predictions": stamp(cells),
        "headline_gates": stamp(gates),
        "skill_scores": stamp(skills),
        "skill_deviations": stamp(deviations),
        **{name: stamp(frame) for name, frame in validation_tables(si, rng).items()},
        "source_snapshots": pd.DataFrame({
            "source": ["epoch_hub", "epoch_hub", "swe_bench"], "url": ["https://e/x.zip"] * 2 + ["https://s/l.json"],
            "sha256": ["a" * 64, "a" * 64, "b" * 64],
            "retrieved_at": ["2026-11-01T03:00:00+00:00", "2026-11-02T03:00:00+00:00", "2026-11-02T03:00:01+00:00"],
            "origin": ["mirror"] * 3, "bytes": [100, 100, 50], "parsed_ok": [True] * 3, "score_rows": [10, 10, 5],
            "run_id": ["r1", "r2", "r2"], "status": ["parsed"] * 3}),
        "audit_stage_history": pd.DataFrame({
            "recorded_at": pd.to_datetime(["2026-11-02 03:01", "2026-11-02 03:02"]), "run_id": ["r2", "r2"],
            "stage": ["oriented_scores", "modeled_observations"], "rows_in": [500, 300], "rows_out": [450, 260],
            "rows_kept": [450, 260], "rows_excluded": [50, 40], "config_fingerprint": ["c0ffee", "c0ffee"]}),
    }
    return FitBundle(fit_dir, data_sha256, tables)


def gate_and_skill_tables(si, draws, fit_dir: Path, oc: dict):
    """headline_gates (publish.yaml's rule, one lineage shared by two families so the rule bites) and the skill
    tables (deviation sd fixed, few draws: the statistics are tested in tests/outputs/test_skill_scores.py)."""
    from atlas_assets.model.fit_process import read_table
    from atlas_assets.outputs.skill_scores import skill_scores
    from atlas_assets.publish.config import load_publish_config
    from atlas_assets.publish.gates import headline_gates

    families = si.families["family"].tolist()
    membership = pd.DataFrame({"family": families, "category": list(CATEGORIES[:len(families)]), "basis": "fixture"})
    states = read_table(fit_dir / "state_scores.parquet")
    # the synthetic posterior is narrow and every state broad: a stricter rule than publish.yaml's, so some fail
    width = float((states["display_upper"] - states["display_lower"]).median())
    rule = {**load_publish_config()["headline_gate"], "lineages": {families[0]: "suite", families[3]: "suite"},
            "routes": {"breadth": {"min_families": 6, "min_categories": 2, "one_of_categories": ["reasoning"]},
                       "precision": {"min_families": 3, "max_interval_width": width}}}
    gates = headline_gates(states, si.observations, membership, read_table(fit_dir / "model_scores.parquet"), rule)
    taus = pd.DataFrame({"category": sorted(set(membership["category"])), "deviation_sd": 0.2, "basis": "fixture",
                         "n_states": 0, "log_score_by_sd": None})
    skills, _ = skill_scores(draws.thin(40), si.families, si.observations, si.states, membership,
                             oc["skill_scores"], 0.9, seed=3, taus=taus)
    return gates, skills, taus


def validation_tables(si, rng: np.random.Generator) -> dict[str, pd.DataFrame]:
    """Plausible validation results on the fixture panel: forward predictions of the newest models by two
    methods, metrics of three studies, and a few rows of each other table."""
    obs = si.observations
    newest = obs.sort_values("released_on").tail(60)
    rows = []
    for method, noise in (("atlas", 0.06), ("eci_form", 0.11)):
        error = noise * rng.standard_normal(len(newest))
        pred = np.clip(newest["u"].to_numpy() + error, 0, 1)
        for (_, cell), p, e in zip(newest.iterrows(), pred, np.abs(error)):
            rows.append({"study": "forward", "fold": 0, "method": method, "model": cell["model"],
                         "reasoning_state": cell["reasoning_state"], "family": cell["family"],
                         "released_on": pd.Timestamp(cell["released_on"]), "u": cell["u"], "pred_mean": p,
                         "pred_median": p, "lower_50": p - noise, "upper_50": p + noise, "lower_90": p - 2 * noise,
                         "upper_90": p + 2 * noise, "lower_95": p - 2.5 * noise, "upper_95": p + 2.5 * noise,
                         "crps": 0.6 * e})
    predictions = pd.DataFrame(rows)
    metrics = pd.DataFrame([
        {"study": study, "method": method, "n_cells": 60, "n_folds": folds, "rmse": rmse, "mae": 0.8 * rmse,
         "rmse_points": 100 * rmse, "mae_points": 80 * rmse, "crps": 0.55 * rmse, "spearman": 0.9 - rmse,
         "coverage_50": c50, "coverage_90": c90, "coverage_95": c95}
        for study, folds in (("forward", 1), ("masked", 5), ("family", 5))
        for method, rmse, c50, c90, c95 in (("atlas", 0.07, 0.52, 0.88, 0.94), ("eci_form", 0.12, 0.31, 0.62, 0.70),
                                            ("family_mean", 0.2, np.nan, np.nan, np.nan))
    ])
    families = list(si.families["family"])
    return {
        "validation_metrics": metrics,
        "validation_predictions": predictions,
        "validation_family_skill": pd.DataFrame({
            "study": "family", "family": families, "n_cells": 20, "crps_atlas": 0.05, "crps_family_mean": 0.09,
            "skill": 0.44, "reliability_mean": 0.8}),
        "validation_family_ranks": pd.DataFrame({
            "fold": 0, "family": families[:3], "method": "atlas", "n_models": 12, "spearman": 0.8, "rmse_std": 0.5,
            "mae_std": 0.4}),
        "validation_folds": pd.DataFrame({
            "study": ["forward", "masked"], "fold": [0, 0], "n_train": [200, 208], "n_heldout": [60, 52],
            "n_scored": [60, 52], "max_rhat": [1.01, 1.02], "min_ess_bulk": [300.0, 280.0], "divergences": [0, 1],
            "sample_seconds": [30.0, 28.0], "leapfrog": [40000.0, 39000.0]}),
        "validation_sensitivity": pd.DataFrame({
            "dropped_family": families[:2], "n_observations_dropped": [30, 25], "max_top20_rank_shift": [3.0, 2.0],
            "model": ["m001", "m002"]}),
    }


def make_home(home: Path, bundle: FitBundle, *, replace: dict[str, pd.DataFrame] | None = None,
              drop: tuple[str, ...] = (), fit_name: str | None = None,
              fingerprint: dict[str, str] | None = None) -> Path:
    """ATLAS_HOME with the fit folder at model/fits/<fit_name or its name> and var/atlas.duckdb's tables;
    returns the fit folder."""
    fit_dir = home / "model" / "fits" / (fit_name or bundle.fit)
    if not fit_dir.exists():
        shutil.copytree(bundle.fit_dir, fit_dir)
    if fingerprint is not None:
        (fit_dir / "fingerprint.json").write_text(json.dumps(fingerprint))
    write_tables(home / "atlas.duckdb", {**bundle.tables, **(replace or {})}, drop)
    return fit_dir


def write_tables(path: Path, tables: dict[str, pd.DataFrame], drop: tuple[str, ...] = ()) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(path)) as conn:
        for name, frame in tables.items():
            conn.execute(f"DROP TABLE IF EXISTS {name}")
            if name in drop:
                continue
            conn.register("fixture_frame", frame)
            conn.execute(f"CREATE TABLE {name} AS SELECT * FROM fixture_frame")
            conn.unregister("fixture_frame")
