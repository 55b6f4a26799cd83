"""One validation fold: refit the production specification on the fold's training cells, predict what it held
out, and predict the same cells by every baseline from the same training cells.

The refit is warm: it starts from the production fit (inits from its draws, its posterior as the affine
preconditioner carried over by parameter name, no pilot) with the short sampler of
config/validation.yaml `refit`. A fold folder records the split's fingerprint and the production fit it
came from; a later run with the same split and the same production fit reuses the refit instead of sampling
again. Results are plain frames (see `FoldResult`), written to DuckDB by the Dagster asset.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from atlas_assets.validation import baselines
from atlas_assets.validation.metrics import cell_scores, rank_agreement
from atlas_assets.validation.splits import KEY, Split, make_split

# A fitter takes (training observations, output folder, model config, warm-from folder) and leaves a fit
# folder written by atlas_assets.model.fit_process (in-process or through Dagster Pipes).
Fitter = Callable[[pd.DataFrame, Path, dict, Path], None]

METHODS = ["atlas", "eci_form", "eci_form_residual", "family_mean", "model_offset"]


@dataclass
class FoldResult:
    fold: str
    study: str
    info: dict                                   # one row of validation_folds
    predictions: pd.DataFrame                    # held-out cells x methods (forward, masked)
    family_ranks: pd.DataFrame = field(default_factory=pd.DataFrame)   # family study
    sensitivity: pd.DataFrame = field(default_factory=pd.DataFrame)    # sensitivity study
    active_scores: pd.DataFrame = field(default_factory=pd.DataFrame)  # active_panel study: the variant's scores
    # cell studies: every held-out cell that is not scored, with why (the model could not place it, or a baseline
    # could not predict it and identical cells are scored): no held-out cell is dropped silently
    unscored: pd.DataFrame = field(default_factory=pd.DataFrame)


def references(model_config: Mapping[str, Any]) -> list[tuple[str, str]]:
    ref = model_config["display"]["reference"]
    return [(ref[k]["model"], ref[k]["reasoning_state"]) for k in ("low", "high")]


def refit_config(production_config: Mapping[str, Any], validation_cfg: Mapping[str, Any], fold: str) -> dict:
    """The production model config with the validation refit sampler; a per-fold seed."""
    cfg = json.loads(json.dumps(production_config))
    r = validation_cfg["refit"]
    smp = cfg["sampler"]
    smp.update(chains=int(r["chains"]), draws=int(r["draws"]), adapt_delta=float(r["adapt_delta"]))
    smp["seed"] = int(smp["seed"]) + 1 + int(hashlib.sha256(fold.encode()).hexdigest()[:6], 16) % 100_000
    # a fold is scored on its held-out cells through the posterior's parameters: the per-observation draws of its
    # training cells would be computed and written for nothing (measured: 2.4 s and most of a 40 MB posterior.nc
    # per fold)
    smp["observation_draws"] = False
    pcfg = smp.setdefault("precondition", {})
    pcfg["main_warmup"] = int(r["warmup"])
    # a fold is a measurement, always warm from the production fit: coordinates it adds (a state whose pinned
    # sibling lost its cells) never send it to a pilot (model.yaml `warm_max_new` is the nightly refit's rule)
    pcfg["warm_max_new"] = None
    # ... and they enter at their prior-like place under the fold's diagonal metric, as the folds were measured
    # (placing them first, model/placement.py, is the nightly refit's route and was not measured on folds)
    pcfg["warm_place_max"] = 0
    # ... and a fold's fit is used as it came out (its gates are reported, not enforced), so a failed one is not
    # fitted again
    pcfg["refit_on_failure"] = 0
    # ... and it adapts its own step size: a fold's posterior (a masked family, a past panel) differs from the
    # production one more than a night's data change does, and the folds were measured adapting
    if pcfg.get("main_adapt"):
        pcfg["main_adapt"] = {**pcfg["main_adapt"], "warm_fixed_step": None}
    if r.get("metric"):
        pcfg["main_adapt"] = {**(pcfg.get("main_adapt") or {}), "metric": r["metric"]}
    return cfg


def in_process_fitter(engine: str | None = None) -> Fitter:
    def fit(train: pd.DataFrame, out: Path, cfg: dict, warm_from: Path) -> None:
        from atlas_assets.model.fit_process import run_fit

        run_fit(train, out, cfg, warm_from=warm_from, engine=engine, log=lambda m: None)
    return fit


def _refit(split: Split, observations: pd.DataFrame, production_dir: Path, production_cfg: dict,
           validation_cfg: Mapping[str, Any], fold_dir: Path, fitter: Fitter, log) -> tuple[Path, bool]:
    """The fold's fit folder, reused when split, production fit and refit settings are unchanged."""
    cfg = refit_config(production_cfg, validation_cfg, split.fold)
    stamp = {"split": split.fingerprint(observations), "production_fit": production_dir.name,
             "refit": hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()}
    fit_dir = fold_dir / "fit"
    stamp_path = fold_dir / "fold.json"
    if (fit_dir / "fit_summary.json").exists() and stamp_path.exists() and json.loads(stamp_path.read_text()) == stamp:
        log(f"{split.fold}: split and production fit unchanged, reusing {fit_dir}")
        return fit_dir, True
    shutil.rmtree(fold_dir, ignore_errors=True)
    fold_dir.mkdir(parents=True)
    train = observations[split.train].reset_index(drop=True)
    log(f"{split.fold}: refitting on {len(train)} of {len(observations)} cells "
        f"({int(split.heldout.sum())} held out, {int(split.dropped.sum())} dropped), warm from {production_dir.name}")
    fitter(train, fit_dir, cfg, production_dir)
    stamp_path.write_text(json.dumps(stamp, indent=1))
    return fit_dir, False


