"""Which observed cells each validation fold holds out, and which it drops altogether.

A split is a pure function of the production fit's `modeled_observations`, the
validation config and a seed, so a fold can be re-run alone and give the same cells.
Every study keeps the display-reference states' cells in training: the refit must be
able to fix its display units (a missing reference is an error, not a substitute), and
prediction is scored on the unit scale, where the references play no part.

Studies (one `Split` per fold; `fold_keys` lists them, one Dagster partition each):
- forward / forward_strict: models ordered by release date; every reasoning state of
  the newest `newest_share` of dated models has `hide_share` of its cells hidden
  (seeded; never its last one, so the state stays in the fit). The strict variant also
  drops, from training and scoring alike, every family first evaluated after the cut.
- masked_k: a seeded k-fold over cells.
- family_k: whole families, grouped so one evaluator's or one lineage's families fall
  in the same fold; groups are spread over folds by observation count (largest first).
- sensitivity_k: the k-th best-covered family dropped (nothing is predicted; the
  study compares rankings).
- forward_thin: the forward study with production's two paths (issue 13). Of the new models
  (as in forward), a seeded `forward.thin_share` keep `forward.thin_evidence_cells` of their
  cells as their only evidence and leave the refit entirely (as the coverage filter removes a
  model with < 3 families); they are calibrated in from those cells on the refit, and the rest
  of their cells are held out. The other new models stay in the refit, beside them, with the
  forward study's cells hidden (as in production, where the thin models are calibrated beside
  fitted contemporaries). `Split.path` says which path predicts each held-out cell.
- masked_state: for every model with two or more observed reasoning states, every cell of
  one of its non-pinned states is hidden (seeded): the state is absent from the refit and
  is predicted from the model's other states and the reasoning structure (issue 14).
- active_panel / forward_active (issue 12, when `active_panel.studies`): the families outside the
  active panel (`cfg["active_panel"]["families"]` lists the active ones, from the outputs'
  `active_panel` table) are dropped; active_panel holds nothing out (its refit is the active-panel
  variant of every score), forward_active hides the forward study's cells (the same seeded draw)
  so the two panels are compared on identical cells.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import numpy as np
import pandas as pd

KEY = ["model", "reasoning_state", "family"]


@dataclass(frozen=True)
class Split:
    study: str                  # forward | forward_strict | masked | family | sensitivity
    fold: str                   # the partition key, e.g. masked_2
    heldout: np.ndarray         # bool per observation row: predicted and scored
    dropped: np.ndarray         # bool per observation row: in neither training nor scoring
    info: dict = field(default_factory=dict)
    evidence: np.ndarray | None = None  # bool per row: outside the refit, the evidence a model is calibrated in from
    path: np.ndarray | None = None      # per row (forward_thin): how a held-out cell is predicted, "fit" or "calibrate_in"

    @property
    def train(self) -> np.ndarray:
        out = ~self.heldout & ~self.dropped
        return out if self.evidence is None else out & ~self.evidence

    def fingerprint(self, observations: pd.DataFrame) -> str:
        """Hash of the cells held out and dropped (by name), so a refit is reused only for the same split."""
        keys = observations[KEY].astype(str).agg("|".join, axis=1)
        payload = {"heldout": sorted(keys[self.heldout]), "dropped": sorted(keys[self.dropped]), "study": self.study}
        if self.evidence is not None:
            payload["evidence"] = sorted(keys[self.evidence])
        return hashlib.sha256(json.dumps(payload).encode()).hexdigest()


SINGLE_FOLD_STUDIES = ("forward", "forward_strict", "forward_thin", "masked_state", "active_panel", "forward_active")
ACTIVE_STUDIES = ("active_panel", "forward_active")


def fold_keys(cfg: Mapping[str, Any]) -> list[str]:
    """Every partition key of the validation studies, in a stable order."""
    active = list(ACTIVE_STUDIES) if (cfg.get("active_panel") or {}).get("studies") else []
    return (["forward", "forward_strict", "forward_thin", "masked_state"]
            + [f"masked_{k}" for k in range(int(cfg["masked"]["folds"]))]
            + [f"family_{k}" for k in range(int(cfg["family"]["folds"]))]
            + [f"sensitivity_{k}" for k in range(int(cfg["sensitivity"]["families"]))]
            + active)


def study_of(fold: str) -> str:
    return fold if fold in SINGLE_FOLD_STUDIES else fold.rsplit("_", 1)[0]


def _protected(observations: pd.DataFrame, references: list[tuple[str, str]]) -> np.ndarray:
    """Rows of the display-reference states: always kept in training."""
    pairs = set(references)
    return np.array([(m, r) in pairs for m, r in zip(observations["model"], observations["reasoning_state"])])


def _rng(cfg: Mapping[str, Any], fold: str) -> np.random.Generator:
    # one stream per study, derived from the config seed and the study's name (stable across runs)
    digest = int(hashlib.sha256(f"{cfg['seed']}:{study_of(fold)}".encode()).hexdigest()[:12], 16)
    return np.random.default_rng(digest)


def release_cut(observations: pd.DataFrame, newest_share: float) -> tuple[pd.Timestamp, list[str]]:
    """The release date from which a dated model counts as new, and the new models (the newest share of dated
    models; ties on the cut date are all new)."""
    released = pd.to_datetime(observations.groupby("model")["released_on"].first(), errors="coerce").dropna()
    if released.empty:
        raise ValueError("no model in modeled_observations has a release date (column released_on): no forward study")
    ordered = released.sort_values(kind="mergesort")
    n_new = max(1, int(round(newest_share * len(ordered))))
    cut = ordered.iloc[len(ordered) - n_new]
    return cut, sorted(ordered.index[ordered >= cut])


def forward_split(observations: pd.DataFrame, cfg: Mapping[str, Any], references, *, strict: bool) -> Split:
    fold = "forward_strict" if strict else "forward"
    obs = observations.reset_index(drop=True)
    cut, new_models = release_cut(obs, float(cfg["forward"]["newest_share"]))
    rng = _rng(cfg, "forward")  # both variants hide the same cells
    protected = _protected(obs, references)
    heldout = np.zeros(len(obs), bool)
    share = float(cfg["forward"]["hide_share"])
    new = obs["model"].isin(new_models).to_numpy()
    for _, rows in obs[new & ~protected].groupby(["model", "reasoning_state"], sort=True):
        idx = rows.index.to_numpy()
        if len(idx) < 2:
            continue
        n_hide = min(len(idx) - 1, max(1, int(np.floor(share * len(idx)))))
        heldout[rng.choice(np.sort(idx), size=n_hide, replace=False)] = True
    dropped = np.zeros(len(obs), bool)
    late_families: list[str] = []
    if strict:
        first_seen = pd.to_datetime(obs["released_on"], errors="coerce").groupby(obs["family"]).min()
        late_families = sorted(first_seen.index[first_seen >= cut])
        dropped = obs["family"].isin(late_families).to_numpy()
        heldout &= ~dropped
    return Split("forward_strict" if strict else "forward", fold, heldout, dropped,
                 {"cut": str(cut.date()), "new_models": len(new_models), "late_families": late_families})


def masked_split(observations: pd.DataFrame, cfg: Mapping[str, Any], references, k: int) -> Split:
    obs = observations.reset_index(drop=True)
    folds = int(cfg["masked"]["folds"])
    protected = _protected(obs, references)
    rng = _rng(cfg, "masked_0")
    candidates = np.flatnonzero(~protected)
    assignment = np.full(len(obs), -1)
    assignment[rng.permutation(candidates)] = np.arange(len(candidates)) % folds
    return Split("masked", f"masked_{k}", assignment == k, np.zeros(len(obs), bool), {"folds": folds})


def family_groups(observations: pd.DataFrame, cfg: Mapping[str, Any], references) -> list[list[str]]:
    """The family folds: configured groups (one evaluator / lineage) plus every other family alone, spread
    over `family.folds` folds largest first, each to the fold with the fewest observations so far."""
    counts = observations.groupby("family").size()
    present = set(counts.index)
    groups = [sorted(set(g) & present) for g in cfg["family"]["groups"].values()]
    groups = [g for g in groups if g]
    grouped = {f for g in groups for f in g}
    groups += [[f] for f in sorted(present - grouped)]
    groups.sort(key=lambda g: (-int(counts[g].sum()), g[0]))
    folds: list[list[str]] = [[] for _ in range(int(cfg["family"]["folds"]))]
    sizes = [0] * len(folds)
    for group in groups:
        target = int(np.argmin(sizes))
        folds[target] += group
        sizes[target] += int(counts[group].sum())
    return [sorted(f) for f in folds]


def family_split(observations: pd.DataFrame, cfg: Mapping[str, Any], references, k: int) -> Split:
    obs = observations.reset_index(drop=True)
    held_families = family_groups(obs, cfg, references)[k]
    heldout = obs["family"].isin(held_families).to_numpy()
    return Split("family", f"family_{k}", heldout, np.zeros(len(obs), bool), {"families": held_families})


def best_covered_families(observations: pd.DataFrame, n: int) -> list[str]:
    counts = observations.groupby("family").size().reset_index(name="n")
    return counts.sort_values(["n", "family"], ascending=[False, True])["family"].head(n).tolist()


def sensitivity_split(observations: pd.DataFrame, cfg: Mapping[str, Any], references, k: int) -> Split:
    obs = observations.reset_index(drop=True)
    family = best_covered_families(obs, int(cfg["sensitivity"]["families"]))[k]
    dropped = (obs["family"] == family).to_numpy()
    return Split("sensitivity", f"sensitivity_{k}", np.zeros(len(obs), bool), dropped,
                 {"dropped_family": family, "n_observations_dropped": int(dropped.sum())})


def forward_thin_split(observations: pd.DataFrame, cfg: Mapping[str, Any], references) -> Split:
    """The forward study with both paths of production: among the new models (`release_cut`, as in forward), a
    seeded `forward.thin_share` of those that can be thinned (not a display reference, >= 2 cells) keep
    `forward.thin_evidence_cells` random cells as their only evidence and leave the refit (`evidence`), the rest of
    their cells held out (path calibrate-in); every other new model stays in the refit with the forward study's
    cells hidden (the same seeded draw: its held-out cells are exactly forward's, path fit)."""
    obs = observations.reset_index(drop=True)
    fwd = cfg["forward"]
    _, new_models = release_cut(obs, float(fwd["newest_share"]))
    keep = int(fwd.get("thin_evidence_cells", 2))
    refs = {m for m, _ in references}
    sizes = obs.groupby("model").size()
    thinnable = sorted(m for m in set(new_models) - refs if sizes.get(m, 0) >= 2)
    n_thin = int(round(float(fwd.get("thin_share", 0.5)) * len(thinnable)))
    chooser = _rng(cfg, "forward_thin:models")  # its own stream: the evidence draw below does not depend on it
    thinned = sorted(np.asarray(thinnable, dtype=object)[chooser.permutation(len(thinnable))[:n_thin]].tolist())
    # every thinnable model's evidence is drawn, in name order, whether or not it is thinned: a model's evidence does
    # not depend on which others are thinned, and thin_share 1 draws exactly the evidence of the all-thinned design
    rng = _rng(cfg, "forward_thin")
    heldout, evidence = np.zeros(len(obs), bool), np.zeros(len(obs), bool)
    for model in thinnable:
        idx = np.flatnonzero((obs["model"] == model).to_numpy())
        chosen = rng.choice(idx, size=min(keep, len(idx) - 1), replace=False)
        if model in thinned:
            evidence[chosen] = True
            heldout[np.setdiff1d(idx, chosen)] = True
    thin_rows = obs["model"].isin(thinned).to_numpy()
    fitted = forward_split(obs, cfg, references, strict=False).heldout & ~thin_rows
    heldout |= fitted
    path = np.where(thin_rows, "calibrate_in", np.where(fitted, "fit", None)).astype(object)
    return Split("forward_thin", "forward_thin", heldout, np.zeros(len(obs), bool),
                 {"new_models": len(new_models), "thinned_models": thinned,
                  "fitted_new_models": sorted(set(new_models) - set(thinned)),
                  "evidence_cells": int(evidence.sum()), "heldout_fit": int(fitted.sum()),
                  "heldout_calibrate_in": int((heldout & thin_rows).sum())},
                 evidence, path)


def active_families(cfg: Mapping[str, Any]) -> list[str]:
    families = (cfg.get("active_panel") or {}).get("families")
    if families is None:
        raise ValueError("the active-panel folds need the active families (validation config active_panel.families, "
                         "filled from the outputs' active_panel table: materialize active_panel first)")
    return list(families)


def active_panel_split(observations: pd.DataFrame, cfg: Mapping[str, Any], references, *, forward: bool) -> Split:
    obs = observations.reset_index(drop=True)
    active = active_families(cfg)
    dropped = ~obs["family"].isin(active).to_numpy()
    inactive = sorted(set(obs.loc[dropped, "family"]))
    if not forward:
        return Split("active_panel", "active_panel", np.zeros(len(obs), bool), dropped,
                     {"active_families": len(set(active) & set(obs["family"])), "inactive_families": inactive})
    base = forward_split(obs, cfg, references, strict=False)
    return Split("forward_active", "forward_active", base.heldout & ~dropped, dropped,
                 {**base.info, "inactive_families": inactive})


def masked_state_split(observations: pd.DataFrame, cfg: Mapping[str, Any], references,
                       pinned: set[tuple[str, str]]) -> Split:
    obs = observations.reset_index(drop=True)
    rng = _rng(cfg, "masked_state")
    protected = set(references) | set(pinned)
    heldout = np.zeros(len(obs), bool)
    chosen = []
    for model, rows in obs.groupby("model", sort=True):
        states = sorted(set(rows["reasoning_state"]))
        if len(states) < 2 or any((model, s) in set(references) for s in states):
            continue
        candidates = [s for s in states if (model, s) not in protected]
        if not candidates:
            continue
        state = candidates[int(rng.integers(len(candidates)))]
        heldout |= ((obs["model"] == model) & (obs["reasoning_state"] == state)).to_numpy()
        chosen.append(f"{model}|{state}")
    return Split("masked_state", "masked_state", heldout, np.zeros(len(obs), bool), {"hidden_states": len(chosen)})


def make_split(fold: str, observations: pd.DataFrame, cfg: Mapping[str, Any],
               references: list[tuple[str, str]], pinned: set[tuple[str, str]] | None = None) -> Split:
    """The split of one partition key (see `fold_keys`). `pinned`: the production fit's pinned states (the
    masked-state study never hides one: the model's gauge).

    The seeded draws run over the cells in name order (KEY), never in the rows' order: modeled_observations comes
    from DuckDB in no fixed order, and the same cells must give the same split (and fold fingerprint) every run.
    The masks returned are aligned with `observations` as given."""
    if fold not in fold_keys(cfg):
        raise ValueError(f"unknown validation fold {fold!r}; the config defines {fold_keys(cfg)}")
    order = np.lexsort([observations[c].astype(str).to_numpy() for c in reversed(KEY)])  # stable; model first
    split = _split_in_name_order(fold, observations.iloc[order].reset_index(drop=True), cfg, references, pinned)
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    restore = lambda values: None if values is None else np.asarray(values)[back]  # noqa: E731
    return replace(split, heldout=restore(split.heldout), dropped=restore(split.dropped),
                   evidence=restore(split.evidence), path=restore(split.path))


def _split_in_name_order(fold: str, observations: pd.DataFrame, cfg: Mapping[str, Any],
                         references: list[tuple[str, str]], pinned: set[tuple[str, str]] | None) -> Split:
    if fold in ("forward", "forward_strict"):
        return forward_split(observations, cfg, references, strict=fold == "forward_strict")
    if fold == "forward_thin":
        return forward_thin_split(observations, cfg, references)
    if fold in ACTIVE_STUDIES:
        return active_panel_split(observations, cfg, references, forward=fold == "forward_active")
    if fold == "masked_state":
        if pinned is None:
            raise ValueError("the masked-state split needs the fit's pinned states")
        return masked_state_split(observations, cfg, references, pinned)
    study, k = fold.rsplit("_", 1)
    builder = {"masked": masked_split, "family": family_split, "sensitivity": sensitivity_split}[study]
    return builder(observations, cfg, references, int(k))
