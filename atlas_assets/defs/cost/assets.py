"""Cost (issue 11, group `cost`): cleaned cost observations, the cost fit (stan/cost.stan, in a Pipes subprocess),
the cost index per reasoning state with workload dollars, and the capability-vs-cost frontier.

Same rules as the capability fit: the fit folder is named by the cost data and the cost specification
(spec.py scope "cost", which never moves the capability fit's fingerprint), an unchanged one is reused, only a
fit that passed every convergence gate takes its final name (a failing one stays as `<name>.failed`), and the
publishing assets (`cost_index`, `cost_frontier`) re-read the gates and the specification of the fit they would
publish and refuse, naming the gate. Logic: atlas_assets/cost/; settings: config/cost.yaml.
"""


import json
from pathlib import Path

import dagster as dg
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets import settings
from atlas_assets.defs.fit_folders import fit_in_subprocess
from atlas_assets.spec import frame_hash, manifest_fingerprint, specification_manifest
from atlas_assets.storage import replace_tables


def cost_dir() -> Path:
    return settings.atlas_home() / "model"


def _md(frame: pd.DataFrame, rows: int = 25) -> dg.MetadataValue:
    return dg.MetadataValue.md(frame.head(rows).to_markdown(index=False, floatfmt=".3g"))


@dg.multi_asset(
    name="clean_cost_observations",
    specs=[
        dg.AssetSpec("cost_observations", deps=["raw_costs", "registry_model_ids", "registry_benchmarks"],
                     kinds={"duckdb", "sql"}, metadata={"sql_file": "sql/08_cost_observations.sql", "grain": "row_key"},
                     description="Reported costs the cost model fits (sql/08_cost_observations.sql): each mapped to "
                     "the canonical model and reasoning state its score gets, with evaluator, harness flag, log10 "
                     "dollars per task and a run weight (rows reporting one run weighted 1/rows)."),
        dg.AssetSpec("audit_cost_exclusions", deps=["raw_costs", "registry_model_ids", "registry_benchmarks"],
                     kinds={"duckdb", "sql"},
                     description="Every raw_costs row the cost stage dropped, with the rule (reason) that dropped it."),
    ],
    pool="duckdb",
    can_subset=False,
)
def clean_cost_observations(context, duckdb: DuckDBResource):
    from atlas_assets.cost.clean import run_cost_stage
    from atlas_assets.cost.config import load_cost_config

    cfg = load_cost_config()
    with duckdb.get_connection() as conn:
        counts = run_cost_stage(conn, cfg)
        observations = conn.execute("SELECT * FROM cost_observations").df()
    data_hash = frame_hash(observations, ["row_key"])
    manifest = specification_manifest(scope="cost")
    spec_hash = manifest_fingerprint(manifest)
    folder = cost_dir() / "cost_inputs" / f"{data_hash[:16]}-{spec_hash[:16]}"
    folder.mkdir(parents=True, exist_ok=True)
    observations.to_csv(folder / "cost_observations.csv", index=False)
    (folder / "specification.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
    (folder / "fingerprint.json").write_text(json.dumps({"data_sha256": data_hash, "spec_sha256": spec_hash}))
    context.log.info(f"cost_observations: {counts.as_dict()}")
    yield dg.MaterializeResult(asset_key="cost_observations", metadata={
        "dagster/row_count": counts.rows_kept,
        "conservation": f"{counts.rows_in} = {counts.rows_kept} kept + {counts.rows_excluded} excluded"
        + ("" if counts.conserved else "  (VIOLATED)"),
        "excluded_by_reason": dg.MetadataValue.json(counts.excluded_by_reason),
        "rows_per_source_file": dg.MetadataValue.json(counts.rows_per_source),
        "runs": counts.runs, "states": counts.states, "models": counts.models, "benchmarks": counts.benchmarks,
        "harnessed_rows": counts.harnessed_rows,
        "data_sha256": data_hash, "spec_sha256": spec_hash,
        "observations_path": dg.MetadataValue.path(str(folder / "cost_observations.csv")),
    })
    yield dg.MaterializeResult(asset_key="audit_cost_exclusions", metadata={"dagster/row_count": counts.rows_excluded})


class CostFitConfig(dg.Config):
    """Sampler settings for one run; empty fields take config/cost.yaml's."""

    chains: int | None = None
    warmup: int | None = None
    draws: int | None = None
    seed: int | None = None
    engine: str | None = None
    force_refit: bool = False


def _latest(context, key: str) -> dict:
    event = context.instance.get_latest_materialization_event(dg.AssetKey(key))
    if event is None or event.asset_materialization is None:
        raise dg.Failure(description=f"{key} has not been materialized")
    return event.asset_materialization.metadata


@dg.asset(
    deps=["cost_observations"],
    kinds={"stan", "python"},
    description="Posterior of stan/cost.stan by NUTS (CmdStanPy where CmdStan exists, else PyStan) in a Pipes subprocess, "
    "gated like the capability fit (R-hat, bulk/tail ESS, divergences, E-BFMI); under var/model/cost_fits/<fingerprint>/.",
)
def cost_fit(context: dg.AssetExecutionContext, config: CostFitConfig,
             pipes_subprocess_client: dg.PipesSubprocessClient) -> dg.MaterializeResult:
    from atlas_assets.cost.config import load_cost_config
    from atlas_assets.cost.data import CostDataError, build_cost_data

    metadata = _latest(context, "cost_observations")
    observations_path = Path(metadata["observations_path"].value)
    fingerprint = {"data_sha256": metadata["data_sha256"].value, "spec_sha256": metadata["spec_sha256"].value}
    chosen = {k: getattr(config, k) for k in ("chains", "warmup", "draws", "seed", "engine") if getattr(config, k) is not None}
    cfg = load_cost_config(overrides={"sampler": chosen} if chosen else None)
    try:  # a missing reference state or an unknown setting fails now, not after sampling
        build_cost_data(pd.read_csv(observations_path), cfg)
    except CostDataError as error:
        raise dg.Failure(description=f"cost data cannot be fitted: {error}") from None
    smp = cfg["sampler"]
    name = (f"{fingerprint['data_sha256'][:16]}-{fingerprint['spec_sha256'][:16]}-"
            f"c{smp['chains']}w{smp['warmup']}d{smp['draws']}s{smp['seed']}")
    final = cost_dir() / "cost_fits" / name
    common = {"fit_dir": dg.MetadataValue.path(str(final)), **fingerprint}
    if (final / "fit_summary.json").exists() and not config.force_refit:
        summary = json.loads((final / "fit_summary.json").read_text())
        context.log.info(f"cost data and specification unchanged: reusing the cost fit in {final}")
        return dg.MaterializeResult(metadata={**common, "reused": True, "engine": summary["engine"], "passes": summary["passes"]})
    result, destination, summary = fit_in_subprocess(
        context, pipes_subprocess_client, module="atlas_assets.cost.fit", observations_path=observations_path,
        final=final, fingerprint=fingerprint, specification=(observations_path.parent / "specification.json").read_text(),
        options=chosen, what="cost fit")
    return dg.MaterializeResult(metadata={**result.metadata, **common, "fit_dir": dg.MetadataValue.path(str(destination)),
                                          "out_dir": str(destination), "reused": False, "engine": summary["engine"],
                                          "passes": summary["passes"]})


def publishable_cost_fit_dir(context) -> Path:
    """The latest cost fit, or dg.Failure naming why it may not be published (a gate, or another cost specification)."""
    from atlas_assets.cost.fit import UnpublishableCostFit, require_publishable_cost_fit
    from atlas_assets.spec import specification_fingerprint

    fit_dir = Path(_latest(context, "cost_fit")["fit_dir"].value)
    try:
        require_publishable_cost_fit(fit_dir, specification_fingerprint(scope="cost"))
    except UnpublishableCostFit as refusal:
        raise dg.Failure(description=str(refusal)) from None
    return fit_dir


def _cost_draws(fit_dir: Path):
    from atlas_assets.cost.fit import load_cost_fit
    from atlas_assets.model.scores import draws_of
    from atlas_assets.outputs.draws import thin_index

    loaded = load_cost_fit(fit_dir)
    keep = thin_index(draws_of(loaded.idata, "state_cost").shape[0], int(loaded.config["outputs"]["max_draws"]))
    return loaded, {name: draws_of(loaded.idata, name)[keep] for name in ("state_cost", "bench_ref", "lambda")}


@dg.asset(
    deps=["cost_fit"],
    pool="duckdb",
    kinds={"duckdb", "python"},
    description="Relative cost per reasoning state: 10 ^ state_cost, x GPT-5 high's cost (median, 90% interval, "
    "P(cheaper than GPT-5 high)), and typical US dollars per task on a short-answer and an agentic workload "
    "(config/cost.yaml outputs.workloads; no harness offset). Only from a cost fit that passed its gates.",
)
def cost_index(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.cost.outputs import cost_index_table

    fit_dir = publishable_cost_fit_dir(context)
    loaded, draws = _cost_draws(fit_dir)
    table, workloads = cost_index_table(loaded.cost_input, draws["state_cost"], draws["bench_ref"], draws["lambda"],
                                        loaded.config)
    table["cost_fit"] = fit_dir.name
    with duckdb.get_connection() as conn:
        replace_tables(conn, {"cost_index": table})
    shown = ["model", "reasoning_state", "cost_index_median", "cost_index_lower", "cost_index_upper", "n_runs",
             *[f"usd_{w}_median" for w in workloads]]
    return dg.MaterializeResult(metadata={
        "dagster/row_count": len(table), "cost_fit": fit_dir.name, "workloads": dg.MetadataValue.json(workloads),
        "cheapest": _md(table[shown], 15), "dearest": _md(table[shown].iloc[::-1], 15),
    })


@dg.asset(
    deps=["cost_index", "capability_scores"],
    pool="duckdb",
    kinds={"duckdb", "python"},
    description="Capability vs cost: the states both fits know (rank-eligible in the capability fit), whether each is "
    "Pareto-optimal on the posterior medians, and P(on the frontier) from paired draws of the capability fit and the "
    "cost fit (independent posteriors). Only from publishable fits; stamped with both.",
)
def cost_frontier(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.cost.outputs import frontier_table
    from atlas_assets.defs.outputs.assets import publishable_inputs

    fit_dir, loaded, draws, _cfg, eligible = publishable_inputs(context)
    cost_fit_dir = publishable_cost_fit_dir(context)
    cost_loaded, cost = _cost_draws(cost_fit_dir)
    states = loaded.stan_input.states
    capability_states = pd.DataFrame({"model": states.model.to_numpy(), "reasoning_state": states.reasoning_state.to_numpy(),
                                      "cap_pos": states.state_pos.to_numpy()})[eligible]
    table = frontier_table(capability_states, draws.display(draws.phi), cost_loaded.cost_input, cost["state_cost"],
                           cost_loaded.config)
    table["fit"], table["cost_fit"] = fit_dir.name, cost_fit_dir.name
    with duckdb.get_connection() as conn:
        replace_tables(conn, {"cost_frontier": table})
    optimal = table[table.pareto_optimal].sort_values("capability_median", ascending=False)
    return dg.MaterializeResult(metadata={
        "dagster/row_count": len(table), "fit": fit_dir.name, "cost_fit": cost_fit_dir.name,
        "pareto_optimal": int(table.pareto_optimal.sum()),
        "frontier": _md(optimal[["model", "reasoning_state", "capability_median", "cost_index_median", "p_frontier"]], 30),
    })
