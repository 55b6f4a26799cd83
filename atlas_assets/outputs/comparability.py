"""May two published observations be compared side by side? Seed 002's ten rules, from stored dimensions.

An observation is one modeled cell (model, reasoning state, family): the score the fit saw, after
cleaning, duplicate resolution and harness pooling. Its dimensions come from the raw rows behind it
(`sql/observation_rows.sql` traces them through the cleaning chain):

- metric: the cell's kind (bounded score / rating) and the declared unit of its benchmarks;
- family: the statistical family;
- agent: the agent or scaffold parts of the rows' harness strings (an agent+model system when any);
- Elo pool: for ratings, the source that ran the arena;
- evaluated: the newest evaluation date of its rows (None when no row is dated);
- version: the exact benchmarks behind the cell (a family's primary or its components) and the
  version parts of the harness strings (LiveBench release, METR, tau2 or mini-swe-agent version);
- run settings: shots, the effective sampling protocol, the other harness parts (edit format, tools,
  frames, prompt, user simulator) and, for a component average, how many components;
- verification: the cell's verification class.

Which part of a harness string is an agent, a version or a setting is declared per harness column in
outputs.yaml (`comparability.harness_columns`): the registry names the columns of each file, the
config says what each column means, nothing is guessed from the values. The parts are aligned with
the columns only when their counts agree (ingest drops empty parts); otherwise the whole string is a
setting, and an agent too when the file declares an agent column.

`compare` applies the rules in the seed's order and returns the first that fires, with every other
rule that also fires listed in `also` (a caveat rarely comes alone). A version, run setting or Elo capture
date recorded for one observation and not for the other counts as differing: nothing shows they agree,
and the reason says "not recorded".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

NOT_COMPARABLE, CAVEAT, AS_SYSTEMS, COMPARABLE = "not comparable", "caveat", "comparable as systems", "comparable"
RULES: dict[int, tuple[str, str]] = {
    1: ("different metric", NOT_COMPARABLE),
    2: ("different family", NOT_COMPARABLE),
    3: ("agent system vs bare model", NOT_COMPARABLE),
    4: ("Elo from different pools", NOT_COMPARABLE),
    5: ("Elo captured far apart", CAVEAT),
    6: ("different versions", CAVEAT),
    7: ("run setting differs", CAVEAT),
    8: ("verification boundary", CAVEAT),
    9: ("two agent systems", AS_SYSTEMS),
    10: ("comparable", COMPARABLE),
}
HARNESS_ROLES = ("agent", "version", "setting")
SEPARATOR = " | "
UNRECORDED = "not recorded"


@dataclass(frozen=True)
class Observation:
    model: str
    reasoning_state: str
    family: str
    kind: str
    units: frozenset[str] = frozenset()
    sources: frozenset[str] = frozenset()
    agents: frozenset[str] = frozenset()
    versions: frozenset[str] = frozenset()
    benchmarks: tuple[str, ...] = ()
    settings: Mapping[str, frozenset] = field(default_factory=dict)
    evaluated_on: date | None = None
    verification_class: str | None = None

    @property
    def label(self) -> str:
        return f"{self.model} {self.reasoning_state} on {self.family}"


@dataclass(frozen=True)
class Verdict:
    rule: int
    verdict: str
    reason: str
    also: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return RULES[self.rule][0]


def _show(values: Iterable[Any], empty: str = "none") -> str:
    values = sorted(str(v) for v in values)
    return "{" + ", ".join(values) + "}" if values else empty


def compare(a: Observation, b: Observation, cfg: Mapping[str, Any]) -> Verdict:
    """The first of seed 002's rules that fires for the pair, its reason, and the later rules that also fire."""
    self_reported, external = set(cfg["self_reported"]), set(cfg["external"])
    max_days = int(cfg["elo_max_days_apart"])
    fired: list[tuple[int, str]] = []
    if (a.kind, a.units) != (b.kind, b.units):
        fired.append((1, f"metric {a.kind} {_show(a.units)} vs {b.kind} {_show(b.units)}"))
    if a.family != b.family:
        fired.append((2, f"family {a.family} vs {b.family}: compare them on the capability scale, never raw"))
    if bool(a.agents) != bool(b.agents):
        system, bare = (a, b) if a.agents else (b, a)
        fired.append((3, f"{system.label} is an agent system ({_show(system.agents)}), {bare.label} a bare model"))
    rating = a.kind == "rating" and b.kind == "rating"
    if rating and a.sources != b.sources:
        fired.append((4, f"Elo pools {_show(a.sources)} vs {_show(b.sources)}"))
    if rating and a.sources == b.sources:
        if a.evaluated_on is None or b.evaluated_on is None:
            fired.append((5, "capture date unknown for "
                          + " and ".join(o.label for o in (a, b) if o.evaluated_on is None)))
        elif abs((a.evaluated_on - b.evaluated_on).days) > max_days:
            fired.append((5, f"captured {a.evaluated_on} vs {b.evaluated_on}, "
                          f"{abs((a.evaluated_on - b.evaluated_on).days)} days > {max_days}"))
    if a.benchmarks != b.benchmarks or a.versions != b.versions:
        parts = []
        if a.benchmarks != b.benchmarks:
            parts.append(f"benchmarks {_show(a.benchmarks)} vs {_show(b.benchmarks)}")
        if a.versions != b.versions:
            parts.append(f"versions {_show(a.versions, UNRECORDED)} vs {_show(b.versions, UNRECORDED)}")
        fired.append((6, "; ".join(parts)))
    differing = [k for k in sorted(set(a.settings) | set(b.settings))
                 if a.settings.get(k, frozenset()) != b.settings.get(k, frozenset())]
    if differing:
        fired.append((7, "; ".join(f"{k} {_show(a.settings.get(k, ()), UNRECORDED)} vs "
                                   f"{_show(b.settings.get(k, ()), UNRECORDED)}" for k in differing)))
    va, vb = a.verification_class, b.verification_class
    if (va in self_reported and vb in external) or (va in external and vb in self_reported):
        fired.append((8, f"verification {va} vs {vb}"))
    if a.agents and b.agents and a.agents != b.agents:
        fired.append((9, f"agents {_show(a.agents)} vs {_show(b.agents)}: compares systems, not the models"))
    if not fired:
        return Verdict(10, COMPARABLE, "same family, metric, version, run settings and verification class")
    rule, reason = fired[0]
    return Verdict(rule, RULES[rule][1], reason, tuple(r for r, _ in fired[1:]))


