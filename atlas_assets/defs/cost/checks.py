"""Checks beside the cost assets: the ledger and weights of the cost stage, the reference state, the cost fit's
convergence gates (blocking: nothing downstream publishes from a failing fit), and the published cost tables."""


import json
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from atlas_assets.quality.expectations import Expectation, validate_frame


@dg.asset_check(asset="cost_observations", blocking=True, description="Every raw_costs row is either kept or in "
                "audit_cost_exclusions with a reason (rows in = kept + excluded), once.")
def cost_ledger_conserved(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        rows_in = conn.execute("SELECT count(*) FROM raw_costs").fetchone()[0]
        kept = conn.execute("SELECT count(*) FROM cost_observations").fetchone()[0]
        excluded = conn.execute("SELECT count(*) FROM audit_cost_exclusions").fetchone()[0]
        both = conn.execute("SELECT count(*) FROM cost_observations WHERE row_key IN "
                            "(SELECT subject FROM audit_cost_exclusions)").fetchone()[0]
        lost = conn.execute("SELECT count(*) FROM raw_costs WHERE row_key NOT IN (SELECT row_key FROM cost_observations) "
                            "AND row_key NOT IN (SELECT subject FROM audit_cost_exclusions)").fetchone()[0]
    return dg.AssetCheckResult(passed=rows_in == kept + excluded and both == 0 and lost == 0,
                               metadata={"rows_in": rows_in, "kept": kept, "excluded": excluded,
                                         "kept_and_excluded": both, "neither": lost})


@dg.asset_check(asset="cost_observations", blocking=True, description="One run counts once: the weights of the rows of "
                "each run sum to 1, and every row has a positive weight and finite log10 dollars.")
def cost_runs_weigh_one(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        off = conn.execute("SELECT run_id, sum(weight) AS w FROM cost_observations GROUP BY 1 HAVING abs(w - 1) > 1e-9").df()
        bad = conn.execute("SELECT count(*) FROM cost_observations WHERE NOT (weight > 0) OR NOT isfinite(log10_usd)").fetchone()[0]
        runs, rows = conn.execute("SELECT count(DISTINCT run_id), count(*) FROM cost_observations").fetchone()
    return dg.AssetCheckResult(passed=off.empty and bad == 0,
                               metadata={"runs": runs, "rows": rows, "runs_not_weighing_one": len(off), "bad_rows": bad,
                                         "examples": dg.MetadataValue.json(off.head(10).to_dict("records"))})


@dg.asset_check(asset="cost_observations", blocking=True, description="The reference state (config/cost.yaml "
                "reference, GPT-5 high) has a reported cost: without it the cost scale is undefined (no substitute).")
def cost_reference_present(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    from atlas_assets.cost.config import load_cost_config

    ref = load_cost_config()["reference"]
    with duckdb.get_connection() as conn:
        n = conn.execute("SELECT count(DISTINCT run_id) FROM cost_observations WHERE model = ? AND reasoning_state = ?",
                         [ref["model"], ref["reasoning_state"]]).fetchone()[0]
    return dg.AssetCheckResult(passed=n > 0, metadata={"reference": f"{ref['model']}|{ref['reasoning_state']}", "runs": n})


@dg.asset_check(asset="cost_observations", description="Most reported costs reach the model (WARN when more than 20% "
                "are dropped: an unmapped source or identifier scheme to look at).")
def cost_rows_mostly_kept(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        rows_in = conn.execute("SELECT count(*) FROM raw_costs").fetchone()[0]
        reasons = dict(conn.execute("SELECT reason, count(*) FROM audit_cost_exclusions GROUP BY 1").fetchall())
    dropped = sum(reasons.values())
    return dg.AssetCheckResult(passed=rows_in == 0 or dropped <= 0.2 * rows_in, severity=dg.AssetCheckSeverity.WARN,
                               metadata={"rows_in": rows_in, "dropped": dropped, "by_reason": dg.MetadataValue.json(reasons)})


GATES = {
    "rhat": ("max_rhat", "R-hat of every state cost, benchmark level, spread and noise scale is at most 1.01."),
    "ess_bulk": ("min_ess_bulk", "Bulk ESS of every gated cost parameter is at least 400."),
    "ess_tail": ("min_ess_tail", "Tail ESS of every gated cost parameter is at least 400."),
    "divergences": ("divergences", "The sampler reported no divergent transitions."),
    "ebfmi": ("min_ebfmi", "E-BFMI of every chain is at least 0.3."),
}


def _build_gate(gate: str, metric: str, description: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset="cost_fit", name=f"cost_gate_{metric}", blocking=True, description=description)
    def check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        from atlas_assets.model.diagnostics import failure_reasons

        event = context.instance.get_latest_materialization_event(dg.AssetKey("cost_fit"))
        if event is None or event.asset_materialization is None:
            return dg.AssetCheckResult(passed=False, metadata={"error": "cost_fit never materialized"})
        fit_dir = Path(event.asset_materialization.metadata["fit_dir"].value)
        path = fit_dir / "diagnostics.json"
        if not path.exists():
            return dg.AssetCheckResult(passed=False, metadata={"error": f"no {path}"})
        diagnostics = json.loads(path.read_text())
        value = diagnostics.get(metric)
        metadata = {"value": float(value) if value is not None else "not computable", "fit_dir": str(fit_dir)}
        why = failure_reasons(diagnostics).get(gate)
        if why:
            metadata["why"] = why
        return dg.AssetCheckResult(passed=bool((diagnostics.get("checks") or {}).get(gate, False)), metadata=metadata)

    return check


cost_gates = [_build_gate(gate, metric, description) for gate, (metric, description) in GATES.items()]


@dg.asset_check(asset="cost_index", blocking=True, description="The cost index is coherent: the reference state is "
                "exactly 1 [1, 1]; every interval contains its median; one row per state of the cost fit.")
def cost_index_coherent(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        table = conn.execute("SELECT * FROM cost_index").df()
    reference = table[table.is_reference]
    ref_ok = len(reference) == 1 and all(abs(float(reference[c].iloc[0]) - 1.0) < 1e-9 for c in
                                         ("cost_index_median", "cost_index_lower", "cost_index_upper"))
    result = validate_frame(table, [
        Expectation("ExpectCompoundColumnsToBeUnique", column_list=["model", "reasoning_state"]),
        Expectation("ExpectColumnPairValuesAToBeGreaterThanB", column_A="cost_index_median", column_B="cost_index_lower", or_equal=True),
        Expectation("ExpectColumnPairValuesAToBeGreaterThanB", column_A="cost_index_upper", column_B="cost_index_median", or_equal=True),
        Expectation("ExpectColumnValuesToBeBetween", column="cost_index_median", min_value=0, strict_min=True),
    ], suite_name="cost_index")
    return dg.AssetCheckResult(passed=result.passed and ref_ok, metadata={**result.metadata, "reference_is_one": ref_ok})


@dg.asset_check(asset="cost_index", description="Every configured workload has at least one benchmark with costs in "
                "the fit (WARN: its dollars are otherwise left empty).")
def cost_workloads_covered(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        table = conn.execute("SELECT * FROM cost_index LIMIT 1").df()
    empty = [c[len("usd_"):-len("_benchmarks")] for c in table.columns
             if c.startswith("usd_") and c.endswith("_benchmarks") and not (len(table) and table[c].iloc[0])]
    return dg.AssetCheckResult(passed=not empty, severity=dg.AssetCheckSeverity.WARN,
                               metadata={"workloads_without_benchmarks": dg.MetadataValue.json(empty)})


@dg.asset_check(asset="cost_frontier", blocking=True, description="Frontier probabilities are probabilities and the "
                "table carries both fits' names (how many Pareto-optimal states have P(frontier) < 0.5 is reported).")
def cost_frontier_coherent(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        table = conn.execute("SELECT * FROM cost_frontier").df()
    if table.empty:
        return dg.AssetCheckResult(passed=True, severity=dg.AssetCheckSeverity.WARN,
                                   metadata={"rows": 0, "note": "no state is in both fits"})
    problems = []
    if not table.p_frontier.between(0, 1).all():
        problems.append("p_frontier outside [0, 1]")
    if table.fit.isna().any() or table.cost_fit.isna().any():
        problems.append("rows without fit or cost_fit")
    return dg.AssetCheckResult(passed=not problems, metadata={"rows": len(table), "problems": dg.MetadataValue.json(problems),
                                                              "pareto_optimal": int(table.pareto_optimal.sum()),
                                                              "pareto_optimal_below_half": int((table.pareto_optimal & (table.p_frontier < 0.5)).sum())})


COST_EXCLUSION_REASONS = ("unregistered_benchmark", "unknown_model_id", "unmapped_model", "unmapped_reasoning_state",
                          "not_a_cost")


@dg.asset_check(asset="audit_cost_exclusions", blocking=True, description="Every dropped cost names one of the stage's "
                "rules (sql/08_cost_observations.sql) and the raw row it was.")
def cost_exclusions_named(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        reasons = dict(conn.execute("SELECT reason, count(*) FROM audit_cost_exclusions GROUP BY 1").fetchall())
        orphans = conn.execute("SELECT count(*) FROM audit_cost_exclusions WHERE subject NOT IN "
                               "(SELECT row_key FROM raw_costs)").fetchone()[0]
    unknown = sorted(set(reasons) - set(COST_EXCLUSION_REASONS))
    return dg.AssetCheckResult(passed=not unknown and orphans == 0, metadata={
        "by_reason": dg.MetadataValue.json(reasons), "unknown_reasons": dg.MetadataValue.json(unknown),
        "not_a_raw_cost": orphans})
