"""Predicted reasoning settings (issue 14): capability of a fitted model at a setting nobody measured.

"What would this model score at high effort, when only its max-effort run was published?" The fit
already holds the answer's structure (stan/atlas.stan, transformed parameters):

    phi_s = theta_m + shared[r]                                   (shared[default] = 0)
            + amp_m (L[l] - L[l_pin]) + curv_m (Q[l] - Q[l_pin])  ladder level l (minimal .. max)
            + offdev_sd[r] dev_z_s                                off-ladder setting r (disabled, enabled)

with L, Q the orthonormal linear / quadratic contrasts (`stan_data.orthogonal_contrasts`),
l_pin the level of the model's pinned state when that is on the ladder (else 0 is subtracted),
amp_m = amp_sd amp_z_m and curv_m = curv_sd curv_z_m only for models with a non-pinned ladder
state, and the pinned state without any per-model term. For a (model, setting) the fit has,
`phi_draws` rebuilds exactly the fit's phi from these primitives (tests/outputs/test_predicted_states.py
and bench/bench_predicted_states.py check it to 1e-8 on the production fit); for one it lacks,
the same formula with the missing per-model terms drawn, per posterior draw, from their
hierarchical prior at that draw's scales: (amp_m, curv_m) ~ N(0, amp_sd), N(0, curv_sd) once per
model (shared by all its predicted levels, as in the program) when the model has no ladder terms,
and dev ~ N(0, offdev_sd[r]) for an off-ladder setting; `default` is theta itself. That is the
posterior predictive of a new state of a fitted model: its capability is as certain as theta, the
setting's shared effect and the model's own amplitude are, plus the learned spread of what the
data cannot tell.

Which (model, setting) are predicted (`setting_plausibility`): only settings the model plausibly
has. The registry says little about that: models.yaml `no_reasoning_mode` (no setting but default)
and `reasoning_products` (thinking cannot be turned off). Everything else is the rule below, stated
in each row's `basis`:
  1. `default` for every model without an observed one (every API model has a default; theta is
     the capability there by the program's identification);
  2. nothing else for a model no published identifier names a reasoning setting of (registry ids
     or the fit's states): a reasoning mode is never assumed (GPT-2 has no `high`);
  3. for a model with one, the settings its provider (first organization in `registry_models`)
     has published for a model released on or before it (providers introduce levels and keep
     them: OpenAI `minimal` with GPT-5, `none` with GPT-5.1, `xhigh` with GPT-5.2; Anthropic `max`
     with Opus 4.6), so o3 gets no `xhigh` and Claude no `disabled` (its default is thinking off).
     Only dated publications date a level; a model without a release date gets all its provider's
     levels; a model without an organization gets none (the registry would have to name it).
Over-inclusion (a model that dropped a level its provider kept) is possible; every row is flagged
"predicted setting", never rank-eligible and never a headline.

An `_unknown`-setting run of a fitted model is placed as a mixture over its observed and plausible
settings (`unknown_setting_candidates`, `candidate_phi`; the mixture itself: outputs/unknown_settings.py).

Pure functions of arrays and frames; the Dagster asset is `atlas_assets.defs.outputs.predicted_states`.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from atlas_assets.outputs.draws import PosteriorDraws, thin_index

STATUS = "predicted setting"
NOTE = ("predicted setting: never measured; capability from the fit's structure (theta + shared effect of the "
        "setting + the model's ladder terms or an off-ladder deviation from the learned spread); never a headline")
RECONSTRUCTION_TOLERANCE = 1e-8


# ----------------------------------------------------------------------------------------------- posterior


@dataclass(frozen=True)
class ReasoningPosterior:
    """The primitives phi is built from, per draw (draw first), indexed like the fit's StanInput."""

    theta: np.ndarray          # (D, M) base capability (default-state equivalent), `StanInput.models` order
    shared_effect: np.ndarray  # (D, L + K) `StanInput.settings` order (ladder, then off-ladder)
    amp_sd: np.ndarray         # (D,)
    curv_sd: np.ndarray        # (D,)
    amp_z: np.ndarray          # (D, A) per-model ladder amplitude (standardised), `state_amp` index - 1
    curv_z: np.ndarray         # (D, A)
    offdev_sd: np.ndarray      # (D, K) learned spread of each off-ladder setting
    dev_z: np.ndarray          # (D, D_dev) per-state off-ladder deviation (standardised), `state_dev` - 1

    @property
    def n_draws(self) -> int:
        return self.theta.shape[0]

    def take(self, keep: np.ndarray) -> "ReasoningPosterior":
        return ReasoningPosterior(**{name: getattr(self, name)[keep] for name in self.__dataclass_fields__})

    def thin(self, max_draws: int) -> "ReasoningPosterior":
        """The same evenly spaced draws as `PosteriorDraws.thin` (so both stay aligned draw by draw)."""
        keep = thin_index(self.n_draws, max_draws)
        return self if len(keep) == self.n_draws else self.take(keep)


