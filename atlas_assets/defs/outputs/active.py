"""The active panel (issue 12): asset `active_panel` and its check.

Per family of the latest publishable fit: its newest result date (a result's own date, else its model's
release date), whether it is active (a result within outputs.yaml `result_dates.window_days` of the snapshot's
newest result: the dating rule and window family_quality's live pool shares, outputs/sql/result_dates.sql) and why
(atlas_assets/outputs/active_panel.py, outputs/sql/active_panel.sql). The validation
folds `active_panel` and `forward_active` read the active families from this table.
"""


import dagster as dg
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.refresh import asset_refresh
from atlas_assets.defs.outputs.assets import _md, _stamp, publishable_inputs
from atlas_assets.storage import replace_rows


@dg.asset(
    deps=["capability_scores"],
    pool="duckdb",
    kinds={"duckdb", "sql"},
    description="Per benchmark family: its newest result date (own evaluation date, else the model's release), "
    "whether it is in the active panel (a result within the configured window of the snapshot's newest result) "
    "and why.",
)
def active_panel(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> dg.MaterializeResult:
    from atlas_assets.outputs.active_panel import active_panel as compute
    from atlas_assets.outputs.result_dates import window_days

    refresh = asset_refresh(context, "publication", reads_fit=True, also=('modeled_observations', 'raw_scores',))
    if reused := refresh.reuse_tables(duckdb, 'active_panel', 'modeled_observations', 'raw_scores'):
        return reused
    fit_dir, loaded, _draws, cfg, _eligible = publishable_inputs(context)
    window = window_days(cfg)
    with duckdb.get_connection() as conn:
        table = compute(conn, window)
        fit_families = set(loaded.stan_input.families["family"])
        table = _stamp(table[table["family"].isin(fit_families)].reset_index(drop=True), fit_dir)
        missing = sorted(fit_families - set(table["family"]))
        if missing:
            raise dg.Failure(description=f"families of fit {fit_dir.name} without a row in modeled_observations: "
                             f"{missing} (the DuckDB tables are of another run)")
        replace_rows(conn, "active_panel", table, create=True)
    return refresh.computed({
        "fit_dir": dg.MetadataValue.path(str(fit_dir)),
        "as_of": str(table["as_of"].iloc[0]) if len(table) else "none",
        "window_days": window,
        "active_families": int(table["active"].sum()),
        "inactive_families": int((~table["active"]).sum()),
        "inactive": _md(table[~table["active"]][["family", "n_obs", "last_result_on", "reason"]], 40),
    })


@dg.asset_check(asset=active_panel, blocking=True,
                description="Every family of the fit has one row, from one fit, and the panel is not empty.")
def active_panel_complete(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        families, fits, active = conn.execute(
            "SELECT count(DISTINCT family), count(DISTINCT fit), count(*) FILTER (WHERE active) FROM active_panel").fetchone()
        rows = conn.execute("SELECT count(*) FROM active_panel").fetchone()[0]
    return dg.AssetCheckResult(passed=bool(rows == families and fits == 1 and active > 0),
                               metadata={"families": int(families), "rows": int(rows), "fits": int(fits),
                                         "active": int(active)})
