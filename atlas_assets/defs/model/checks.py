"""Checks beside the model assets: the diagnostics gates block publication; the score tables are sanity-checked."""

from pathlib import Path

import dagster as dg
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets.model.publishable import REQUIRED_FILES
from atlas_assets.model.stan_data import load_model_config

from atlas_assets.quality.expectations import Expectation, validate_frame

GATES = {
    "max_rhat": "R-hat of every capability, discrimination and difficulty parameter is at most the configured limit (1.01).",
    "min_ess_bulk": "Bulk ESS of every gated parameter is at least the configured floor (400).",
    "min_ess_tail": "Tail ESS of every gated parameter is at least the configured floor (400).",
    "divergences": "The sampler reported no divergent transitions.",
    "min_ebfmi": "E-BFMI of every chain is at least 0.3.",
}
REQUIRED_FIT_FILES = (*REQUIRED_FILES, "state_scores.csv", "model_scores.csv")


def build_gate(metric: str, description: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset="fit_diagnostics", name=f"gate_{metric}", blocking=True, description=description)
    def gate(duckdb: DuckDBResource) -> dg.AssetCheckResult:
        with duckdb.get_connection() as conn:
            row = conn.execute("SELECT value, threshold, passes, fit_dir, detail FROM fit_diagnostics WHERE metric = ?", [metric]).fetchone()
        if row is None:
            return dg.AssetCheckResult(passed=False, metadata={"error": f"no {metric} recorded"})
        value, threshold, passes, fit_dir, detail = row
        metadata = {"value": float(value) if value is not None else "not computable", "threshold": float(threshold),
                    "fit_dir": fit_dir}
        if detail:
            metadata["why"] = detail
        return dg.AssetCheckResult(passed=bool(passes), metadata=metadata)

    return gate


diagnostics_gates = [build_gate(metric, description) for metric, description in GATES.items()]