def reasoning_posterior(idata) -> ReasoningPosterior:
    """ReasoningPosterior of an ArviZ posterior of stan/atlas.stan (all draws, chains concatenated)."""
    post = idata.posterior
    n = post.sizes["chain"] * post.sizes["draw"]

    def flat(name: str, width: bool = True) -> np.ndarray:
        if name not in post:
            return np.zeros((n, 0)) if width else np.zeros(n)
        v = post[name].values
        v = v.reshape((n,) + v.shape[2:])
        return v.reshape(n, -1) if width else v.reshape(n)

    return ReasoningPosterior(
        theta=flat("theta"), shared_effect=flat("shared_effect"), amp_sd=flat("amp_sd", False),
        curv_sd=flat("curv_sd", False), amp_z=flat("amp_z"), curv_z=flat("curv_z"), offdev_sd=flat("offdev_sd"),
        dev_z=flat("dev_z"))


# ----------------------------------------------------------------------------------------------- layout


def setting_order(config: Mapping[str, Any]) -> tuple[str, list[str], list[str]]:
    """(default, ladder, off-ladder) of a model config's `reasoning` section."""
    r = config["reasoning"]
    return r.get("default", "default"), list(r["ladder"]), list(r["off_ladder"])


def state_layout(si, pairs: pd.DataFrame) -> pd.DataFrame:
    """How the program builds phi for each (model, reasoning_state) of `pairs`, observed or not.

    Columns: model, reasoning_state, model_pos, setting_code (0 default, 1..L ladder, L+1..L+K
    off-ladder), observed, state_pos (-1 if not), pinned, d_lin, d_quad (contrasts minus the pinned
    level's; computed here from `orthogonal_contrasts`, not read from the data), ladder_terms
    (`posterior`: the model's own amp/curv; `prior`: drawn; `none`), amp_pos (0-based, -1), deviation
    (`posterior` / `prior` / `none`), dev_pos (0-based, -1), dev_setting (0-based off-ladder index, -1).
    """
    from atlas_assets.model.stan_data import orthogonal_contrasts

    default, ladder, off = setting_order(si.config)
    L = len(ladder)
    code_of = {default: 0, **{s: i + 1 for i, s in enumerate(ladder)}, **{s: L + 1 + i for i, s in enumerate(off)}}
    lin, quad = orthogonal_contrasts(L)
    st = si.states
    model_pos = dict(zip(si.models["model"], si.models["theta_pos"]))
    pin_code = st.loc[st["pinned"]].set_index("model")["setting_code"].to_dict()
    amp_of = st.loc[st["amp_index"] > 0].groupby("model")["amp_index"].first().to_dict()
    observed = {(m, r): i for i, (m, r) in enumerate(zip(st["model"], st["reasoning_state"]))}
    rows = []
    for model, state in zip(pairs["model"], pairs["reasoning_state"]):
        if model not in model_pos:
            raise KeyError(f"model {model!r} is not in the fit")
        if state not in code_of:
            raise KeyError(f"setting {state!r} is not one the fit knows ({list(code_of)})")
        code, pos = code_of[state], observed.get((model, state), -1)
        row = st.iloc[pos] if pos >= 0 else None
        pinned = bool(row["pinned"]) if row is not None else False
        d_lin = d_quad = 0.0
        ladder_terms, amp_pos, deviation, dev_pos, dev_setting = "none", -1, "none", -1, -1
        if 1 <= code <= L and not pinned:
            pc = pin_code[model]
            base_lin, base_quad = (lin[pc - 1], quad[pc - 1]) if 1 <= pc <= L else (0.0, 0.0)
            d_lin, d_quad = lin[code - 1] - base_lin, quad[code - 1] - base_quad
            if model in amp_of:
                ladder_terms, amp_pos = "posterior", int(amp_of[model]) - 1
            else:
                ladder_terms = "prior"
        elif code > L and not pinned:
            dev_setting = code - L - 1
            if row is not None:
                deviation, dev_pos = "posterior", int(row["dev_index"]) - 1
            else:
                deviation = "prior"
        rows.append({"model": model, "reasoning_state": state, "model_pos": int(model_pos[model]),
                     "setting_code": code, "observed": pos >= 0, "state_pos": pos, "pinned": pinned,
                     "d_lin": float(d_lin), "d_quad": float(d_quad), "ladder_terms": ladder_terms, "amp_pos": amp_pos,
                     "deviation": deviation, "dev_pos": dev_pos, "dev_setting": dev_setting})
    return pd.DataFrame(rows, columns=["model", "reasoning_state", "model_pos", "setting_code", "observed", "state_pos",
                                       "pinned", "d_lin", "d_quad", "ladder_terms", "amp_pos", "deviation", "dev_pos",
                                       "dev_setting"])


