"""Outputs of the capability fit, from the posterior draws (pure functions; Dagster wiring in atlas_assets.defs.outputs).

- `draws`: the posterior draws every output reads (thinned, with the display scale per draw)
- `cell_model`: expected score, noise variance and predictive draws of any (state, family) cell
- `difficulty`: difficulty with bound flags, saturation point, frontier expected score, discrimination
- `reliability`: reliability per family (scored states and every state), grades, R^2 on the logit scale
- `dimensionality`: mean squared residual correlation against posterior-predictive replicates
- `cell_predictions`: predictive summaries of unobserved cells, p-values of observed ones
"""
