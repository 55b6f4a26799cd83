"""Benchmark quality and comparability (seed 002, issue 12), downstream of the fit (group `outputs`).

`family_quality` measures each fitted family's headroom, discrimination, contamination resistance and size
from its live pool and sets the reliability grade beside them (`family_quality_agreement`: how far the two
agree). `comparability_verdicts` gives seed 002's verdict for the published leaderboard neighbours. Both
read the modeled observations from DuckDB only after checking they are the fit's own data (the fit's
data_sha256), and carry `fit` like every output. Logic: atlas_assets/outputs/family_quality.py and
comparability.py; rows: atlas_assets/outputs/sql/observation_rows.sql; settings: outputs.yaml.
"""

from pathlib import Path

import dagster as dg
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.refresh import asset_refresh
from atlas_assets.defs.outputs.assets import _md, _stamp, publishable_fit_dir
from atlas_assets.storage import replace_rows, replace_tables

OBSERVATION_ROWS_SQL = Path(__file__).resolve().parents[2] / "outputs" / "sql" / "observation_rows.sql"


def observations_hash(conn) -> str:
    """The data hash of DuckDB's modeled_observations (compared with the fit's by `require_fit_data`)."""
    from atlas_assets.spec import frame_hash

    return frame_hash(conn.execute("SELECT * FROM modeled_observations").df(), ["model", "reasoning_state", "family"])


def read_observation_rows(conn) -> tuple[str, pd.DataFrame]:
    """(data hash of DuckDB's modeled_observations, observation_rows.sql over it)."""
    return observations_hash(conn), conn.execute(OBSERVATION_ROWS_SQL.read_text()).df()


def require_fit_data(found: str, fit_dir: Path) -> None:
    """Refuse unless DuckDB's modeled_observations is the data the fit saw. Called outside the connection block:
    DuckDBResource.get_connection leaves its connection open when the body raises."""
    from atlas_assets.publish.artifacts import fit_stamps

    expected = fit_stamps(fit_dir).data_sha256
    if found != expected:
        raise dg.Failure(description=f"modeled_observations (data {found[:16]}) is not the data of fit {fit_dir.name} "
                         f"({expected[:16]}): refit or restore the matching tables first")


@dg.asset(
    deps=["reliability_grades"],
    pool="duckdb",
    kinds={"duckdb", "python"},
    description="Per fitted family (seed 002): headroom (100 x (1 - median of the top-5 live scores)), discrimination "
    "(sd of the top-15 live scores), contamination resistance (registry: live / private / static) and size (declared "
    "items), each with its inputs and weight, quality = their product; the live pool = results dated within "
    "result_dates.window_days of the newest result (evaluation date, else release date: the active panel's rule), "
    "best state per model. Beside it the reliability grade (seed 003); family_quality_agreement: Spearman of each "
    "measure against reliability and a grade x quality-band cross-tab.",
)
def family_quality(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.outputs.config import load_outputs_config
    from atlas_assets.outputs.family_quality import agreement, family_quality as compute
    from atlas_assets.outputs.result_dates import result_dates, window_days

    refresh = asset_refresh(context, "publication", reads_fit=True, also=('modeled_observations', 'raw_scores', 'registry_benchmarks',))
    if reused := refresh.reuse_tables(duckdb, 'family_quality', 'family_quality_agreement', 'modeled_observations', 'raw_scores', 'registry_benchmarks'):
        return reused
    fit_dir = publishable_fit_dir(context)
    outputs_cfg = load_outputs_config()
    cfg = outputs_cfg["family_quality"]
    with duckdb.get_connection() as conn:
        found = observations_hash(conn)
        dated = result_dates(conn, window_days(outputs_cfg))
        registry = conn.execute("SELECT * FROM registry_benchmarks").df()
        grades = conn.execute("SELECT * FROM reliability_grades").df()
    require_fit_data(found, fit_dir)
    if set(grades["fit"].dropna()) != {fit_dir.name}:
        raise dg.Failure(description=f"reliability_grades is not of fit {fit_dir.name} (fit {sorted(set(grades['fit']))})")
    table = _stamp(compute(dated, registry, grades, cfg), fit_dir)
    agree = _stamp(agreement(table), fit_dir)
    with duckdb.get_connection() as conn:
        replace_tables(conn, {"family_quality": table, "family_quality_agreement": agree})
    rho = agree[(agree["statistic"] == "spearman_vs_reliability") & (agree["measure"] == "quality")].iloc[0]
    return refresh.computed({
        "fit_dir": dg.MetadataValue.path(str(fit_dir)),
        "families": len(table),
        "with_quality": int(table["quality"].notna().sum()),
        "snapshot_date": str(table["snapshot_date"].iloc[0]),
        "live_from": str(table["live_from"].iloc[0]),
        "spearman_quality_vs_reliability": float(rho["value"]),
        "spearman_families": int(rho["n_families"]),
        "rule": str(table["rule"].iloc[0]),
        "quality": _md(table.sort_values("quality", ascending=False)[
            ["family", "n_live_models", "headroom_points", "discrimination_points", "contamination", "items",
             "quality", "grade", "reliability_mean"]], 60),
    })


@dg.asset(
    deps=["capability_scores"],
    pool="duckdb",
    kinds={"duckdb", "python"},
    description="Seed 002's comparability verdict (not comparable / caveat / comparable as systems / comparable, "
    "with the rule and its reason) for the published pairs users compare most: adjacent eligible states of the "
    "state_scores leaderboard (one row per family both were observed on) and adjacent observed scores on each "
    "family's own leaderboard; from the observations' stored dimensions (metric, family, agent, Elo pool, dates, "
    "benchmark and harness versions, run settings, verification class).",
)
def comparability_verdicts(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.model.fit_process import read_table
    from atlas_assets.outputs.comparability import leaderboard_pairs, observations_from_rows, verdict_counts
    from atlas_assets.outputs.config import load_outputs_config

    refresh = asset_refresh(context, "publication", reads_fit=True, also=('modeled_observations', 'raw_scores', 'registry_benchmarks',))
    if reused := refresh.reuse_tables(duckdb, 'comparability_verdicts', 'modeled_observations', 'raw_scores', 'registry_benchmarks'):
        return reused
    fit_dir = publishable_fit_dir(context)
    cfg = load_outputs_config()["comparability"]
    with duckdb.get_connection() as conn:
        found, rows = read_observation_rows(conn)
    require_fit_data(found, fit_dir)
    try:
        observations = observations_from_rows(rows, cfg)
    except KeyError as unknown:
        raise dg.Failure(description=str(unknown.args[0])) from None
    states = read_table(fit_dir / "state_scores.parquet")
    cells = rows.drop_duplicates(["model", "reasoning_state", "family"])[["model", "reasoning_state", "family", "u"]]
    table = _stamp(leaderboard_pairs(states, observations, cells, cfg), fit_dir)
    with duckdb.get_connection() as conn:
        replace_rows(conn, "comparability_verdicts", table, create=True)
    counts = verdict_counts(table)
    return refresh.computed({
        "fit_dir": dg.MetadataValue.path(str(fit_dir)),
        "pairs": len(table),
        "overall_pairs": int((table["scope"] == "overall").sum()),
        "per_family_pairs": int((table["scope"] != "overall").sum()),
        "verdicts": _md(counts, 12),
    })