NOT_IN_REFIT_FAMILY = "family not in the refit (none of its cells is in the refit's training data)"


def _atlas_ensemble(refit, heldout: pd.DataFrame, rng: np.random.Generator, draws=None) -> tuple[np.ndarray, np.ndarray]:
    """One posterior predictive draw per posterior draw of the refit, per held-out cell (NaN where the
    cell's state or family is not in the refit), and per cell the reason it is not predicted (None if it is)."""
    from atlas_assets.outputs.cell_model import predictive
    from atlas_assets.outputs.draws import from_fit, observation_items

    draws = draws if draws is not None else from_fit(refit)
    si = refit.stan_input
    state_pos = pd.Series(si.states["state_pos"].to_numpy(), index=pd.MultiIndex.from_frame(si.states[["model", "reasoning_state"]]))
    family_pos = si.families.set_index("family")["family_pos"]
    out = np.full((draws.n_draws, len(heldout)), np.nan)
    items = observation_items(heldout)
    pos_s = np.array([state_pos.get((m, r), -1) for m, r in zip(heldout["model"], heldout["reasoning_state"])], dtype=int)
    pos_f = heldout["family"].map(family_pos).fillna(-1).to_numpy(int)
    for j in np.unique(pos_f[pos_f >= 0]):
        cols = np.flatnonzero((pos_f == j) & (pos_s >= 0))
        if len(cols):
            out[:, cols] = predictive(rng, draws.eta(pos_s[cols], int(j)), draws.family(int(j), si.families), items[cols])
    reasons = np.array([None] * len(heldout), dtype=object)
    reasons[pos_s < 0] = "state not in the refit (every cell of it held out or dropped)"
    reasons[pos_f < 0] = NOT_IN_REFIT_FAMILY
    return out, reasons


def _eci_ensembles(train: pd.DataFrame, heldout: pd.DataFrame, validation_cfg: Mapping[str, Any],
                   seed: int) -> tuple[dict[str, np.ndarray], dict]:
    from atlas_assets.validation.eci_form import bootstrap_eci_form

    e = validation_cfg["baselines"]["eci_form"]
    t0 = time.perf_counter()
    boot = bootstrap_eci_form(train, n_boot=int(e["bootstrap"]), seed=seed, l2=float(e["l2"]))
    args = (heldout["model"].to_numpy(), heldout["reasoning_state"].to_numpy(), heldout["family"].to_numpy())
    ensembles = {"eci_form": boot.predict_draws(*args, residuals=False, seed=seed),
                 "eci_form_residual": boot.predict_draws(*args, residuals=True, seed=seed + 1)}
    return ensembles, {"eci_form_seconds": round(time.perf_counter() - t0, 2)}


