"""Checks beside family_quality and comparability_verdicts: blocking where a wrong number or verdict would be published."""

import dagster as dg
import numpy as np
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets.outputs.comparability import RULES
from atlas_assets.outputs.config import load_outputs_config


def _read(duckdb: DuckDBResource, sql: str) -> pd.DataFrame:
    with duckdb.get_connection() as conn:
        return conn.execute(sql).df()


def _result(problems: list[str], **metadata) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=not problems, metadata={"problems": dg.MetadataValue.json(problems[:30]),
                                                              **metadata})


def family_quality_problems(table: pd.DataFrame, families: list[str], cfg: dict) -> list[str]:
    problems = []
    if sorted(table["family"]) != sorted(families):
        problems.append(f"{len(table)} rows for {len(families)} fitted families")
    if table["fit"].nunique() != 1:
        problems.append(f"rows from {table['fit'].nunique()} fits")
    floors = {"headroom_weight": cfg["headroom_floor"], "discrimination_weight": cfg["discrimination_floor"],
              "contamination_weight": min(cfg["contamination_weights"].values()),
              "size_weight": min(w for _, w in cfg["size_weights"])}
    for column, floor in floors.items():
        values = table[column].dropna()
        if ((values < floor - 1e-12) | (values > 1 + 1e-12)).any():
            problems.append(f"{column} outside [{floor:g}, 1]")
    weights = table[list(floors)].to_numpy(dtype=float)
    complete = np.isfinite(weights).all(axis=1)
    product = np.where(complete, np.prod(np.where(complete[:, None], weights, 1.0), axis=1), np.nan)
    wrong = table.loc[~np.isclose(product, table["quality"].to_numpy(dtype=float), equal_nan=True), "family"].tolist()
    if wrong:
        problems.append(f"quality is not the product of the four weights (or present with a weight missing): {wrong}")
    live = table["n_live_models"] >= cfg["min_live_models"]
    bounded = table["kind"] == "bounded"
    unmeasured = table.loc[live & bounded & table["headroom_points"].isna(), "family"].tolist()
    if unmeasured:
        problems.append(f"families with a full live pool but no headroom measured: {unmeasured}")
    measured_thin = table.loc[~live & table["headroom_points"].notna(), "family"].tolist()
    if measured_thin:
        problems.append(f"headroom measured on fewer than {cfg['min_live_models']} live models: {measured_thin}")
    if ((table["headroom_points"] < 0) | (table["headroom_points"] > 100)).any():
        problems.append("headroom outside [0, 100] points")
    if (table["n_live_observations"] > table["n_observations"]).any():
        problems.append("more live observations than observations")
    return problems


@dg.asset_check(asset="family_quality", blocking=True, description="One row per fitted family, of one fit; every "
                "weight within [its floor, 1]; quality exactly the product of the four weights, and absent when one is "
                "missing; headroom and discrimination measured exactly where the live pool has enough models (bounded "
                "families); headroom within [0, 100] points; the agreement table holds the quality correlation.")
def family_quality_valid(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    table = _read(duckdb, "SELECT * FROM family_quality")
    agree = _read(duckdb, "SELECT * FROM family_quality_agreement")
    families = _read(duckdb, "SELECT family FROM model_index_families")["family"].tolist()
    problems = family_quality_problems(table, families, load_outputs_config()["family_quality"])
    if not ((agree["statistic"] == "spearman_vs_reliability") & (agree["measure"] == "quality")).any():
        problems.append("family_quality_agreement lacks the quality vs reliability correlation")
    if set(agree["fit"]) != set(table["fit"]):
        problems.append("family_quality_agreement is of another fit")
    return _result(problems, families=len(table), with_quality=int(table["quality"].notna().sum()))


def comparability_problems(table: pd.DataFrame, states: pd.DataFrame, cells: pd.DataFrame) -> list[str]:
    problems = []
    names = {rule: verdict for rule, (_, verdict) in RULES.items()}
    wrong = table[table["rule"].map(names) != table["verdict"]]
    if len(wrong):
        problems.append(f"{len(wrong)} rows whose verdict is not their rule's (first: rule {wrong['rule'].iloc[0]})")
    if table["reason"].isna().any() or (table["reason"].astype(str).str.len() == 0).any():
        problems.append("rows without a reason")
    n_eligible = int(states["eligible"].astype(bool).sum())
    overall = sorted(set(table.loc[table["scope"] == "overall", "rank_a"]))
    if overall != list(range(1, n_eligible)):
        problems.append(f"overall pairs cover {len(overall)} of the {max(n_eligible - 1, 0)} adjacent ranks")
    eligible = set(zip(states.loc[states["eligible"].astype(bool), "model"],
                       states.loc[states["eligible"].astype(bool), "reasoning_state"]))
    mine = cells[[k in eligible for k in zip(cells["model"], cells["reasoning_state"])]]
    expected = (mine.groupby("family").size() - 1).clip(lower=0)
    found = table[table["scope"] != "overall"].groupby("scope").size()
    found.index = found.index.str.removeprefix("family:")
    differ = sorted(f for f in expected.index if int(found.get(f, 0)) != int(expected[f]))
    if differ:
        problems.append(f"families whose leaderboard pairs are not all listed: {differ[:10]}")
    return problems


@dg.asset_check(asset="comparability_verdicts", blocking=True, description="Every row's verdict is its rule's "
                "(seed 002's table) and carries a reason; every adjacent rank of the eligible states has its overall "
                "rows; every family's leaderboard has all its adjacent pairs.")
def comparability_verdicts_valid(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    table = _read(duckdb, "SELECT * FROM comparability_verdicts")
    states = _read(duckdb, "SELECT model, reasoning_state, eligible FROM capability_state_scores")
    cells = _read(duckdb, "SELECT model, reasoning_state, family FROM modeled_observations")
    problems = comparability_problems(table, states, cells)
    return _result(problems, pairs=len(table),
                   verdicts=dg.MetadataValue.json(table["verdict"].value_counts().to_dict()))
