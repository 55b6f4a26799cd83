"""Checks beside the model assets: the diagnostics gates block publication; the score tables are sanity-checked."""

import dagster as dg
from dagster_duckdb import DuckDBResource

from atlas_assets.quality.expectations import Expectation, validate_frame

GATES = {
    "max_rhat": "R-hat of every capability, discrimination and difficulty parameter is at most the configured limit (1.01).",
    "min_ess_bulk": "Bulk ESS of every gated parameter is at least the configured floor (400).",
    "min_ess_tail": "Tail ESS of every gated parameter is at least the configured floor (400).",
    "divergences": "The sampler reported no divergent transitions.",
    "min_ebfmi": "E-BFMI of every chain is at least 0.3.",
}


def build_gate(metric: str, description: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset="fit_diagnostics", name=f"gate_{metric}", blocking=True, description=description)
    def gate(duckdb: DuckDBResource) -> dg.AssetCheckResult:
        with duckdb.get_connection() as conn:
            row = conn.execute("SELECT value, threshold, passes, fit_dir FROM fit_diagnostics WHERE metric = ?", [metric]).fetchone()
        if row is None:
            return dg.AssetCheckResult(passed=False, metadata={"error": f"no {metric} recorded"})
        value, threshold, passes, fit_dir = row
        return dg.AssetCheckResult(
            passed=bool(passes),
            metadata={"value": float(value) if value is not None else None, "threshold": float(threshold), "fit_dir": fit_dir},
        )

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


@dg.asset_check(asset="capability_scores", blocking=True, description="Score tables are coherent: intervals contain their "
                "centre, rank-1 probabilities sum to one over models, every model has a headline state.")
def capability_scores_coherent(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        models = conn.execute("SELECT * FROM capability_model_scores").df()
        rank1_total = conn.execute("SELECT sum(p_rank1) FROM capability_model_scores").fetchone()[0]
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
        passed=result.passed and rank_ok,
        metadata={**result.metadata, "sum_p_rank1": float(rank1_total or 0)},
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