UNSCORED_COLUMNS = ["study", "fold", "model", "reasoning_state", "family", "kind", "u", "released_on", "path",
                    "predicted_by_model", "reason"]


def _score(split: Split, heldout: pd.DataFrame, ensembles: dict[str, np.ndarray], validation_cfg,
           reasons: np.ndarray | None = None) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    """Per-cell scores of every method on the cells every method could predict (identical splits); the other
    held-out cells, each with its reason (`reasons`: per cell, why the model could not predict it); counts."""
    intervals = [float(x) for x in validation_cfg["intervals"]]
    finite = {m: np.isfinite(e).all(axis=0) for m, e in ensembles.items()}
    scored = np.logical_and.reduce(list(finite.values()))
    extra = [c for c in ("path",) if c in heldout.columns]  # forward_thin: which path predicted the cell
    base = heldout.loc[scored, KEY + ["kind", "u", "released_on"] + extra].reset_index(drop=True)
    frames = []
    for method, ensemble in ensembles.items():
        cells = cell_scores(base["u"].to_numpy(float), ensemble[:, scored], intervals)
        frames.append(pd.concat([base.assign(method=method), cells], axis=1))
    out = pd.concat(frames, ignore_index=True)
    out.insert(0, "fold", split.fold)
    out.insert(0, "study", split.study)
    by_model = finite["atlas"]
    why = []
    for i in np.flatnonzero(~scored):
        if not by_model[i]:
            why.append((reasons[i] if reasons is not None and reasons[i] else None) or "not predicted by the model")
        else:
            missing = [m for m, ok in finite.items() if not ok[i]]
            why.append(f"predicted by the model, not by {', '.join(missing)}: only cells every method predicts are "
                       "scored")
    unscored = heldout.loc[~scored].reset_index(drop=True).reindex(columns=UNSCORED_COLUMNS)
    unscored["study"], unscored["fold"] = split.study, split.fold
    unscored["predicted_by_model"] = by_model[~scored]
    unscored["reason"] = why
    info = {"n_scored": int(scored.sum()), "n_predicted": int(by_model.sum()), "n_unscored": int((~scored).sum())}
    return out, info, unscored


def _predictions(split: Split, observations: pd.DataFrame, refit, validation_cfg, seed: int
                 ) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    train = observations[split.train].reset_index(drop=True)
    heldout = observations[split.heldout].reset_index(drop=True)
    rng = np.random.default_rng(seed)
    atlas, reasons = _atlas_ensemble(refit, heldout, rng)
    ensembles = {"atlas": atlas}
    size = ensembles["atlas"].shape[0]
    eci, timing = _eci_ensembles(train, heldout, validation_cfg, seed)
    ensembles.update(eci)
    ensembles["family_mean"] = baselines.family_mean_ensemble(train, heldout, rng, size)
    ensembles["model_offset"] = baselines.model_offset_ensemble(train, heldout, rng, size)
    out, info, unscored = _score(split, heldout, {m: ensembles[m] for m in METHODS}, validation_cfg, reasons)
    return out, {**info, **timing}, unscored


FIT, CALIBRATED, CALIBRATED_UNMEASURED = "fit", "calibrated", "calibrated_unmeasured_setting"


