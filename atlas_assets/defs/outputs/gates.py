"""Publication gates (issue 12): asset `headline_gates` (group outputs: it reads the fit like every output; the rule
is publish.yaml `headline_gate`, the logic atlas_assets/publish/gates.py) and the checks beside it.

One row per fitted state of the latest publishable fit: its evidence (families, categories, lineages, interval
width of state_scores), whether publish.yaml `headline_gate` lets its headline be published, and why not. The
publication applies it to the published state_scores and model_scores (atlas_assets/publish/gates.py,
`apply_to_scores`); the fit and cell_predictions keep every state.
"""

import dagster as dg
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.refresh import asset_refresh
from atlas_assets.defs.outputs.assets import _md, _stamp, publishable_fit_dir
from atlas_assets.defs.outputs.checks import _one_fit, _table
from atlas_assets.defs.outputs.skill_scores import family_membership
from atlas_assets.storage import replace_rows


def _fit_tables(fit_dir):
    from atlas_assets.publish.artifacts import _read_fit_table

    tables = {name: _read_fit_table(fit_dir, name) for name in ("state_scores", "model_scores", "modeled_observations")}
    missing = [name for name, frame in tables.items() if frame is None]
    if missing:
        raise dg.Failure(description=f"fit {fit_dir.name} lacks {missing}: no gate can be evaluated")
    return tables


@dg.asset(
    deps=["capability_scores", "registry_benchmarks"],
    pool="duckdb",
    kinds={"duckdb", "python"},
    description="Publication gate per fitted state (seed 004 section 08, publish.yaml headline_gate): rank-eligible, "
    "results from >= min_lineages benchmark lineages, and one route (e.g. >= 4 families across >= 2 categories with "
    "one in reasoning or coding; or >= 3 families with a 90% interval no wider than a configured width). Pass/fail "
    "with the reason; the publication lists failing states as 'not enough evidence'.",
)
def headline_gates(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.outputs.config import load_outputs_config
    from atlas_assets.publish.config import load_publish_config
    from atlas_assets.publish.gates import headline_gates as compute
    from atlas_assets.publish.gates import reason_counts

    refresh = asset_refresh(context, "publication", reads_fit=True)
    if reused := refresh.reuse_tables(duckdb, 'headline_gates', 'registry_benchmarks'):
        return reused
    fit_dir = publishable_fit_dir(context)
    cfg = load_publish_config()["headline_gate"]
    tables = _fit_tables(fit_dir)
    observations = tables["modeled_observations"]
    membership = family_membership(duckdb, sorted(observations["family"].unique()),
                                   load_outputs_config()["skill_scores"].get("also_in"))
    gates = compute(tables["state_scores"], observations, membership, tables["model_scores"], cfg)
    gates = _stamp(gates, fit_dir)
    with duckdb.get_connection() as conn:
        replace_rows(conn, "headline_gates", gates, create=True)
    heads = gates[gates["headline_state"]]
    return refresh.computed({
        "fit_dir": dg.MetadataValue.path(str(fit_dir)),
        "states": len(gates),
        "states_passing": int(gates["gate_pass"].sum()),
        "headline_states": len(heads),
        "headline_states_passing": int(heads["gate_pass"].sum()),
        "failed_requirements": _md(reason_counts(gates), 30),
        "failing_headlines": _md(heads[~heads["gate_pass"]][["model", "reasoning_state", "n_families", "categories",
                                                              "lineages", "interval_width", "reason"]], 30),
    })


@dg.asset_check(asset="headline_gates", blocking=True, description="One row per fitted state of one fit; status "
                "follows gate_pass; a passing state is rank-eligible, has >= min_lineages lineages and the families "
                "of at least the least demanding route; a failing one names its reason; lineage and category counts "
                "match the lists.")
def headline_gates_valid(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    from atlas_assets.publish.config import load_publish_config
    from atlas_assets.publish.gates import FAIL, PASS

    cfg = load_publish_config()["headline_gate"]
    gates = _table(duckdb, "SELECT * FROM headline_gates")
    states = _table(duckdb, "SELECT model, reasoning_state FROM model_index_states")
    problems = _one_fit(gates)
    key = ["model", "reasoning_state"]
    if gates.duplicated(key).any() or len(gates.merge(states, on=key)) != len(states) or len(gates) != len(states):
        problems.append(f"{len(gates)} gate rows for {len(states)} fitted states (each exactly once)")
    passed = gates["gate_pass"].astype(bool)
    if ((gates["status"] == PASS) != passed).any() or not gates.loc[~passed, "status"].eq(FAIL).all():
        problems.append("status disagrees with gate_pass")
    least = min(int(r["min_families"]) for r in cfg["routes"].values())
    bad = gates[passed & (~gates["eligible"].astype(bool) | (gates["n_lineages"] < int(cfg["min_lineages"]))
                          | (gates["n_families"] < least))]
    if len(bad):
        problems.append(f"passing states that miss a requirement: {bad[key].head(5).to_dict('records')}")
    if gates.loc[~passed, "reason"].fillna("").eq("").any():
        problems.append("a failing state without a reason")
    count = lambda col: gates[col].fillna("").map(lambda s: len([x for x in str(s).split(", ") if x]))  # noqa: E731
    if (count("lineages") != gates["n_lineages"]).any() or (count("categories") != gates["n_categories"]).any():
        problems.append("lineage or category counts disagree with their lists")
    return dg.AssetCheckResult(passed=not problems, metadata={
        "problems": dg.MetadataValue.json(problems[:20]), "states": len(gates), "passing": int(passed.sum())})


@dg.asset_check(asset="headline_gates", description="Signal (WARN): every family named in publish.yaml "
                "headline_gate.lineages is a registered family (a misspelt one silently becomes its own lineage).")
def headline_gate_lineages_known(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    from atlas_assets.publish.config import load_publish_config

    named = set(load_publish_config()["headline_gate"]["lineages"])
    known = set(_table(duckdb, "SELECT DISTINCT family FROM registry_benchmarks")["family"])
    unknown = sorted(named - known)
    return dg.AssetCheckResult(passed=not unknown, severity=dg.AssetCheckSeverity.WARN,
                               metadata={"unknown_families": dg.MetadataValue.json(unknown)})
