"""Convergence diagnostics that gate publication (via ArviZ).

`fit_diagnostics(idata, thresholds)` returns a JSON-able dict: max R-hat and
min bulk / tail ESS over capability (theta, phi), discrimination (beta) and
difficulty (b); divergences; E-BFMI per chain; tree-depth saturation; the
worst parameters; and `passes` against the configured thresholds
(R-hat <= 1.01, bulk and tail ESS >= 400, 0 divergences, E-BFMI >= 0.3).
R-hat is the rank-normalised split R-hat, ESS the bulk/tail ESS of
Vehtari et al. (2021), both as computed by arviz.rhat / arviz.ess.

A value that cannot be computed is a failure, never a gap: a non-finite R-hat
or ESS (a parameter stuck at one value, a chain that never moved) fails its
gate with the parameter named in `nonfinite`, and an E-BFMI that cannot be
computed fails the E-BFMI gate with the reason in `ebfmi_error`.
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
    # ArviZ reports a constant chain as ESS = n draws: a coordinate that never moved in some chain is a stuck
    # sampler and fails every mixing gate, like a non-finite value.
    stuck = _stuck(post, names)
    nonfinite = {
        gate: sorted({k for k, v in values.items() if not np.isfinite(v)} | set(stuck))
        for gate, values in (("rhat", rhat), ("ess_bulk", bulk), ("ess_tail", tail))
    }
    rhat = {k: v for k, v in rhat.items() if np.isfinite(v)}
    bulk = {k: v for k, v in bulk.items() if np.isfinite(v)}
    tail = {k: v for k, v in tail.items() if np.isfinite(v)}

    ss = idata.sample_stats
    diverging = ss["diverging"].values.astype(bool)
    n_div = int(diverging.sum())
    ebfmi_error = None
    try:
        ebfmi = [float(x) for x in np.atleast_1d(az.bfmi(idata))]
    except Exception as exc:  # e.g. no `energy` in sample_stats: the gate cannot be evaluated, so it fails
        ebfmi, ebfmi_error = [], f"E-BFMI could not be computed: {type(exc).__name__}: {exc}"
    if ebfmi and not all(np.isfinite(ebfmi)):
        ebfmi_error = f"E-BFMI is not finite in chains {[i for i, v in enumerate(ebfmi) if not np.isfinite(v)]}"
    elif not ebfmi and ebfmi_error is None:
        ebfmi_error = "E-BFMI could not be computed: no chains"
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
        "nonfinite": nonfinite,
        "stuck": stuck,
        "worst_rhat": [[k, None] for k in nonfinite["rhat"][:5]] + _worst(rhat, reverse=True),
        "worst_ess_bulk": [[k, None] for k in nonfinite["ess_bulk"][:5]] + _worst(bulk),
        "worst_ess_tail": [[k, None] for k in nonfinite["ess_tail"][:5]] + _worst(tail),
        "divergences": n_div,
        "divergences_per_chain": diverging.sum(axis=1).astype(int).tolist(),
        "ebfmi_per_chain": ebfmi,
        "min_ebfmi": min(ebfmi) if ebfmi and ebfmi_error is None else None,
        "ebfmi_error": ebfmi_error,
        "mean_tree_depth": float(depth.mean()) if depth is not None else None,
        "max_tree_depth": int(depth.max()) if depth is not None else None,
        "treedepth_hits": int((depth >= max_treedepth).sum()) if (depth is not None and max_treedepth) else None,
        "mean_leapfrog_per_draw": float(n_steps.mean()) if n_steps is not None else None,
        "step_size_per_chain": [float(x) for x in step[:, -1]] if step is not None else [],
        "thresholds": th,
    }
    checks = {
        "rhat": not nonfinite["rhat"] and out["max_rhat"] is not None and out["max_rhat"] <= th["rhat_max"],
        "ess_bulk": not nonfinite["ess_bulk"] and out["min_ess_bulk"] is not None and out["min_ess_bulk"] >= th["ess_bulk_min"],
        "ess_tail": not nonfinite["ess_tail"] and out["min_ess_tail"] is not None and out["min_ess_tail"] >= th["ess_tail_min"],
        "divergences": n_div <= th["divergences_max"],
        "ebfmi": ebfmi_error is None and min(ebfmi) >= th["ebfmi_min"],
    }
    out["checks"] = checks
    out["passes"] = bool(all(checks.values()))
    out["failures"] = failure_reasons(out)
    return out


def failure_reasons(diagnostics: Mapping[str, Any]) -> dict[str, str]:
    """Gate name -> why it failed, naming the parameters involved (empty when every gate passes)."""
    th = diagnostics["thresholds"]
    nonfinite = diagnostics.get("nonfinite", {})
    reasons: dict[str, str] = {}
    for gate, metric, limit, worst in (
        ("rhat", "max_rhat", "rhat_max", "worst_rhat"),
        ("ess_bulk", "min_ess_bulk", "ess_bulk_min", "worst_ess_bulk"),
        ("ess_tail", "min_ess_tail", "ess_tail_min", "worst_ess_tail"),
    ):
        if diagnostics["checks"].get(gate, False):
            continue
        if nonfinite.get(gate):
            names = nonfinite[gate]
            reasons[gate] = f"{metric}: not finite or stuck for {len(names)} parameter(s): {', '.join(names[:5])}"
        elif diagnostics.get(metric) is None:
            reasons[gate] = f"{metric}: could not be computed (no gated parameters)"
        else:
            named = ", ".join(f"{k}={v}" for k, v in diagnostics.get(worst, [])[:3])
            reasons[gate] = f"{metric} = {diagnostics[metric]:.4g} against the limit {th[limit]} (worst: {named})"
    if not diagnostics["checks"].get("divergences", False):
        reasons["divergences"] = f"divergences = {diagnostics['divergences']} against the limit {th['divergences_max']}"
    if not diagnostics["checks"].get("ebfmi", False):
        reasons["ebfmi"] = diagnostics.get("ebfmi_error") or (
            f"min_ebfmi = {diagnostics['min_ebfmi']:.3g} against the limit {th['ebfmi_min']}")
    return reasons


def format_summary(diagnostics: Mapping[str, Any]) -> str:
    """One log line; never fails on a value that could not be computed."""
    def fmt(value, spec):
        return "n/a" if value is None else format(value, spec)

    line = (f"max R-hat {fmt(diagnostics.get('max_rhat'), '.4f')}, min ESS bulk {fmt(diagnostics.get('min_ess_bulk'), '.0f')}"
            f" / tail {fmt(diagnostics.get('min_ess_tail'), '.0f')}, {diagnostics.get('divergences')} divergences, "
            f"min E-BFMI {fmt(diagnostics.get('min_ebfmi'), '.2f')}")
    failures = diagnostics.get("failures") or {}
    return line + ("; failing: " + "; ".join(f"{gate}: {why}" for gate, why in failures.items()) if failures else "")


def _stuck(post, names) -> list[str]:
    """Gated parameters whose draws do not vary within at least one chain."""
    out: list[str] = []
    for name in names:
        da = post[name]
        spread = (da.max(dim="draw") - da.min(dim="draw")).min(dim="chain")
        flat = _flatten(spread.to_dataset(name=name), [name])
        out += [k for k, v in flat.items() if not v > 0]
    return sorted(out)


def _worst(values: dict[str, float], reverse: bool = False, n: int = 5) -> list[list]:
    items = sorted(values.items(), key=lambda kv: kv[1], reverse=reverse)[:n]
    return [[k, round(v, 4)] for k, v in items]