# ----------------------------------------------------------------------------------- dimensions from rows


def _clean(value: Any) -> Any:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NaT:
        return None
    return value


def harness_parts(harness: Any, columns: Any, roles: Mapping[str, str], where: str) -> dict[str, set[str]]:
    """role -> the parts of one raw row's harness string (see the module doc); KeyError names an unknown column."""
    columns = [str(c) for c in (list(columns) if columns is not None else [])]
    unknown = [c for c in columns if c not in roles]
    if unknown:
        raise KeyError(f"{where}: harness column(s) {unknown} have no role in outputs.yaml comparability.harness_columns "
                       f"(one of {', '.join(HARNESS_ROLES)})")
    out: dict[str, set[str]] = {role: set() for role in HARNESS_ROLES}
    harness = _clean(harness)
    if harness is None:
        return out
    parts = [p.strip() for p in str(harness).split(SEPARATOR)]
    if len(parts) == len(columns):
        for column, part in zip(columns, parts):
            out[roles[column]].add(part)  # the value: two sources name one column differently
    else:  # parts dropped on ingest: no alignment, the whole string counts as a setting (and an agent if any)
        out["setting"].add(str(harness))
        if any(roles[c] == "agent" for c in columns):
            out["agent"].add(str(harness))
    return out


def observations_from_rows(rows: pd.DataFrame, cfg: Mapping[str, Any]) -> dict[tuple[str, str, str], Observation]:
    """(model, reasoning_state, family) -> Observation, from observation_rows.sql's rows."""
    roles = dict(cfg["harness_columns"])
    out = {}
    for key, group in rows.groupby(["model", "reasoning_state", "family"], sort=True):
        found: dict[str, set[str]] = {role: set() for role in HARNESS_ROLES}
        for r in group.itertuples():
            for role, parts in harness_parts(r.harness, r.harness_columns, roles, f"{r.source}/{r.file}").items():
                found[role] |= parts
        first = group.iloc[0]
        shots = {str(int(s)) for s in group["shots"].dropna()}
        settings = {"shots": frozenset(shots), "protocol": frozenset(group["effective_protocol"].dropna().astype(str)),
                    "harness": frozenset(found["setting"])}
        if first["selection"] != "primary":
            settings["components"] = frozenset({f"{int(first['n_components'])} of {first['selection']}"})
        dates = pd.to_datetime(group["evaluated_on"], errors="coerce").dropna()
        out[key] = Observation(
            model=key[0], reasoning_state=key[1], family=key[2], kind=str(first["kind"]),
            units=frozenset(group["unit"].dropna().astype(str)), sources=frozenset(group["source"].dropna().astype(str)),
            agents=frozenset(found["agent"]), versions=frozenset(found["version"]),
            benchmarks=tuple(sorted(str(b) for b in first["benchmarks"])),
            settings={k: v for k, v in settings.items() if v},
            evaluated_on=dates.max().date() if len(dates) else None,
            verification_class=_clean(first["verification_class"]),
        )
    return out