@dg.asset_check(asset="stan_data", blocking=True, description="Index maps are complete: one pinned state per model, every state of a known model.")
def stan_data_indices(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        pins = conn.execute(
            "SELECT model, sum(CASE WHEN pinned THEN 1 ELSE 0 END) AS pinned FROM model_index_states GROUP BY 1 HAVING pinned <> 1"
        ).fetchall()
        orphans = conn.execute(
            "SELECT count(*) FROM model_index_states WHERE model NOT IN (SELECT model FROM model_index_models)"
        ).fetchone()[0]
        modeled = conn.execute("SELECT count(DISTINCT (model, reasoning_state)) FROM modeled_observations").fetchone()[0]
        states = conn.execute("SELECT count(*) FROM model_index_states").fetchone()[0]
    return dg.AssetCheckResult(
        passed=not pins and orphans == 0 and modeled == states,
        metadata={"models_without_exactly_one_pin": len(pins), "orphan_states": orphans,
                  "modeled_states": modeled, "indexed_states": states},
    )


@dg.asset_check(asset="stan_data", blocking=True, description="Both display reference states (config/model.yaml "
                "display.reference) are in the data and rank-eligible: without them the display units are undefined, "
                "and there is no fallback.")
def display_references_present(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    config = load_model_config()
    rules = config.get("eligibility", {})
    with duckdb.get_connection() as conn:
        states = conn.execute("SELECT model, reasoning_state, n_families, n_obs FROM model_index_states").df()
    problems, found = [], {}
    for key, ref in config["display"]["reference"].items():
        label = f"{ref.get('model')}|{ref.get('reasoning_state')}"
        row = states[(states.model == ref.get("model")) & (states.reasoning_state == ref.get("reasoning_state"))]
        if row.empty:
            problems.append(f"{key} reference {label} is not in modeled_observations")
            continue
        n_families, n_obs = int(row.n_families.iloc[0]), int(row.n_obs.iloc[0])
        found[key] = {"state": label, "families": n_families, "observations": n_obs, "value": ref.get("value")}
        if n_families < int(rules.get("min_families", 1)) or n_obs < int(rules.get("min_observations", 1)):
            problems.append(f"{key} reference {label} is not rank-eligible ({n_families} families, {n_obs} observations)")
    return dg.AssetCheckResult(
        passed=not problems,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={"problems": dg.MetadataValue.json(problems), "references": dg.MetadataValue.json(found)},
    )


@dg.asset_check(asset="capability_fit", blocking=True, description="The fit folder is complete (posterior, diagnostics, "
                "score tables) and was made from the current stan_data (same data and specification fingerprints) "
                "with one row per indexed state.")
def capability_fit_complete(context: dg.AssetCheckExecutionContext, duckdb: DuckDBResource) -> dg.AssetCheckResult:
    fit_event = context.instance.get_latest_materialization_event(dg.AssetKey("capability_fit"))
    data_event = context.instance.get_latest_materialization_event(dg.AssetKey("stan_data"))
    if fit_event is None or data_event is None:
        return dg.AssetCheckResult(passed=False, metadata={"problems": "capability_fit or stan_data never materialized"})
    fit_md, data_md = fit_event.asset_materialization.metadata, data_event.asset_materialization.metadata
    fit_dir = Path(fit_md["fit_dir"].value)
    problems = [f"missing {name}" for name in REQUIRED_FIT_FILES if not (fit_dir / name).exists()]
    for key in ("data_sha256", "spec_sha256"):
        if fit_md[key].value != data_md[key].value:
            problems.append(f"{key} of the fit differs from stan_data's")
    if (fit_dir / "state_scores.csv").exists():
        with duckdb.get_connection() as conn:
            indexed = conn.execute("SELECT count(*) FROM model_index_states").fetchone()[0]
        scored = len(pd.read_csv(fit_dir / "state_scores.csv"))
        if scored != indexed:
            problems.append(f"{scored} scored states for {indexed} indexed states")
    return dg.AssetCheckResult(passed=not problems, metadata={"fit_dir": str(fit_dir), "problems": dg.MetadataValue.json(problems)})


@dg.asset_check(asset="capability_scores", blocking=True, description="Score tables are coherent: intervals contain their "
                "centre, rank-1 probabilities sum to one over ranked models, every fitted model is listed (a model "
                "without a headline says why).")
def capability_scores_coherent(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        listed = conn.execute("SELECT * FROM capability_model_scores").df()
        rank1_total = conn.execute("SELECT sum(p_rank1) FROM capability_model_scores").fetchone()[0]
        unlisted = conn.execute(
            "SELECT count(*) FROM model_index_models WHERE model NOT IN (SELECT model FROM capability_model_scores)"
        ).fetchone()[0]
        unexplained = conn.execute(
            "SELECT count(*) FROM capability_model_scores WHERE headline_state IS NULL "
            "AND (headline_status IS NULL OR headline_status = 'published')"
        ).fetchone()[0]
    models = listed[listed.headline_status == "published"]
    result = validate_frame(
        models,
        [
            Expectation("ExpectColumnValuesToBeUnique", column="model"),
            Expectation("ExpectColumnValuesToNotBeNull", column="headline_state"),
            Expectation("ExpectColumnPairValuesAToBeGreaterThanB", column_A="display_median", column_B="display_lower", or_equal=True),
            Expectation("ExpectColumnPairValuesAToBeGreaterThanB", column_A="display_upper", column_B="display_median", or_equal=True),
            Expectation("ExpectColumnValuesToBeBetween", column="p_rank1", min_value=0, max_value=1),
            Expectation("ExpectColumnValuesToBeBetween", column="p_top10", min_value=0, max_value=1),
        ],
        suite_name="capability_model_scores",
    )
    rank_ok = rank1_total is not None and abs(float(rank1_total) - 1.0) < 1e-6
    return dg.AssetCheckResult(
        passed=result.passed and rank_ok and unlisted == 0 and unexplained == 0,
        metadata={**result.metadata, "sum_p_rank1": float(rank1_total or 0), "fitted_models_not_listed": int(unlisted),
                  "models_without_headline_or_reason": int(unexplained),
                  "models_without_headline": int((listed.headline_status != "published").sum())},
    )


@dg.asset_check(asset="capability_scores", description="Plausibility: most steps up the reasoning ladder help "
                "(WARN: a signal to look at, not a gate).")
def reasoning_ladder_mostly_helps(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        steps = conn.execute("SELECT * FROM reasoning_effects WHERE p_step_helps IS NOT NULL").df()
    if steps.empty:
        return dg.AssetCheckResult(passed=True, severity=dg.AssetCheckSeverity.WARN, metadata={"ladder_steps": 0})
    helping = int((steps["p_step_helps"] > 0.5).sum())
    return dg.AssetCheckResult(
        passed=helping >= len(steps) / 2,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"ladder_steps": len(steps), "steps_more_likely_to_help": helping,
                  "effects": dg.MetadataValue.md(steps.to_markdown(index=False))},
    )
