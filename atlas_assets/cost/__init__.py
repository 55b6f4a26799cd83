"""The cost model (issue 11; seed 001): reported dollars per task -> relative cost per reasoning state.

    clean.run_cost_stage(conn, cfg)        sql/08_cost_observations.sql: raw_costs -> cost_observations
    data.build_cost_data(obs, cfg)         Stan data and index maps for stan/cost.stan
    fit.run_cost_fit(obs, out_dir, cfg)    NUTS through atlas_assets.model.engines, gates, fit folder
    outputs.cost_index / workload_usd / frontier   the published tables
    heldout.masked_run_cv(obs, cfg)        masked-run k-fold RMSE against the benchmark-mean baseline
"""