def _calibrated_ensemble(refit, evidence: pd.DataFrame, heldout: pd.DataFrame, rng: np.random.Generator,
                         seed: int, draws=None) -> tuple[np.ndarray, dict]:
    """Held-out cells of models outside the refit, through calibrate-in (outputs/calibrate.py): each model's
    states placed on the refit from its evidence cells alone (a held-out setting without evidence through the
    reasoning structure), then its cells drawn from the refit's family likelihoods. NaN for a cell that cannot
    be placed; info["path"] says per cell which calibrate-in path it takes (at a setting with evidence or not),
    info["reasons"] why a cell is not placed (None where it is)."""
    from atlas_assets.outputs.calibrate import calibrate, likelihood_pieces, reasoning_draws_from_fit, theta_priors_from_fit
    from atlas_assets.outputs.config import load_outputs_config
    from atlas_assets.outputs.cell_model import predictive
    from atlas_assets.outputs.draws import from_fit, observation_items

    draws, si = (draws if draws is not None else from_fit(refit)), refit.stan_input
    fitted_families = set(si.families["family"])
    usable = evidence[evidence["family"].isin(fitted_families)]
    all_pieces = likelihood_pieces(usable, si.families)
    pieces = all_pieces[all_pieces["drop_reason"].isna()]
    released = pieces.groupby("model")["released_on"].first().to_dict() if "released_on" in pieces else {}
    priors = theta_priors_from_fit(refit, draws.n_draws, released, load_outputs_config()["calibrate"])
    # a held-out state of a calibrated model without evidence of its own: placed through the reasoning structure
    unmeasured = heldout[heldout["model"].isin(set(pieces["model"]))].groupby("model")["reasoning_state"].agg(
        lambda r: sorted(set(r))).to_dict()
    calibration = calibrate(draws, reasoning_draws_from_fit(refit), si.families, pieces, seed, theta_priors=priors,
                            unmeasured=unmeasured)
    position = dict(zip(zip(calibration.states["model"], calibration.states["reasoning_state"]), calibration.states["cal_pos"]))
    family_pos = si.families.set_index("family")["family_pos"]
    items = observation_items(heldout)
    out = np.full((draws.n_draws, len(heldout)), np.nan)
    keys = list(zip(heldout["model"], heldout["reasoning_state"]))
    cal = np.array([position.get(k, -1) for k in keys], dtype=int)
    fam = heldout["family"].map(family_pos).fillna(-1).to_numpy(int)
    for j in np.unique(fam[(fam >= 0) & (cal >= 0)]):
        cols = np.flatnonzero((fam == j) & (cal >= 0))
        eta = draws.beta[:, [int(j)]] * (calibration.phi[:, cal[cols]] - draws.b[:, [int(j)]])
        out[:, cols] = predictive(rng, eta, draws.family(int(j), si.families), items[cols])
    # the path: at a setting the model has usable evidence at, or placed through the reasoning structure
    measured_states = set(zip(pieces["model"], pieces["reasoning_state"]))
    path = np.array([CALIBRATED if k in measured_states else CALIBRATED_UNMEASURED for k in keys], dtype=object)
    reasons = np.array([None] * len(heldout), dtype=object)
    calibrated_models = set(calibration.states["model"])
    for i, (model, _state) in enumerate(keys):
        if model not in calibrated_models:
            own = evidence[evidence["model"] == model]
            dropped = all_pieces.loc[(all_pieces["model"] == model) & all_pieces["drop_reason"].notna(), "drop_reason"]
            if own.empty:
                reasons[i] = "model has no evidence cell: nothing to calibrate from"
            elif len(dropped):
                reasons[i] = "no usable evidence cell on a family in the refit (" + "; ".join(sorted(set(dropped))) + ")"
            else:
                reasons[i] = ("no evidence cell on a family in the refit (evidence on "
                              + ", ".join(sorted(set(own["family"]))) + "): nothing to calibrate from")
        elif cal[i] < 0:
            reasons[i] = "state not placed by calibrate-in"
    reasons[fam < 0] = NOT_IN_REFIT_FAMILY
    return out, {"calibrated_models": int(len(calibrated_models)),
                 "calibrate_seconds": round(calibration.seconds, 2), "path": path, "reasons": reasons}