# ------------------------------------------------------------------------------- the pairs users compare


def _verdict_row(scope: str, rank: int, a: Observation, b: Observation, verdict: Verdict, **extra) -> dict[str, Any]:
    return {"scope": scope, "rank_a": rank, "rank_b": rank + 1,
            "model_a": a.model, "state_a": a.reasoning_state, "model_b": b.model, "state_b": b.reasoning_state,
            "family_a": a.family, "family_b": b.family, "rule": verdict.rule, "rule_name": verdict.name,
            "verdict": verdict.verdict, "reason": verdict.reason,
            "also_rules": ",".join(str(r) for r in verdict.also) or None, **extra}


def leaderboard_pairs(states: pd.DataFrame, observations: Mapping[tuple[str, str, str], Observation],
                      cells: pd.DataFrame, cfg: Mapping[str, Any]) -> pd.DataFrame:
    """Verdicts for the neighbours users compare most.

    - scope "overall": adjacent ranks of the eligible states in state_scores (by display mean); one row per
      family both states were observed on (the raw results a user would set side by side), or, when they
      share none, one rule-2 row (only their capabilities compare).
    - scope "family:<f>": adjacent ranks among the eligible states observed on family f, by observed score.
    `cells`: model, reasoning_state, family, u of the observed cells (the fit's modeled observations).
    """
    eligible = states[states["eligible"].astype(bool)]
    ranked = eligible.sort_values(["display_mean", "model", "reasoning_state"], ascending=[False, True, True],
                                  kind="mergesort").reset_index(drop=True)
    by_state: dict[tuple[str, str], list[Observation]] = {}
    for (m, s, f), obs in observations.items():
        by_state.setdefault((m, s), []).append(obs)
    rows = []
    for i in range(len(ranked) - 1):
        ka = (ranked.at[i, "model"], ranked.at[i, "reasoning_state"])
        kb = (ranked.at[i + 1, "model"], ranked.at[i + 1, "reasoning_state"])
        fa = {o.family: o for o in by_state.get(ka, [])}
        fb = {o.family: o for o in by_state.get(kb, [])}
        shared = sorted(set(fa) & set(fb))
        extra = {"n_shared_families": len(shared)}
        if not shared:
            a = Observation(*ka, family=_show(fa), kind="")
            b = Observation(*kb, family=_show(fb), kind="")
            rows.append(_verdict_row("overall", i + 1, a, b, Verdict(
                2, NOT_COMPARABLE, "no family in common: only their capabilities (the normalized scale) compare"),
                **extra))
            continue
        for family in shared:
            rows.append(_verdict_row("overall", i + 1, fa[family], fb[family], compare(fa[family], fb[family], cfg),
                                     **extra))
    keys = set(zip(eligible["model"], eligible["reasoning_state"]))
    observed = cells[[k in keys for k in zip(cells["model"], cells["reasoning_state"])]]
    for family, group in observed.groupby("family", sort=True):
        group = group.sort_values(["u", "model", "reasoning_state"], ascending=[False, True, True],
                                  kind="mergesort").reset_index(drop=True)
        for i in range(len(group) - 1):
            a = observations[(group.at[i, "model"], group.at[i, "reasoning_state"], family)]
            b = observations[(group.at[i + 1, "model"], group.at[i + 1, "reasoning_state"], family)]
            rows.append(_verdict_row(f"family:{family}", i + 1, a, b, compare(a, b, cfg), n_shared_families=1))
    return pd.DataFrame(rows)


def verdict_counts(pairs: pd.DataFrame) -> pd.DataFrame:
    """Rows per rule (the first that fired) and scope kind (overall / per family)."""
    if pairs.empty:
        return pd.DataFrame(columns=["rule", "rule_name", "verdict", "overall", "per_family"])
    kind = np.where(pairs["scope"] == "overall", "overall", "per_family")
    table = pd.crosstab([pairs["rule"], pairs["rule_name"], pairs["verdict"]], kind)
    for column in ("overall", "per_family"):
        if column not in table:
            table[column] = 0
    return table[["overall", "per_family"]].reset_index().rename_axis(None, axis=1)
