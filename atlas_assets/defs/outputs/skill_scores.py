"""Skill scores per category (issue 12): asset `skill_scores` and the checks beside it.

Reads the latest publishable fit like every output (`publishable_inputs`), the registry's benchmark categories
(`registry_benchmarks`), and writes two tables in one transaction, stamped with the fit:
- `skill_scores`: every fitted state x category of the fitted families; published skill (display scale of
  state_scores, interval, deviation from the general capability) where the state has >= min_families families
  in the category, else status "not enough data: ..." without numbers;
- `skill_deviations`: per category the learned deviation sd tau_c and what chose it.
Logic: atlas_assets/outputs/skill_scores.py; settings: outputs.yaml `skill_scores`.
"""

import time

import dagster as dg
import duckdb as duckdb_module
import numpy as np
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.refresh import asset_refresh
from atlas_assets.defs.outputs.assets import _md, _stamp, publishable_inputs
from atlas_assets.defs.outputs.checks import _combine, _one_fit, _ordered, _table
from atlas_assets.quality.expectations import Expectation, validate_frame
from atlas_assets.storage import replace_tables


def registry_categories(duckdb: DuckDBResource) -> pd.DataFrame:
    """(family, role, category) of every registered benchmark, or dg.Failure when the registry is not built."""
    failure = None
    with duckdb.get_connection() as conn:
        try:
            return conn.execute("SELECT family, role, category FROM registry_benchmarks").df()
        except duckdb_module.Error as error:
            failure = error.__class__.__name__
    # raised outside the block: get_connection does not close its connection when the body raises
    raise dg.Failure(description=f"registry_benchmarks is not readable ({failure}): the categories of the families "
                     "come from it; materialize the registry first")


def family_membership(duckdb: DuckDBResource, families, also_in=None) -> pd.DataFrame:
    from atlas_assets.outputs.skill_scores import family_categories

    return family_categories(registry_categories(duckdb), families, also_in)


