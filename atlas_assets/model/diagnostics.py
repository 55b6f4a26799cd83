"""Convergence diagnostics that gate publication (via ArviZ).

`fit_diagnostics(idata, thresholds)` returns a JSON-able dict: max R-hat and
min bulk / tail ESS over capability (theta, phi), discrimination (beta) and
difficulty (b); divergences; E-BFMI per chain; tree-depth saturation; the
worst parameters; and `passes` against the configured thresholds
(R-hat <= 1.01, bulk and tail ESS >= 400, 0 divergences, E-BFMI >= 0.3).
R-hat is the rank-normalised split R-hat, ESS the bulk/tail ESS of
Vehtari et al. (2021), both as computed by arviz.rhat / arviz.ess.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

GATED_VARS = ("theta", "phi", "beta", "b")
DEFAULT_THRESHOLDS = {
    "rhat_max": 1.01,
    "ess_bulk_min": 400,
    "ess_tail_min": 400,
    "divergences_max": 0,
    "ebfmi_min": 0.3,
}


def _flatten(ds, var_names) -> dict[str, float]:
    out: dict[str, float] = {}
    for name in var_names:
        if name not in ds:
            continue
        da = ds[name]
        if da.ndim == 0:
            out[name] = float(da.values)
            continue
        stacked = da.stack(_i=da.dims) if da.ndim > 1 else da
        labels = [str(v) for v in stacked[stacked.dims[0]].values]
        for lab, val in zip(labels, np.atleast_1d(stacked.values)):
            out[f"{name}[{lab}]"] = float(val)
    return out


def fit_diagnostics(
    idata,
    thresholds: Mapping[str, Any] | None = None,
    var_names=GATED_VARS,
    max_treedepth: int | None = None,
) -> dict:
    import arviz as az

    th = dict(DEFAULT_THRESHOLDS)
    th.update({k: v for k, v in (thresholds or {}).items() if k in DEFAULT_THRESHOLDS})
    post = idata.posterior
    names = [v for v in var_names if v in post]
    rhat = _flatten(az.rhat(post, var_names=names), names)
    bulk = _flatten(az.ess(post, var_names=names, method="bulk"), names)
    tail = _flatten(az.ess(post, var_names=names, method="tail"), names)
    rhat = {k: v for k, v in rhat.items() if np.isfinite(v)}
    bulk = {k: v for k, v in bulk.items() if np.isfinite(v)}
    tail = {k: v for k, v in tail.items() if np.isfinite(v)}

    ss = idata.sample_stats
    diverging = ss["diverging"].values.astype(bool)
    n_div = int(diverging.sum())
    try:
        ebfmi = [float(x) for x in np.atleast_1d(az.bfmi(idata))]
    except Exception:
        ebfmi = []
    depth = ss["tree_depth"].values if "tree_depth" in ss else None
    n_steps = ss["n_steps"].values if "n_steps" in ss else None
    step = ss["step_size"].values if "step_size" in ss else None

    out: dict[str, Any] = {
        "n_chains": int(post.sizes["chain"]),
        "n_draws": int(post.sizes["draw"]),
        "gated_variables": names,
        "max_rhat": max(rhat.values()) if rhat else None,
        "min_ess_bulk": min(bulk.values()) if bulk else None,
        "min_ess_tail": min(tail.values()) if tail else None,
        "worst_rhat": _worst(rhat, reverse=True),
        "worst_ess_bulk": _worst(bulk),
        "worst_ess_tail": _worst(tail),
        "divergences": n_div,
        "divergences_per_chain": diverging.sum(axis=1).astype(int).tolist(),
        "ebfmi_per_chain": ebfmi,
        "min_ebfmi": min(ebfmi) if ebfmi else None,
        "mean_tree_depth": float(depth.mean()) if depth is not None else None,
        "max_tree_depth": int(depth.max()) if depth is not None else None,
        "treedepth_hits": int((depth >= max_treedepth).sum()) if (depth is not None and max_treedepth) else None,
        "mean_leapfrog_per_draw": float(n_steps.mean()) if n_steps is not None else None,
        "step_size_per_chain": [float(x) for x in step[:, -1]] if step is not None else [],
        "thresholds": th,
    }
    checks = {
        "rhat": out["max_rhat"] is not None and out["max_rhat"] <= th["rhat_max"],
        "ess_bulk": out["min_ess_bulk"] is not None and out["min_ess_bulk"] >= th["ess_bulk_min"],
        "ess_tail": out["min_ess_tail"] is not None and out["min_ess_tail"] >= th["ess_tail_min"],
        "divergences": n_div <= th["divergences_max"],
        "ebfmi": bool(ebfmi) and min(ebfmi) >= th["ebfmi_min"],
    }
    out["checks"] = checks
    out["passes"] = bool(all(checks.values()))
    return out


def _worst(values: dict[str, float], reverse: bool = False, n: int = 5) -> list[list]:
    items = sorted(values.items(), key=lambda kv: kv[1], reverse=reverse)[:n]
    return [[k, round(v, 4)] for k, v in items]