# ----------------------------------------------------------------------------------------------- phi


def model_rng(seed: int, model: str) -> np.random.Generator:
    """A stream per model: its predicted draws do not depend on which other pairs are asked for."""
    return np.random.default_rng([int(seed), zlib.crc32(model.encode()), 14])


def phi_draws(post: ReasoningPosterior, layout: pd.DataFrame, seed: int = 0) -> np.ndarray:
    """(D, len(layout)) capability draws of each (model, setting) of `state_layout`.

    Observed states: exactly the fit's phi (no randomness). Missing per-model terms: one prior draw
    per posterior draw from the model's own stream — (amp, curv) once per model, shared by all its
    predicted ladder levels, and one deviation per off-ladder setting — always drawn in the same
    order and number, so a pair's draws depend only on (seed, model, setting, posterior draws).
    """
    D = post.n_draws
    shared_full = np.concatenate([np.zeros((D, 1)), post.shared_effect], axis=1)
    mp = layout["model_pos"].to_numpy(dtype=int)
    out = post.theta[:, mp] + shared_full[:, layout["setting_code"].to_numpy(dtype=int)]
    K = post.offdev_sd.shape[1]
    prior_terms: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for i, row in enumerate(layout.itertuples(index=False)):
        if row.ladder_terms == "posterior":
            amp = post.amp_sd * post.amp_z[:, row.amp_pos]
            curv = post.curv_sd * post.curv_z[:, row.amp_pos]
        elif row.ladder_terms == "prior" or row.deviation == "prior":
            if row.model not in prior_terms:
                rng = model_rng(seed, row.model)
                prior_terms[row.model] = (rng.standard_normal(D), rng.standard_normal(D),
                                          rng.standard_normal((D, K)))
            z_amp, z_curv, z_dev = prior_terms[row.model]
            amp, curv = post.amp_sd * z_amp, post.curv_sd * z_curv
        if row.ladder_terms != "none":
            out[:, i] += amp * row.d_lin + curv * row.d_quad
        if row.deviation == "posterior":
            out[:, i] += post.offdev_sd[:, row.dev_setting] * post.dev_z[:, row.dev_pos]
        elif row.deviation == "prior":
            out[:, i] += post.offdev_sd[:, row.dev_setting] * prior_terms[row.model][2][:, row.dev_setting]
    return out


def state_phi(post: ReasoningPosterior, si, model: str, setting: str, seed: int = 0) -> np.ndarray:
    """(D,) capability draws of one (model, setting) of a fit: what a masked-state validation study compares a
    held-out state's scores with (the refit's posterior and StanInput in, the state's phi draws out)."""
    layout = state_layout(si, pd.DataFrame({"model": [model], "reasoning_state": [setting]}))
    return phi_draws(post, layout, seed)[:, 0]


def reconstruction_error(post: ReasoningPosterior, si, phi: np.ndarray) -> float:
    """Largest |rebuilt phi - fit's phi| over every observed state and draw (the formula's proof on a fit)."""
    layout = state_layout(si, si.states[["model", "reasoning_state"]])
    return float(np.max(np.abs(phi_draws(post, layout) - phi)))


# ----------------------------------------------------------------------------------------------- plausibility