@dg.asset(
    deps=["capability_scores", "registry_benchmarks"],
    pool="duckdb",
    kinds={"duckdb", "python"},
    description="Skill score per state x category (seed 004 section 09): per posterior draw, the state's capability "
    "from that category's families, its prior the state's general capability from its other results widened by a "
    "learned category deviation (empirical Bayes per category); display scale of state_scores. Published where "
    "the state has >= skill_scores.min_families families in the category, else 'not enough data'. Tables "
    "skill_scores and skill_deviations.",
)
def skill_scores(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.outputs.skill_scores import PUBLISHED
    from atlas_assets.outputs.skill_scores import skill_scores as compute

    refresh = asset_refresh(context, "publication", reads_fit=True)
    if reused := refresh.reuse_tables(duckdb, 'skill_scores', 'skill_deviations', 'registry_benchmarks'):
        return reused
    fit_dir, loaded, draws, cfg, _ = publishable_inputs(context)
    scfg = cfg["skill_scores"]
    si = loaded.stan_input
    draws = draws.thin(int(scfg["max_draws"]))
    membership = family_membership(duckdb, si.families["family"], scfg.get("also_in"))
    started = time.perf_counter()
    table, taus = compute(draws, si.families, si.observations, si.states, membership, scfg,
                          float(cfg["draws"]["interval"]), int(cfg["draws"]["seed"]))
    taus = taus.merge(membership.groupby("category")["family"].agg(lambda f: ", ".join(sorted(f))).rename("families")
                      .reset_index(), on="category", how="left")
    with duckdb.get_connection() as conn:
        replace_tables(conn, {"skill_scores": _stamp(table, fit_dir), "skill_deviations": _stamp(taus, fit_dir)})
    published = table[table["status"] == PUBLISHED]
    return refresh.computed({
        "fit_dir": dg.MetadataValue.path(str(fit_dir)),
        "rows": len(table),
        "published": len(published),
        "states_with_a_skill": int(published["state_pos"].nunique()),
        "published_by_category": dg.MetadataValue.json(published["category"].value_counts().to_dict()),
        "draws_used": draws.n_draws,
        "seconds": round(time.perf_counter() - started, 1),
        "deviations": _md(taus[["category", "deviation_sd", "basis", "n_states"]], 30),
        "top": _md(published.sort_values("category_rank").groupby("category").head(3)[
            ["category", "model", "reasoning_state", "display_mean", "display_lower", "display_upper",
             "general_display_mean"]], 40),
    })


def skill_deviations_of(duckdb: DuckDBResource, fit: str) -> pd.DataFrame:
    """(category, deviation_sd) learned by `skill_scores` on fit `fit`, or dg.Failure naming what is missing: the
    skills of calibrated states use the fitted states' deviations (outputs/skill_scores.py)."""
    failure = None
    with duckdb.get_connection() as conn:
        try:
            taus = conn.execute("SELECT category, deviation_sd, fit FROM skill_deviations").df()
        except duckdb_module.Error as error:
            failure = f"skill_deviations is not readable ({error.__class__.__name__})"
    # raised outside the block: get_connection does not close its connection when the body raises
    if failure is None and set(taus["fit"].dropna()) != {fit}:
        failure = f"skill_deviations is of fit {sorted(set(taus['fit'].dropna()))}, not {fit}"
    if failure is not None:
        raise dg.Failure(description=f"{failure}: the calibrated states' skill scores use the deviation sd each "
                         "category learned on the fitted states; materialize skill_scores for this fit first")
    return taus.drop(columns="fit")


def skill_table_result(table: pd.DataFrame, n_states: int, suite_name: str, problems: list[str]
                       ) -> dg.AssetCheckResult:
    """What a published skill table promises, fitted or calibrated: every state x category once; a number exactly
    where the state has >= skill_scores.min_families families in the category, 'not enough data' and no number
    otherwise; n_families the count of the families listed; published summaries finite with ordered intervals.
    `problems`: the caller's own, reported with these."""
    from atlas_assets.outputs.config import load_outputs_config
    from atlas_assets.outputs.skill_scores import NOT_ENOUGH, PUBLISHED

    min_f = int(load_outputs_config()["skill_scores"]["min_families"])
    problems = list(problems)
    if table.duplicated(["model", "reasoning_state", "category"]).any():
        problems.append("duplicated state x category rows")
    if len(table) != n_states * table["category"].nunique():
        problems.append(f"{len(table)} rows for {n_states} states x {table['category'].nunique()} categories")
    listed = table["families"].fillna("").map(lambda f: len([x for x in f.split(", ") if x]))
    if (listed != table["n_families"]).any():
        problems.append("n_families disagrees with the families listed")
    published = table["status"] == PUBLISHED
    if (published != (table["n_families"] >= min_f)).any():
        problems.append(f"a skill is published exactly where the state has >= {min_f} families in the category")
    if not table.loc[~published, "status"].str.startswith(NOT_ENOUGH).all():
        problems.append(f"unpublished rows must say {NOT_ENOUGH!r}")
    numeric = ["display_mean", "display_median", "display_lower", "display_upper", "display_sd", "latent_mean"]
    if table.loc[~published, numeric].notna().any().any():
        problems.append("a number on a 'not enough data' row")
    if not np.isfinite(table.loc[published, numeric].to_numpy(dtype=float)).all():
        problems.append("non-finite summary on a published skill")
    result = validate_frame(table[published], [*_ordered("display_lower", "display_median", "display_upper"),
                                               Expectation("ExpectColumnValuesToBeBetween", column="display_sd",
                                                           min_value=0)],
                            suite_name=suite_name) if published.any() else dg.AssetCheckResult(passed=True)
    return _combine(result, problems, {"rows": len(table), "published": int(published.sum())})


@dg.asset_check(asset="skill_scores", blocking=True, description="Every fitted state x category exactly once; "
                "a number only where the state has >= min_families families in the category (status 'published'), "
                "'not enough data' and no number otherwise; n_families is the count of the listed families; "
                "published summaries finite with ordered intervals; a positive deviation sd for each category; one "
                "fit for both tables.")
def skill_scores_valid(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    table = _table(duckdb, "SELECT * FROM skill_scores")
    taus = _table(duckdb, "SELECT * FROM skill_deviations")
    n_states = int(_table(duckdb, "SELECT count(*) AS n FROM model_index_states")["n"].iloc[0])
    problems = _one_fit(pd.concat([table[["fit"]], taus[["fit"]]]))
    if set(table["category"]) - set(taus["category"]) or (taus["deviation_sd"] <= 0).any():
        problems.append("a category without a positive deviation sd")
    return skill_table_result(table, n_states, "skill_scores", problems)


@dg.asset_check(asset="skill_scores", description="Signal (WARN): no category's deviation sd sits at the top of its "
                "grid (outputs.yaml skill_scores.deviation_sd.grid): there the data want a wider deviation than the "
                "grid offers, and the skill is pulled toward the general capability more than they say.")
def skill_deviations_inside_their_grid(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    from atlas_assets.outputs.config import load_outputs_config

    top = max(load_outputs_config()["skill_scores"]["deviation_sd"]["grid"])
    taus = _table(duckdb, "SELECT category, deviation_sd, basis FROM skill_deviations")
    edge = taus[np.isclose(taus["deviation_sd"], top)]
    return dg.AssetCheckResult(passed=edge.empty, severity=dg.AssetCheckSeverity.WARN, metadata={
        "at_the_top": dg.MetadataValue.json(edge["category"].tolist()), "grid_top": float(top)})
