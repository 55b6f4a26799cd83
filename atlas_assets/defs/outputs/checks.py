"""Checks beside the outputs: blocking where a wrong number would be published, WARN for plausibility signals."""


import dagster as dg
import numpy as np
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets.outputs.config import load_outputs_config
from atlas_assets.quality.expectations import Expectation, validate_frame


def _table(duckdb: DuckDBResource, sql: str) -> pd.DataFrame:
    with duckdb.get_connection() as conn:
        return conn.execute(sql).df()


def _ordered(lower: str, middle: str, upper: str) -> list[Expectation]:
    return [Expectation("ExpectColumnPairValuesAToBeGreaterThanB", column_A=middle, column_B=lower, or_equal=True),
            Expectation("ExpectColumnPairValuesAToBeGreaterThanB", column_A=upper, column_B=middle, or_equal=True)]


def _combine(result: dg.AssetCheckResult, problems: list[str], extra: dict | None = None) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=bool(result.passed and not problems), severity=result.severity,
                               metadata={**result.metadata, "problems": dg.MetadataValue.json(problems[:30]),
                                         **(extra or {})})


def _one_fit(frame: pd.DataFrame) -> list[str]:
    fits = sorted(frame["fit"].dropna().unique()) if "fit" in frame else []
    return [] if len(fits) == 1 else [f"rows from {len(fits)} fits: {fits}"]


# ------------------------------------------------------------------------------------------ difficulty


@dg.asset_check(asset="difficulty_bounds", blocking=True, description="One row per fitted family; difficulty, "
                "discrimination and saturation finite with ordered intervals; discrimination > 0; the saturation "
                "point lies past the difficulty; the frontier expected score within [floor, 1]; every bound flag "
                "follows the stated rule (median outside the evaluated percentile range).")