def provider_of(organization) -> str | None:
    """The first listed organization ("Google DeepMind,Google" -> "Google DeepMind"), None when unknown."""
    if organization is None or (isinstance(organization, float) and np.isnan(organization)):
        return None
    first = str(organization).split(",")[0].strip()
    return first or None


def setting_plausibility(fitted_states: pd.DataFrame, config: Mapping[str, Any],
                         registry_models: pd.DataFrame | None = None, registry_ids: pd.DataFrame | None = None,
                         no_reasoning_mode: Iterable[str] = (), reasoning_products: Iterable[str] = (),
                         release_dates: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """One row per fitted model x setting the fit does NOT have: plausible (bool), basis (why, either way),
    provider, setting_kind. See the module docstring for the rule.

    `fitted_states`: the fit's (model, reasoning_state) rows; `registry_models`: model, organization, released_on;
    `registry_ids`: model, reasoning_state of every published identifier (NULL states ignored); `release_dates`:
    fallback release date per model (e.g. `StanInput.models.released_on`) where the registry has none.
    """
    default, ladder, off = setting_order(config)
    settings = [default] + ladder + off
    kind = {default: "default", **{s: "ladder" for s in ladder}, **{s: "off_ladder" for s in off}}
    no_mode, products = set(no_reasoning_mode), set(reasoning_products)
    models = sorted(fitted_states["model"].unique())

    reg = registry_models if registry_models is not None else pd.DataFrame(columns=["model", "organization", "released_on"])
    provider = {m: provider_of(o) for m, o in zip(reg["model"], reg["organization"])}
    released = {m: pd.to_datetime(d, errors="coerce") for m, d in (release_dates or {}).items()}
    released.update({m: pd.to_datetime(d, errors="coerce") for m, d in zip(reg["model"], reg["released_on"])
                     if pd.notna(pd.to_datetime(d, errors="coerce"))})

    published = [fitted_states[["model", "reasoning_state"]]]
    if registry_ids is not None and len(registry_ids):
        published.append(registry_ids[["model", "reasoning_state"]])
    published = pd.concat(published, ignore_index=True).dropna().drop_duplicates()
    published = published[published["reasoning_state"].isin(settings) & (published["reasoning_state"] != default)]
    named = published.groupby("model")["reasoning_state"].agg(set).to_dict()

    # per (provider, setting): the published models with their release dates (NaT: undated, counts for all)
    by_provider: dict[tuple[str, str], list[tuple[pd.Timestamp, str]]] = {}
    for m, r in zip(published["model"], published["reasoning_state"]):
        p = provider.get(m)
        if p is not None:
            by_provider.setdefault((p, r), []).append((released.get(m, pd.NaT), m))

    observed = set(zip(fitted_states["model"], fitted_states["reasoning_state"]))
    rows = []
    for m in models:
        p, date = provider.get(m), released.get(m, pd.NaT)
        for r in settings:
            if (m, r) in observed:
                continue
            ok, basis = _plausible(m, r, default, p, date, no_mode, products, named, by_provider)
            rows.append({"model": m, "reasoning_state": r, "setting_kind": kind[r], "provider": p,
                         "plausible": ok, "basis": basis})
    return pd.DataFrame(rows, columns=["model", "reasoning_state", "setting_kind", "provider", "plausible", "basis"])


def _plausible(model, setting, default, provider, date, no_mode, products, named, by_provider) -> tuple[bool, str]:
    if setting == default:
        return True, "default: every API model has one (no setting named); its capability is the model's theta"
    if model in no_mode:
        return False, "registry (models.yaml no_reasoning_mode): the model has no reasoning setting"
    if model in products and setting == "disabled":
        return False, "registry (models.yaml reasoning_products): a reasoning product; thinking cannot be turned off"
    if model not in named:
        return False, "no published identifier names a reasoning setting of this model: a reasoning mode is not assumed"
    if provider is None:
        return False, "provider unknown (registry_models.organization): no provider's levels to draw on"
    seen = by_provider.get((provider, setting), [])
    if not seen:
        return False, f"{provider} has published no model at {setting}"
    if pd.isna(date):
        first = min(seen, key=lambda x: (pd.isna(x[0]), x[0] if pd.notna(x[0]) else pd.Timestamp.max, x[1]))
        return True, f"{provider} publishes {setting} ({first[1]}); the model's release date is unknown"
    # an undated publication says nothing about when the level arrived: only dated ones on or before count
    dated = sorted(x for x in seen if pd.notna(x[0]))
    earlier = [x for x in dated if x[0] <= date]
    if not earlier:
        if not dated:
            return False, (f"{provider} published {setting} only for undated models ({seen[0][1]}): not before "
                           f"this model's release ({date:%Y-%m-%d})")
        return False, (f"{provider} first published {setting} for {dated[0][1]} ({dated[0][0]:%Y-%m-%d}), after this "
                       f"model's release ({date:%Y-%m-%d})")
    first = earlier[0]
    return True, (f"{provider} publishes {setting} since {first[1]} ({first[0]:%Y-%m-%d}), on or before this "
                  f"model's release")


# ----------------------------------------------------------------------------------------------- tables


def headline_display(draws: PosteriorDraws, states: pd.DataFrame, eligible: np.ndarray) -> pd.DataFrame:
    """Display draws (D, H) of each fitted model's headline state (as `scores.headline_states`), columns by model."""
    mean = draws.phi.mean(axis=0)
    st = states.reset_index(drop=True).assign(_mean=mean, _pos=np.arange(len(states)))[np.asarray(eligible, bool)]
    head = st.loc[st.groupby("model")["_mean"].idxmax(), ["model", "_pos"]]
    return pd.DataFrame(draws.display(draws.phi[:, head["_pos"].to_numpy()]), columns=head["model"].to_numpy())


def predicted_state_table(pairs: pd.DataFrame, layout: pd.DataFrame, phi: np.ndarray, draws: PosteriorDraws,
                          states: pd.DataFrame, eligible: np.ndarray, interval: float, top_k: int) -> pd.DataFrame:
    """One row per predicted (model, setting): latent and display summaries (display per draw, the fit's scale),
    rank probabilities among the OTHER models' headline states (where the model would stand at this setting),
    P(above the model's own headline), basis and how its terms were obtained. Never eligible."""
    from atlas_assets.model.scores import _summ

    out = pairs[["model", "reasoning_state", "setting_kind", "provider", "basis"]].reset_index(drop=True).copy()
    out.insert(2, "pred_pos", np.arange(len(out)))
    out["status"] = STATUS
    out["ladder_terms"] = layout["ladder_terms"].to_numpy()
    out["deviation"] = layout["deviation"].to_numpy()
    observed = states.groupby("model")["reasoning_state"].agg(lambda s: ", ".join(s))
    out["observed_states"] = out["model"].map(observed)
    out["pinned_state"] = out["model"].map(states.loc[states["pinned"]].set_index("model")["reasoning_state"])
    out["pinned"], out["eligible"], out["is_reference"] = False, False, False
    out["n_obs"], out["n_families"] = 0, 0
    disp = draws.display(phi)
    for prefix, arr in (("latent", phi), ("display", disp)):
        for k, v in _summ(arr, interval).items():
            out[f"{prefix}_{k}"] = v
    heads = headline_display(draws, states, eligible)
    owners = heads.columns.to_numpy(dtype=object)
    pop = heads.to_numpy()
    p1, ptop, erank, above = (np.full(len(out), np.nan) for _ in range(4))
    for i, model in enumerate(out["model"]):
        rank = 1 + (pop[:, owners != model] > disp[:, [i]]).sum(axis=1)
        p1[i], ptop[i], erank[i] = (rank == 1).mean(), (rank <= top_k).mean(), rank.mean()
        if model in heads:
            above[i] = (disp[:, i] > heads[model].to_numpy()).mean()
    out["p_rank1"], out[f"p_top{top_k}"], out["expected_rank"] = p1, ptop, erank
    out["p_above_model_headline"] = above
    out["interval"] = interval
    out["note"] = NOTE
    return out


def predicted_cells(pred: pd.DataFrame, phi: np.ndarray, draws: PosteriorDraws, families: pd.DataFrame,
                    observations: pd.DataFrame, states: pd.DataFrame, cfg: Mapping[str, Any],
                    scales: pd.DataFrame | None = None) -> pd.DataFrame:
    """The columns of `cell_predictions` for every predicted state x fitted family, from `cell_predictions` itself:
    the predicted states are appended to the fit's as its only eligible states (so every one of their cells is an
    unobserved cell, predicted with the family's typical item count), the fit's own cells dropped afterwards.
    `state_pos` is the predicted state's `pred_pos`; a random stream of its own (seed + 14)."""
    from atlas_assets.outputs.cell_predictions import cell_predictions

    S, P = draws.phi.shape[1], phi.shape[1]
    joined = replace(draws, phi=np.concatenate([draws.phi, phi], axis=1))
    all_states = pd.concat([states[["model", "reasoning_state"]], pred[["model", "reasoning_state"]]], ignore_index=True)
    eligible = np.concatenate([np.zeros(S, bool), np.ones(P, bool)])
    own = {**cfg, "draws": {**cfg["draws"], "seed": int(cfg["draws"]["seed"]) + 14}}
    cells = cell_predictions(joined, families, observations, all_states, eligible, own, scales)
    cells = cells[cells["state_pos"] >= S].copy()
    cells["state_pos"] -= S
    cells["pred_pos"] = cells["state_pos"]
    cells["eligible"] = False
    cells["status"] = STATUS
    return cells.reset_index(drop=True)


# ----------------------------------------------------------------------------------------------- all of it


@dataclass(frozen=True)
class PredictedStates:
    states: pd.DataFrame       # predicted_states rows
    cells: pd.DataFrame        # predicted_state_cells rows
    exclusions: pd.DataFrame   # unobserved (model, setting) pairs NOT predicted, with the reason
    phi: np.ndarray            # (D, P) aligned with the fit's (thinned) draws
    reconstruction_error: float
    seconds: float


def predict_states(post: ReasoningPosterior, draws: PosteriorDraws, si, outputs_cfg: Mapping[str, Any],
                   plausibility: pd.DataFrame, eligible: np.ndarray, scales: pd.DataFrame | None = None,
                   seed: int | None = None) -> PredictedStates:
    """Every plausible unobserved (model, setting) of `plausibility`: phi draws, the state table and its cells.
    `post` and `draws` must hold the same draws (thin both with the same max_draws)."""
    start = time.perf_counter()
    if post.n_draws != draws.n_draws:
        raise ValueError(f"posterior primitives have {post.n_draws} draws, PosteriorDraws {draws.n_draws}: thin both alike")
    seed = int(outputs_cfg["draws"]["seed"]) if seed is None else int(seed)
    err = reconstruction_error(post, si, draws.phi)
    pairs = plausibility[plausibility["plausible"]].reset_index(drop=True)
    layout = state_layout(si, pairs)
    phi = phi_draws(post, layout, seed)
    display_cfg = si.config["display"]
    table = predicted_state_table(pairs, layout, phi, draws, si.states, eligible,
                                  float(display_cfg.get("interval", 0.9)), int(display_cfg.get("top_k", 10)))
    cells = predicted_cells(table, phi, draws, si.families, si.observations, si.states, outputs_cfg, scales)
    exclusions = plausibility[~plausibility["plausible"]].drop(columns="plausible").rename(columns={"basis": "reason"})
    return PredictedStates(table, cells, exclusions.reset_index(drop=True), phi, err, time.perf_counter() - start)


# ----------------------------------------------------------------------------------------------- unknown settings


def unknown_setting_candidates(states: pd.DataFrame, plausibility: pd.DataFrame, model: str) -> list[str]:
    """The settings an unknown-setting run of `model` may have used: its observed states and its plausible
    predicted ones, in the fit's setting order (`states`: the fit's; `plausibility`: `setting_plausibility`)."""
    seen = states.loc[states["model"] == model, "reasoning_state"].tolist()
    more = plausibility.loc[(plausibility["model"] == model) & plausibility["plausible"], "reasoning_state"].tolist()
    return seen + [s for s in more if s not in seen]


def candidate_phi(post: ReasoningPosterior, si, model: str, candidates: Sequence[str], seed: int = 0) -> np.ndarray:
    """(D, C) capability draws of fitted `model` at each candidate setting: the fit's own phi where observed, the
    structure's prediction (`phi_draws`) otherwise; what an unknown-setting run is mixed over
    (outputs/unknown_settings.py)."""
    layout = state_layout(si, pd.DataFrame({"model": model, "reasoning_state": list(dict.fromkeys(candidates))}))
    return phi_draws(post, layout, seed)