def _thin_predictions(split: Split, observations: pd.DataFrame, refit, validation_cfg, seed: int
                      ) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    """forward_thin: each held-out cell through its path (`split.path`): the refit where its model is in it,
    calibrate-in where the model was thinned out of it; the baselines see the same cells (training + evidence)."""
    from atlas_assets.outputs.draws import from_fit

    evidence = observations[split.evidence].reset_index(drop=True)
    known = pd.concat([observations[split.train], evidence], ignore_index=True)
    heldout = observations[split.heldout].reset_index(drop=True)
    route = np.asarray(split.path, dtype=object)[split.heldout]
    if not set(route) <= {FIT, "calibrate_in"}:
        raise ValueError(f"forward_thin: a held-out cell without a path ({sorted(set(map(str, route)))})")
    rng = np.random.default_rng(seed)
    draws = from_fit(refit)
    atlas = np.full((draws.n_draws, len(heldout)), np.nan)
    reasons = np.array([None] * len(heldout), dtype=object)
    path = route.copy()
    on_fit, thin = route == FIT, route == "calibrate_in"
    info: dict = {"calibrated_models": 0, "calibrate_seconds": 0.0}
    if on_fit.any():
        atlas[:, on_fit], reasons[on_fit] = _atlas_ensemble(refit, heldout[on_fit].reset_index(drop=True), rng, draws)
    if thin.any():
        cal, cal_info = _calibrated_ensemble(refit, evidence, heldout[thin].reset_index(drop=True), rng, seed, draws)
        atlas[:, thin], path[thin], reasons[thin] = cal, cal_info.pop("path"), cal_info.pop("reasons")
        info.update(cal_info)
    heldout["path"] = path
    # The baselines have no reasoning structure: for a setting the model has no evidence at they predict the
    # model's evidence state with the most cells as is (issue 14's "pinned state as is"), so every method
    # scores the same cells and the unmeasured-setting path is compared, not dropped.
    proxy = (evidence.groupby(["model", "reasoning_state"]).size().rename("n").reset_index()
             .sort_values(["model", "n", "reasoning_state"], ascending=[True, False, True])
             .drop_duplicates("model").set_index("model")["reasoning_state"])
    as_baselines_see_it = heldout.copy()
    unmeasured = (heldout["path"] == CALIBRATED_UNMEASURED).to_numpy()
    as_baselines_see_it.loc[unmeasured, "reasoning_state"] = heldout.loc[unmeasured, "model"].map(proxy).to_numpy()
    ensembles = {"atlas": atlas}
    eci, timing = _eci_ensembles(known, as_baselines_see_it, validation_cfg, seed)
    ensembles.update(eci)
    ensembles["family_mean"] = baselines.family_mean_ensemble(known, as_baselines_see_it, rng, atlas.shape[0])
    ensembles["model_offset"] = baselines.model_offset_ensemble(known, as_baselines_see_it, rng, atlas.shape[0])
    out, scored, unscored = _score(split, heldout, {m: ensembles[m] for m in METHODS}, validation_cfg, reasons)
    placed = np.isfinite(atlas).all(axis=0)
    by_path = {}
    for name in (FIT, CALIBRATED, CALIBRATED_UNMEASURED):
        mine = (heldout["path"] == name).to_numpy()
        by_path[f"n_heldout_{name}"], by_path[f"n_predicted_{name}"] = int(mine.sum()), int((placed & mine).sum())
    by_path["thinned_models"] = len(split.info.get("thinned_models", []))
    by_path["fitted_new_models"] = len(split.info.get("fitted_new_models", []))
    return out, {**scored, **info, **timing, **by_path}, unscored


