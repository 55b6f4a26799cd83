"""Publication gates (issue 12, seed 004 section 08): which fitted states get a published headline, and why not.

A score from a handful of results looks more precise than it is. The rule is publish.yaml `headline_gate`:
a state passes when it is rank-eligible in the fit, its results come from at least `min_lineages` distinct
benchmark lineages, and at least one of the `routes` passes. A route asks for at least `min_families` families,
optionally at least `min_categories` categories with one of them in `one_of_categories`, and optionally a 90%
display interval no wider than `max_interval_width` (the state's own interval in state_scores, which already
reflects what its model's other states lend it).

A lineage is a benchmark suite whose families share authors, item pool or harness (tiers, splits and versions of
one benchmark): their results are not independent evidence, so two families of one lineage count once toward
`min_lineages`. The registry has no lineage field (benchmarks.yaml is fit scope), so publish.yaml `lineages`
maps family -> lineage; a family it does not name is its own lineage.

States below the gate stay in the fit and in cell_predictions; the published state_scores and model_scores say
"not enough evidence" with the reason (`apply_to_scores`).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import numpy as np
import pandas as pd

PASS = "published"
FAIL = "not enough evidence"
NOT_ELIGIBLE = "not rank-eligible in the fit"


def _route_failures(name: str, route: Mapping[str, Any], n_families: int, categories: set[str],
                    width: float) -> list[str]:
    """Why one route does not pass (empty: it passes), each as a short code."""
    out = []
    if n_families < int(route["min_families"]):
        out.append(f"{name}: {n_families} families < {route['min_families']}")
    if route.get("min_categories") and len(categories) < int(route["min_categories"]):
        out.append(f"{name}: {len(categories)} categories < {route['min_categories']}")
    wanted = route.get("one_of_categories") or []
    if wanted and not categories & set(wanted):
        out.append(f"{name}: no family in {' or '.join(wanted)}")
    limit = route.get("max_interval_width")
    if limit is not None and not (np.isfinite(width) and width <= float(limit)):
        out.append(f"{name}: 90% interval {width:.1f} > {float(limit):g}")
    return out


def headline_gates(state_scores: pd.DataFrame, observations: pd.DataFrame, membership: pd.DataFrame,
                   headline_states: pd.DataFrame, cfg: Mapping[str, Any]) -> pd.DataFrame:
    """One row per fitted state: its evidence (families, categories, lineages, interval width), `gate_pass`, the
    routes that pass, and `reason` (why it fails; every failed requirement, ';'-separated, in `failures`).
    `observations`: the fit's (model, reasoning_state, family); `membership`: family -> category rows
    (outputs.skill_scores.family_categories); `headline_states`: model_scores' (model, headline_state);
    cfg: publish.yaml `headline_gate`."""
    lineage_of = dict(cfg.get("lineages") or {})
    cats = membership.dropna(subset=["category"]).groupby("family")["category"].agg(set)
    fams = observations.groupby(["model", "reasoning_state"])["family"].agg(lambda f: sorted(set(f)))
    headline = set(zip(headline_states["model"], headline_states["headline_state"]))
    rows = []
    for st in state_scores.itertuples(index=False):
        mine = fams.get((st.model, st.reasoning_state), [])
        categories = set().union(*[cats.get(f, set()) for f in mine]) if mine else set()
        lineages = sorted({lineage_of.get(f, f) for f in mine})
        width = float(st.display_upper - st.display_lower)
        failures = [] if bool(st.eligible) else [NOT_ELIGIBLE]
        if len(lineages) < int(cfg["min_lineages"]):
            failures.append(f"{len(lineages)} {'lineage' if len(lineages) == 1 else 'lineages'} < {cfg['min_lineages']}")
        per_route = {name: _route_failures(name, route, len(mine), categories, width)
                     for name, route in cfg["routes"].items()}
        passing = [name for name, why in per_route.items() if not why]
        if not passing:
            failures += [w for why in per_route.values() for w in why]
        rows.append({
            "model": st.model, "reasoning_state": st.reasoning_state, "state_pos": int(st.state_pos),
            "eligible": bool(st.eligible), "headline_state": (st.model, st.reasoning_state) in headline,
            "n_families": len(mine), "families": ", ".join(mine),
            "n_categories": len(categories), "categories": ", ".join(sorted(categories)),
            "n_lineages": len(lineages), "lineages": ", ".join(lineages),
            "interval_width": width, "gate_pass": not failures,
            "routes_passed": ", ".join(passing) if not failures else "",
            "status": PASS if not failures else FAIL,
            "reason": "" if not failures else _reason(failures, bool(st.eligible)),
            "failures": "; ".join(failures),
        })
    out = pd.DataFrame(rows).sort_values(["model", "reasoning_state"]).reset_index(drop=True)
    out["gate_rule"] = gate_rule(cfg)
    return out


def gate_rule(cfg: Mapping[str, Any]) -> str:
    """The rule in force, as one line a reader (and the methodology record) can quote."""
    routes = json.dumps(cfg["routes"], sort_keys=True)
    return (f"rank-eligible, results from >= {cfg['min_lineages']} benchmark lineages (publish.yaml lineages; an "
            f"unnamed family is its own), and one route of {routes}")


def _reason(failures: list[str], eligible: bool) -> str:
    """The headline reason: the first requirement a reader should hear (eligibility, then lineages, then routes)."""
    if not eligible:
        return NOT_ELIGIBLE
    lineage = [f for f in failures if "lineage" in f]
    routes = [f for f in failures if f not in lineage]
    parts = ([f"results from {lineage[0]}"] if lineage else []) + (["no route passes (" + "; ".join(routes) + ")"]
                                                                  if routes else [])
    return "; ".join(parts)


def reason_counts(gates: pd.DataFrame) -> pd.DataFrame:
    """Failing states per failed requirement (a state counts once per requirement it misses), and per headline
    reason kind: not eligible / too few lineages / no route."""
    failed = gates[~gates["gate_pass"].astype(bool)]
    if failed.empty:
        return pd.DataFrame({"requirement": pd.Series([], dtype=str), "states": pd.Series([], dtype=int)})
    codes = failed["failures"].fillna("").astype(str).str.split("; ").explode()
    generic = codes.str.replace(r"[0-9.]+ (families|categories|lineages?|<|>)", r"\1", regex=True)
    generic = generic.str.replace(r"interval [0-9.]+ >", "interval >", regex=True)
    return generic.value_counts().rename_axis("requirement").reset_index(name="states")


def apply_to_scores(state_scores: pd.DataFrame, model_scores: pd.DataFrame, gates: pd.DataFrame
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The published score tables with the gate: state_scores gains `headline_gate` (published / not enough
    evidence) and `headline_gate_reason`; a model whose headline state fails has headline_status "not enough
    evidence" (its numbers stay, so a reader sees what was withheld from ranking) and the reason. Raises
    ValueError when the gate table does not cover exactly the fitted states."""
    key = ["model", "reasoning_state"]
    g = gates[key + ["gate_pass", "reason"]]
    if len(g) != len(state_scores) or g.merge(state_scores[key], on=key).shape[0] != len(state_scores):
        raise ValueError(f"headline_gates has {len(g)} states, state_scores {len(state_scores)}: not the same states")
    states = state_scores.merge(g, on=key, how="left", validate="one_to_one")
    states["headline_gate"] = np.where(states["gate_pass"].astype(bool), PASS, FAIL)
    states["headline_gate_reason"] = states["reason"].where(~states["gate_pass"].astype(bool), "")
    states = states.drop(columns=["gate_pass", "reason"])
    models = model_scores.merge(g.rename(columns={"reasoning_state": "headline_state"}), on=["model", "headline_state"],
                                how="left", validate="many_to_one")
    failing = models["gate_pass"].eq(False) & models["headline_status"].eq("published")
    models.loc[failing, "headline_status"] = FAIL
    models["headline_gate_reason"] = np.where(failing, models["reason"], "")
    return states, models.drop(columns=["gate_pass", "reason"])