def difficulty_bounds_valid(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    table = _table(duckdb, "SELECT * FROM difficulty_bounds")
    families = _table(duckdb, "SELECT family FROM model_index_families")
    problems = _one_fit(table)
    if sorted(table["family"]) != sorted(families["family"]):
        problems.append(f"{len(table)} rows for {len(families)} fitted families")
    expected = np.where(table["difficulty_median"] > table["evaluated_high"], "≳",
                        np.where(table["difficulty_median"] < table["evaluated_low"], "≲", ""))
    wrong = table.loc[expected != table["bound"].fillna(""), "family"].tolist()
    if wrong:
        problems.append(f"bound flag disagrees with the rule: {wrong}")
    bounded = table[table["kind"] == "bounded"]
    if (bounded["saturation_mean"] <= bounded["difficulty_mean"]).any() or bounded["saturation_mean"].isna().any():
        problems.append("saturation point missing or not past the difficulty")
    numeric = ["difficulty_mean", "difficulty_lower", "difficulty_upper", "discrimination_mean", "frontier_expected_mean"]
    if not np.isfinite(table[numeric].to_numpy(dtype=float)).all():
        problems.append("non-finite difficulty, discrimination or frontier score")
    result = validate_frame(
        table,
        [Expectation("ExpectTableRowCountToBeBetween", min_value=1),
         Expectation("ExpectColumnValuesToBeUnique", column="family"),
         *_ordered("difficulty_lower", "difficulty_median", "difficulty_upper"),
         *_ordered("discrimination_lower", "discrimination_mean", "discrimination_upper"),
         Expectation("ExpectColumnValuesToBeBetween", column="discrimination_lower", min_value=0, strict_min=True),
         Expectation("ExpectColumnValuesToBeInSet", column="bound", value_set=["≳", "≲"])],
        suite_name="difficulty_bounds",
    )
    fx = bounded["frontier_expected_mean"]
    if ((fx < bounded["floor"] - 1e-9) | (fx > 1 + 1e-9)).any():
        problems.append("frontier expected score outside [floor, 1]")
    return _combine(result, problems, {"flagged": int(table["bound"].notna().sum())})


@dg.asset_check(asset="difficulty_bounds", description="Plausibility (WARN): a family flagged ≳ has few observed "
                "scores past its midpoint (<= 25%), one flagged ≲ has most (>= 75%).")
def difficulty_bounds_agree_with_scores(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    table = _table(duckdb, "SELECT family, bound, share_observed_past_midpoint FROM difficulty_bounds")
    odd = table[((table["bound"] == "≳") & (table["share_observed_past_midpoint"] > 0.25))
                | ((table["bound"] == "≲") & (table["share_observed_past_midpoint"] < 0.75))]
    return dg.AssetCheckResult(passed=odd.empty, severity=dg.AssetCheckSeverity.WARN,
                               metadata={"disagreeing": dg.MetadataValue.md(odd.to_markdown(index=False)) if len(odd) else "none"})


# ------------------------------------------------------------------------------------------ reliability


@dg.asset_check(asset="reliability_grades", blocking=True, description="One row per fitted family; reliabilities in "
                "[0, 1] with ordered intervals; every grade recomputed from its stored probabilities, the model count "
                "and config/outputs.yaml (thresholds, probability, min_models) equals the published one.")
def reliability_grades_valid(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    from atlas_assets.outputs.reliability import GRADES, grade

    cfg = load_outputs_config()["reliability"]
    table = _table(duckdb, "SELECT * FROM reliability_grades")
    families = _table(duckdb, "SELECT family FROM model_index_families")
    problems = _one_fit(table)
    if sorted(table["family"]) != sorted(families["family"]):
        problems.append(f"{len(table)} rows for {len(families)} fitted families")
    regraded = [grade({g: row[f"p_at_least_{g}"] for g in GRADES}, float(cfg["probability"]), int(row["n_models"]),
                      int(cfg["min_models"])) for _, row in table.iterrows()]
    wrong = table.loc[[(r or "") != (g if isinstance(g, str) else "") for r, g in zip(regraded, table["grade"])], "family"]
    if len(wrong):
        problems.append(f"grade disagrees with its rule: {wrong.tolist()}")
    probs = table[[f"p_at_least_{g}" for g in GRADES]].to_numpy(dtype=float)
    if (np.diff(probs, axis=1) < -1e-12).any():
        problems.append("P(reliability >= threshold) must not fall as the threshold falls")
    result = validate_frame(
        table,
        [Expectation("ExpectTableRowCountToBeBetween", min_value=1),
         Expectation("ExpectColumnValuesToBeUnique", column="family"),
         *[Expectation("ExpectColumnValuesToBeBetween", column=c, min_value=0, max_value=1)
           for c in ("reliability_lower", "reliability_upper", "reliability_all_lower", "reliability_all_upper")],
         *_ordered("reliability_lower", "reliability_median", "reliability_upper"),
         Expectation("ExpectColumnValuesToBeInSet", column="grade", value_set=["A", "B", "C", "D"])],
        suite_name="reliability_grades",
    )
    counts = table["grade"].fillna("ungraded").value_counts().to_dict()
    return _combine(result, problems, {"grades": dg.MetadataValue.json({k: int(v) for k, v in counts.items()})})


@dg.asset_check(asset="reliability_grades", description="Plausibility (WARN): capability explains a positive share "
                "of every graded family's scores (R^2 on the logit scale > 0).")
def reliability_r2_positive(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    table = _table(duckdb, "SELECT family, grade, r2_logit FROM reliability_grades")
    bad = table[table["grade"].notna() & ~(table["r2_logit"] > 0)]
    return dg.AssetCheckResult(passed=bad.empty, severity=dg.AssetCheckSeverity.WARN,
                               metadata={"families_without_positive_r2": dg.MetadataValue.json(bad["family"].tolist()),
                                         "median_r2_logit": float(table["r2_logit"].median())})


# ------------------------------------------------------------------------------------------ dimensionality


@dg.asset_check(asset="dimensionality_test", blocking=True, description="The test is computed as stated: at least "
                "dimensionality.min_replicates replicate tables, at least one family pair, every pair sharing >= "
                "min_shared_states states, statistics in [0, 1], a tail probability in [0, 1].")
def dimensionality_test_valid(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    cfg = load_outputs_config()["dimensionality"]
    summary = _table(duckdb, "SELECT * FROM dimensionality_test")
    pairs = _table(duckdb, "SELECT * FROM dimensionality_pairs")
    problems = _one_fit(summary)
    if len(summary) != 1:
        return dg.AssetCheckResult(passed=False, metadata={"problems": f"{len(summary)} summary rows"})
    row = summary.iloc[0]
    if row["n_replicates"] < int(cfg["min_replicates"]):
        problems.append(f"{int(row['n_replicates'])} replicate tables < {cfg['min_replicates']} (the fit has too few draws)")
    if row["n_pairs"] < 1 or len(pairs) != row["n_pairs"]:
        problems.append(f"{int(row['n_pairs'])} pairs in the summary, {len(pairs)} in the pair table")
    if (pairs["n_shared_states"] < int(cfg["min_shared_states"])).any():
        problems.append("a pair shares fewer states than the rule allows")
    for name in ("statistic", "replicate_mean", "tail_probability"):
        if not 0 <= float(row[name]) <= 1:
            problems.append(f"{name} = {row[name]} outside [0, 1]")
    if set(pairs["fit"]) != set(summary["fit"]):
        problems.append("pair table and summary come from different fits")
    return dg.AssetCheckResult(passed=not problems, metadata={
        "problems": dg.MetadataValue.json(problems), "replicates": int(row["n_replicates"]), "pairs": int(row["n_pairs"]),
        "statistic": float(row["statistic"]), "tail_probability": float(row["tail_probability"])})


@dg.asset_check(asset="dimensionality_test", description="Signal (WARN): the residual correlation is within what one "
                "capability produces (tail probability >= 0.01). Seed 003 found it is not on its panel: structure "
                "beyond one number (a limitation to report, not an error).")
def one_capability_explains_residual_correlation(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    row = _table(duckdb, "SELECT * FROM dimensionality_test").iloc[0]
    return dg.AssetCheckResult(passed=bool(row["tail_probability"] >= 0.01), severity=dg.AssetCheckSeverity.WARN,
                               metadata={"tail_probability": float(row["tail_probability"]), "ratio": float(row["ratio"]),
                                         "top_pairs": str(row["top_pairs"])})


# ------------------------------------------------------------------------------------------ cell predictions


@dg.asset_check(asset="cell_predictions", blocking=True, description="Every rank-eligible state x family cell appears "
                "exactly once and every observation once (with a p-value in [0, 1]); predictions are finite; the "
                "intervals are nested (90% around 50% around the median); bounded predictions lie in [0, 1].")
def cell_predictions_complete(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    table = _table(duckdb, "SELECT * FROM cell_predictions")
    n_obs = int(_table(duckdb, "SELECT sum(n_obs) AS n FROM model_index_families")["n"].iloc[0])
    kinds = _table(duckdb, "SELECT family, kind FROM model_index_families")
    problems = _one_fit(table)
    if table.duplicated(["model", "reasoning_state", "family"]).any():
        problems.append("duplicated cells")
    eligible_states = table.loc[table["eligible"], ["model", "reasoning_state"]].drop_duplicates()
    per_family = table[table["eligible"]].groupby("family").size()
    if len(per_family) != len(kinds) or (per_family != len(eligible_states)).any():
        problems.append(f"not every eligible state x family cell is present ({len(eligible_states)} eligible states, "
                        f"{len(kinds)} families, {int(table['eligible'].sum())} eligible cells)")
    if int(table["observed"].sum()) != n_obs:
        problems.append(f"{int(table['observed'].sum())} observed cells for {n_obs} observations")
    obs = table[table["observed"]]
    if not obs["ppp"].between(0, 1).all():
        problems.append("observed cell without a p-value in [0, 1]")
    bounded = table[table["family"].isin(kinds.loc[kinds["kind"] == "bounded", "family"])]
    if not (bounded["lower_90"].ge(0) & bounded["upper_90"].le(1)).all():
        problems.append("bounded prediction outside [0, 1]")
    if not np.isfinite(table[["pred_mean", "pred_median", "lower_90", "upper_90"]].to_numpy(dtype=float)).all():
        problems.append("non-finite prediction")
    result = validate_frame(
        table,
        [Expectation("ExpectTableRowCountToBeBetween", min_value=1),
         *_ordered("lower_90", "lower_50", "upper_50"), *_ordered("lower_50", "pred_median", "upper_50"),
         Expectation("ExpectColumnPairValuesAToBeGreaterThanB", column_A="upper_90", column_B="upper_50", or_equal=True)],
        suite_name="cell_predictions",
    )
    return _combine(result, problems, {"cells": len(table), "predicted": int((~table["observed"]).sum())})


@dg.asset_check(asset="cell_predictions", description="Calibration signal (WARN): the share of observed cells whose "
                "p-value lies outside [ppp_tail, 1 - ppp_tail] (config cell_predictions) is at most max_extreme_share "
                "(nominal 2 x ppp_tail).")
def cell_predictions_calibrated(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    cfg = load_outputs_config()["cell_predictions"]
    ppp = _table(duckdb, "SELECT ppp FROM cell_predictions WHERE observed")["ppp"]
    tail = float(cfg["ppp_tail"])
    share = float(((ppp < tail) | (ppp > 1 - tail)).mean()) if len(ppp) else float("nan")
    return dg.AssetCheckResult(passed=bool(share <= float(cfg["max_extreme_share"])), severity=dg.AssetCheckSeverity.WARN,
                               metadata={"extreme_share": share, "nominal": 2 * tail, "observed_cells": len(ppp)})