def _state_ensembles(refit, draws, post, heldout: pd.DataFrame, rng: np.random.Generator, seed: int
                     ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Hidden states' cells from the refit: `atlas` through the full reasoning structure (the model's own
    ladder amplitude and curvature, or the setting's learned spread; outputs/predicted_states.py), and two
    baselines: the model's pinned state as it is, and the pinned state plus the shared effect only."""
    from atlas_assets.outputs.cell_model import predictive
    from atlas_assets.outputs.draws import observation_items
    from atlas_assets.outputs.predicted_states import setting_order, state_phi

    si = refit.stan_input
    states = si.states
    pinned = states[states["pinned"]].set_index("model")
    shared = np.concatenate([np.zeros((draws.n_draws, 1)), post.shared_effect], axis=1)
    default, ladder, off = setting_order(si.config)  # every setting the program knows, observed or not
    code_of = {default: 0, **{r: i + 1 for i, r in enumerate(ladder)},
               **{r: len(ladder) + 1 + i for i, r in enumerate(off)}}
    family_pos = si.families.set_index("family")["family_pos"]
    items = observation_items(heldout)
    out = {name: np.full((draws.n_draws, len(heldout)), np.nan) for name in ("atlas", "pinned_state", "pinned_plus_shared")}
    reasons = np.array([None] * len(heldout), dtype=object)
    reasons[~heldout["family"].isin(family_pos.index).to_numpy()] = NOT_IN_REFIT_FAMILY
    for (model, state), rows in heldout.groupby(["model", "reasoning_state"], sort=True):
        if model not in pinned.index or state not in code_of:
            reasons[rows.index.to_numpy()] = ("model not in the refit" if model not in pinned.index
                                              else f"setting {state!r} unknown to the program")
            continue
        pin = pinned.loc[model]
        phi_pin = draws.phi[:, int(pin["state_pos"])]
        phis = {"atlas": state_phi(post, si, model, state, seed),
                "pinned_state": phi_pin,
                "pinned_plus_shared": phi_pin - shared[:, int(pin["setting_code"])] + shared[:, int(code_of[state])]}
        for family, cells in rows.groupby("family"):
            if family not in family_pos.index:
                continue
            j, cols = int(family_pos[family]), cells.index.to_numpy()
            lik = draws.family(j, si.families)
            for name, phi in phis.items():
                eta = draws.beta[:, [j]] * (np.repeat(phi[:, None], len(cols), axis=1) - draws.b[:, [j]])
                out[name][:, cols] = predictive(rng, eta, lik, items[cols])
    return out, reasons


def _unknown_label_check(refit, draws, post, heldout: pd.DataFrame, rng: np.random.Generator, seed: int,
                         intervals) -> dict[str, Any]:
    """The placement of unknown-setting runs (outputs/unknown_settings.py), validated on hidden states: half of
    each hidden state's cells (at least one; seeded) are relabelled 'unknown' and placed as a mixture over the
    model's refit states and the hidden setting, weighted by those cells; the other half are predicted from the
    mixture, from the true label through the structure (what a correct label would give), and from the pinned
    state as is. Scalars for validation_folds: cells, RMSE points, CRPS, 90% coverage per method, and the mean
    posterior weight the mixture puts on the true setting."""
    from atlas_assets.outputs.calibrate import likelihood_pieces
    from atlas_assets.outputs.cell_model import predictive
    from atlas_assets.outputs.draws import observation_items
    from atlas_assets.outputs.predicted_states import candidate_phi, state_phi
    from atlas_assets.outputs.unknown_settings import place
    from atlas_assets.validation.metrics import study_metrics

    si = refit.stan_input
    pinned = si.states[si.states["pinned"]].set_index("model")
    family_pos = si.families.set_index("family")["family_pos"]
    on_fit = heldout[heldout["family"].isin(family_pos.index)].reset_index(drop=True)
    items = observation_items(on_fit)
    targets, ensembles, true_weight = [], {"unknown_mixture": [], "true_label": [], "pinned_state": []}, []
    for (model, state), cells in on_fit.groupby(["model", "reasoning_state"], sort=True):
        if model not in pinned.index or len(cells) < 2:
            continue
        order = cells.index.to_numpy()[rng.permutation(len(cells))]
        evidence, target = order[: len(order) // 2], order[len(order) // 2:]
        candidates = list(dict.fromkeys(si.states.loc[si.states["model"] == model, "reasoning_state"].tolist() + [state]))
        pieces = likelihood_pieces(on_fit.loc[evidence], si.families)
        placed = place(model, candidates, candidate_phi(post, si, model, candidates, seed),
                       pieces[pieces["drop_reason"].isna()], draws, si.families, seed)
        true_weight.append(float(placed.weights[:, candidates.index(state)].mean()))
        phis = {"unknown_mixture": placed.phi, "true_label": state_phi(post, si, model, state, seed),
                "pinned_state": draws.phi[:, int(pinned.loc[model, "state_pos"])]}
        for i in target:
            j = int(family_pos[on_fit.at[i, "family"]])
            for name, phi in phis.items():
                eta = draws.beta[:, [j]] * (phi[:, None] - draws.b[:, [j]])
                ensembles[name].append(predictive(rng, eta, draws.family(j, si.families), items[[i]])[:, 0])
            targets.append(i)
    if not targets:
        return {"unknown_label_cells": 0}
    cells = on_fit.loc[targets].reset_index(drop=True)
    out: dict[str, Any] = {"unknown_label_cells": int((cells["kind"] == "bounded").sum()),
                           "unknown_label_true_setting_weight": round(float(np.mean(true_weight)), 4)}
    for name, columns in ensembles.items():
        scored = pd.concat([cells[["kind", "u"]], cell_scores(cells["u"].to_numpy(float), np.column_stack(columns),
                                                               intervals)], axis=1)
        m = study_metrics(scored, intervals)
        out.update({f"unknown_label_{name}_rmse_points": round(float(m["rmse_points"]), 3),
                    f"unknown_label_{name}_crps": round(float(m["crps"]), 5),
                    f"unknown_label_{name}_coverage_90": round(float(m["coverage_90"]), 4)})
    return out


def _state_predictions(split: Split, observations: pd.DataFrame, refit, validation_cfg, seed: int
                       ) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    train = observations[split.train].reset_index(drop=True)
    heldout = observations[split.heldout].reset_index(drop=True)
    rng = np.random.default_rng(seed)
    from atlas_assets.outputs.draws import from_fit
    from atlas_assets.outputs.predicted_states import reasoning_posterior

    draws, post = from_fit(refit), reasoning_posterior(refit.idata)  # once, for both the study and the unknown-label check
    ensembles, reasons = _state_ensembles(refit, draws, post, heldout, rng, seed)
    ensembles["family_mean"] = baselines.family_mean_ensemble(train, heldout, rng, ensembles["atlas"].shape[0])
    out, info, unscored = _score(split, heldout, ensembles, validation_cfg, reasons)
    intervals = [float(x) for x in validation_cfg["intervals"]]
    info.update(_unknown_label_check(refit, draws, post, heldout, np.random.default_rng(seed + 1), seed, intervals))
    return out, info, unscored


def _family_ranks(split: Split, observations: pd.DataFrame, refit, validation_cfg) -> pd.DataFrame:
    """Each held-out family's leaderboard predicted from capability alone (posterior mean of the refit's
    state capability), against the mean standardised score over the kept families."""
    from atlas_assets.model.scores import draws_of

    si = refit.stan_input
    phi = pd.Series(draws_of(refit.idata, "phi").mean(axis=0),
                    index=pd.MultiIndex.from_frame(si.states.sort_values("state_pos")[["model", "reasoning_state"]]))
    baseline = baselines.mean_standardized_capability(observations[split.train])
    rows = []
    heldout = observations[split.heldout]
    for family, cells in heldout.groupby("family"):
        keys = list(zip(cells["model"], cells["reasoning_state"]))
        have = np.array([k in phi.index and k in baseline.index for k in keys])
        if have.sum() < int(validation_cfg["family"]["min_states"]):
            continue
        u = cells["u"].to_numpy(float)[have]
        kept = [k for k, h in zip(keys, have) if h]
        for method, values in (("atlas", phi), ("mean_standardized", baseline)):
            rows.append({"fold": split.fold, "family": family, "method": method,
                         **rank_agreement(values.loc[kept].to_numpy(float), u)})
    return pd.DataFrame(rows)


def _sensitivity(split: Split, refit_dir: Path, production_dir: Path, validation_cfg) -> pd.DataFrame:
    from atlas_assets.model.fit_process import read_table

    top = int(validation_cfg["sensitivity"]["top"])

    def ranks(folder: Path) -> pd.Series:
        scores = read_table(folder / "model_scores.parquet")
        scores = scores[scores["headline_status"] == "published"].sort_values("display_mean", ascending=False)
        return pd.Series(np.arange(1, len(scores) + 1), index=scores["model"].to_numpy())

    before, after = ranks(production_dir), ranks(refit_dir)
    leaders = before.index[:top]
    shift = pd.Series({m: abs(int(after.get(m, len(after) + 1)) - int(before[m])) for m in leaders})
    worst = shift.idxmax()
    return pd.DataFrame([{"dropped_family": split.info["dropped_family"],
                          "n_observations_dropped": split.info["n_observations_dropped"],
                          "max_top20_rank_shift": int(shift.max()), "model": worst,
                          "mean_top20_rank_shift": float(shift.mean())}])


def _active_scores(refit_dir: Path, production_dir: Path) -> pd.DataFrame:
    """Each state's score in the active-panel refit beside its all-history (production) score, both on the
    anchors' display units (the anchors are in both fits), and the change."""
    from atlas_assets.model.fit_process import read_table

    keys = ["model", "reasoning_state"]
    columns = keys + ["eligible", "n_families", "display_mean", "display_lower", "display_upper"]
    active = read_table(refit_dir / "state_scores.parquet")[columns]
    history = read_table(production_dir / "state_scores.parquet")[columns]
    out = history.merge(active, on=keys, how="left", suffixes=("_all_history", "_active"))
    out["in_active_fit"] = out["display_mean_active"].notna()
    out["change"] = out["display_mean_active"] - out["display_mean_all_history"]
    return out


def run_fold(fold: str, production_dir: str | Path, validation_cfg: Mapping[str, Any], fold_root: str | Path,
             fitter: Fitter | None = None, log: Callable[[str], None] = print) -> FoldResult:
    """Split, refit (or reuse), and score one fold against the production fit in `production_dir`."""
    from atlas_assets.model.fit_process import load_fit

    production_dir = Path(production_dir)
    production_cfg = json.loads((production_dir / "model_config.json").read_text())
    observations = pd.read_csv(production_dir / "modeled_observations.csv")
    index_states = pd.read_csv(production_dir / "index_states.csv")
    pinned = set(zip(index_states.loc[index_states["pinned"], "model"], index_states.loc[index_states["pinned"], "reasoning_state"]))
    split = make_split(fold, observations, validation_cfg, references(production_cfg), pinned)
    fold_dir = Path(fold_root) / fold
    t0 = time.perf_counter()
    fit_dir, reused = _refit(split, observations, production_dir, production_cfg, validation_cfg, fold_dir,
                             fitter or in_process_fitter(), log)
    refit = load_fit(fit_dir)
    diagnostics = json.loads((fit_dir / "diagnostics.json").read_text())
    info = {"study": split.study, "fold": fold, "n_train": int(split.train.sum()),
            "n_heldout": int(split.heldout.sum()), "n_dropped": int(split.dropped.sum()), "n_scored": 0,
            "n_evidence": int(split.evidence.sum()) if split.evidence is not None else 0,
            "max_rhat": diagnostics.get("max_rhat"), "min_ess_bulk": diagnostics.get("min_ess_bulk"),
            "divergences": diagnostics.get("divergences"), "sample_seconds": diagnostics.get("sample_seconds"),
            "leapfrog": diagnostics.get("n_gradient_evals"), "reused": reused, "fit_dir": str(fit_dir),
            "split": json.dumps(split.info, default=str)}
    seed = int(validation_cfg["seed"]) + int(hashlib.sha256(fold.encode()).hexdigest()[:6], 16) % 100_000
    result = FoldResult(fold, split.study, info, pd.DataFrame())
    if split.study in ("forward", "forward_strict", "masked", "forward_active"):
        result.predictions, extra, result.unscored = _predictions(split, observations, refit, validation_cfg, seed)
        info.update(extra)
    elif split.study == "forward_thin":
        result.predictions, extra, result.unscored = _thin_predictions(split, observations, refit, validation_cfg, seed)
        info.update(extra)
    elif split.study == "masked_state":
        result.predictions, extra, result.unscored = _state_predictions(split, observations, refit, validation_cfg, seed)
        info.update(extra)
    elif split.study == "family":
        result.family_ranks = _family_ranks(split, observations, refit, validation_cfg)
        info["n_scored"] = int(result.family_ranks["family"].nunique()) if len(result.family_ranks) else 0
    elif split.study == "sensitivity":
        result.sensitivity = _sensitivity(split, fit_dir, production_dir, validation_cfg)
    elif split.study == "active_panel":
        result.active_scores = _active_scores(fit_dir, production_dir)
        info["n_scored"] = int(len(result.active_scores))
    info["fold_seconds"] = round(time.perf_counter() - t0, 1)
    return result
