"""Capability scores, rank probabilities and reasoning effects from a fit.

All functions take the posterior (ArviZ InferenceData from engines.fit_model)
and the `StanInput` that produced the data, and return pandas DataFrames.

Display scale: two reference reasoning states are mapped to two configured
values by an affine map computed in EVERY draw,
    display = v_lo + (phi - phi_ref_lo) * (v_hi - v_lo) / (phi_ref_hi - phi_ref_lo),
so the reference states land exactly on their values in every draw and the
uncertainty of the scale itself is carried by every other score.

Headline per model: among its rank-eligible states, the one with the highest
posterior mean capability; the model's score is then that one fixed state's
posterior (no per-draw maximum). Ranks are computed per draw over models'
headline states. A model in the fit with no eligible state keeps a row with
`headline_status` saying why (no scores, no rank) instead of vanishing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from atlas_assets.model.stan_data import StanInput, state_labels


def draws_of(idata, name: str) -> np.ndarray:
    """(n_chain * n_draw, ...) array of a posterior variable."""
    da = idata.posterior[name]
    v = da.values
    return v.reshape((v.shape[0] * v.shape[1],) + v.shape[2:])


# --------------------------------------------------------------------------- eligibility


def rank_eligible(si: StanInput, config: Mapping[str, Any] | None = None) -> np.ndarray:
    """Boolean per state (Stan order): enough families and observations, and a
    setting not excluded by config."""
    cfg = (config or si.config).get("eligibility", {})
    st = si.states
    ok = (st["n_families"] >= int(cfg.get("min_families", 1))) & (
        st["n_obs"] >= int(cfg.get("min_observations", 1))
    )
    excl = set(cfg.get("exclude_settings", []) or [])
    ok &= ~st["reasoning_state"].isin(excl)
    return ok.to_numpy()


# --------------------------------------------------------------------------- display scale


@dataclass
class DisplayScale:
    lo_state: int          # Stan-order position of the low reference state
    hi_state: int
    lo_value: float
    hi_value: float
    scale: np.ndarray      # per draw: display units per latent unit
    offset: np.ndarray     # per draw: display = offset + scale * phi

    def apply(self, latent: np.ndarray) -> np.ndarray:
        """Map latent capability draws (draw, ...) to the display scale."""
        shape = (-1,) + (1,) * (latent.ndim - 1)
        return self.offset.reshape(shape) + self.scale.reshape(shape) * latent

    def apply_difference(self, latent_diff: np.ndarray) -> np.ndarray:
        shape = (-1,) + (1,) * (latent_diff.ndim - 1)
        return self.scale.reshape(shape) * latent_diff


class DisplayReferenceError(ValueError):
    """The display scale cannot be fixed: a reference state is unnamed, absent, not eligible, or the two
    references swap order in some draw. There is no fallback: a silently substituted reference would move
    every published number."""


REFERENCE_NOTE = ("reference state: fixed at {value:g} by the definition of the display scale, so its interval is "
                  "zero by construction (its uncertainty is carried by every other score)")


def resolve_reference_states(si: StanInput, config: Mapping[str, Any] | None = None) -> tuple[int, int]:
    """Stan positions of the two configured reference states (model, reasoning state), each of which must be
    in the fit and rank-eligible; raises DisplayReferenceError naming what is missing."""
    cfg = (config or si.config)["display"]["reference"]
    labels = state_labels(si.states).to_numpy()
    eligible = rank_eligible(si, config)
    out = []
    for key in ("low", "high"):
        ref = cfg.get(key) or {}
        model, state = ref.get("model"), ref.get("reasoning_state")
        if not model or not state:
            raise DisplayReferenceError(f"display.reference.{key} names no (model, reasoning_state) in the model config")
        hit = np.flatnonzero(labels == f"{model}|{state}")
        if not len(hit):
            known = sorted(si.states.loc[si.states.model == model, "reasoning_state"])
            raise DisplayReferenceError(
                f"display reference {key} {model}|{state} is not in the fit"
                + (f" (the model's states in the fit: {known})" if known else " (the model is not in the fit)"))
        pos = int(hit[0])
        if not eligible[pos]:
            row = si.states.iloc[pos]
            raise DisplayReferenceError(
                f"display reference {key} {model}|{state} is not rank-eligible ({int(row.n_families)} families, "
                f"{int(row.n_obs)} observations): a reference must be well measured")
        out.append(pos)
    if out[0] == out[1]:
        raise DisplayReferenceError("the two display reference states coincide")
    return out[0], out[1]


def display_scale(
    phi: np.ndarray,
    lo_state: int,
    hi_state: int,
    lo_value: float,
    hi_value: float,
) -> DisplayScale:
    if not hi_value > lo_value:
        raise DisplayReferenceError(f"the high reference value {hi_value} must exceed the low one {lo_value}")
    gap = phi[:, hi_state] - phi[:, lo_state]
    flipped = int(np.sum(~(gap > 0)))
    if flipped:
        # In such a draw the affine map would reverse (or collapse) the whole scale: the references do not
        # order the states, so the posterior cannot be displayed in these units.
        raise DisplayReferenceError(
            f"the high display reference is at or below the low one in {flipped} of {len(gap)} draws: "
            "choose references whose order the data settle")
    scale = (hi_value - lo_value) / gap
    offset = lo_value - scale * phi[:, lo_state]
    return DisplayScale(lo_state, hi_state, float(lo_value), float(hi_value), scale, offset)


def make_display_scale(idata, si: StanInput, config: Mapping[str, Any] | None = None) -> DisplayScale:
    cfg = config or si.config
    phi = draws_of(idata, "phi")
    lo, hi = resolve_reference_states(si, cfg)
    ref = cfg["display"]["reference"]
    return display_scale(phi, lo, hi, float(ref["low"]["value"]), float(ref["high"]["value"]))


# --------------------------------------------------------------------------- summaries


def _summ(draws: np.ndarray, interval: float) -> dict[str, np.ndarray]:
    a = (1 - interval) / 2
    q = np.quantile(draws, [a, 0.5, 1 - a], axis=0)
    return {"mean": draws.mean(axis=0), "median": q[1], "lower": q[0], "upper": q[2], "sd": draws.std(axis=0)}


def state_scores(idata, si: StanInput, config: Mapping[str, Any] | None = None,
                 scale: DisplayScale | None = None) -> pd.DataFrame:
    """One row per reasoning state: latent and display posterior summaries."""
    cfg = config or si.config
    interval = float(cfg["display"].get("interval", 0.9))
    phi = draws_of(idata, "phi")
    scale = scale or make_display_scale(idata, si, cfg)
    disp = scale.apply(phi)
    st = si.states[["model", "reasoning_state", "state_pos", "pinned", "n_obs", "n_families"]].copy()
    st["eligible"] = rank_eligible(si, cfg)
    lat = _summ(phi, interval)
    dsp = _summ(disp, interval)
    for k, v in lat.items():
        st[f"latent_{k}"] = v
    for k, v in dsp.items():
        st[f"display_{k}"] = v
    st["is_reference"] = st.state_pos.isin([scale.lo_state, scale.hi_state])
    st["note"] = None
    for ref_pos, value in ((scale.lo_state, scale.lo_value), (scale.hi_state, scale.hi_value)):
        st.loc[st.state_pos == ref_pos, "note"] = REFERENCE_NOTE.format(value=value)
    st["interval"] = interval
    return st.reset_index(drop=True)


def headline_states(si: StanInput, phi: np.ndarray, eligible: np.ndarray) -> pd.Series:
    """Per model: Stan position of the eligible state with the highest
    posterior mean (models without an eligible state are absent)."""
    mean = phi.mean(axis=0)
    st = si.states.assign(_mean=mean, _elig=eligible)
    st = st.loc[st._elig]
    idx = st.groupby("model")["_mean"].idxmax()
    return st.loc[idx].set_index("model")["state_pos"]


def rank_draws(values: np.ndarray) -> np.ndarray:
    """Per-draw ranks (1 = highest) of a (draw, item) array."""
    order = np.argsort(-values, axis=1, kind="stable")
    ranks = np.empty_like(order)
    rows = np.arange(values.shape[0])[:, None]
    ranks[rows, order] = np.arange(1, values.shape[1] + 1)[None, :]
    return ranks


def model_scores(idata, si: StanInput, config: Mapping[str, Any] | None = None,
                 scale: DisplayScale | None = None) -> pd.DataFrame:
    """One row per model in the fit. With an eligible state: headline state, its display posterior,
    P(rank 1), P(top k), expected rank, evidence counts; without one: `headline_status` says why."""
    cfg = config or si.config
    interval = float(cfg["display"].get("interval", 0.9))
    top_k = int(cfg["display"].get("top_k", 10))
    phi = draws_of(idata, "phi")
    scale = scale or make_display_scale(idata, si, cfg)
    elig = rank_eligible(si, cfg)
    head = headline_states(si, phi, elig)
    pos = head.to_numpy()
    disp = scale.apply(phi[:, pos])
    ranks = rank_draws(disp)
    s = _summ(disp, interval)
    out = pd.DataFrame(
        {
            "model": head.index,
            "headline_state": si.states.set_index("state_pos").loc[pos, "reasoning_state"].to_numpy(),
            "state_pos": pos,
            "display_mean": s["mean"],
            "display_median": s["median"],
            "display_lower": s["lower"],
            "display_upper": s["upper"],
            "display_sd": s["sd"],
            "latent_mean": phi[:, pos].mean(axis=0),
            "p_rank1": (ranks == 1).mean(axis=0),
            f"p_top{top_k}": (ranks <= top_k).mean(axis=0),
            "expected_rank": ranks.mean(axis=0),
            "interval": interval,
        }
    )
    out["headline_status"] = "published"
    out["note"] = None
    for ref_pos, value in ((scale.lo_state, scale.lo_value), (scale.hi_state, scale.hi_value)):
        out.loc[out.state_pos == ref_pos, "note"] = REFERENCE_NOTE.format(value=value)
    out = pd.concat([out, _models_without_headline(si, cfg, set(head.index), interval)], ignore_index=True)
    ev = si.models.set_index("model")
    out["n_families"] = out["model"].map(ev["n_families"]).to_numpy()
    out["n_observations"] = out["model"].map(ev["n_obs"]).to_numpy()
    out["n_states"] = out["model"].map(ev["n_states"]).to_numpy()
    if "released_on" in ev:
        out["released_on"] = out["model"].map(ev["released_on"]).to_numpy()
    return out.sort_values(["display_mean", "model"], ascending=[False, True], na_position="last").reset_index(drop=True)


def _models_without_headline(si: StanInput, cfg: Mapping[str, Any], headlined: set, interval: float) -> pd.DataFrame:
    """One row per fitted model with no rank-eligible state, its reason naming the rule and its best state."""
    rules = cfg.get("eligibility", {})
    min_families, min_obs = int(rules.get("min_families", 1)), int(rules.get("min_observations", 1))
    excluded = set(rules.get("exclude_settings", []) or [])
    rows = []
    for model, states in si.states.loc[~si.states.model.isin(headlined)].groupby("model", sort=True):
        best = states.sort_values(["n_families", "n_obs"], ascending=False).iloc[0]
        reason = (f"no rank-eligible state: a headline needs >= {min_families} families and >= {min_obs} "
                  f"observations in one state; best is {best.reasoning_state} with {int(best.n_families)} families, "
                  f"{int(best.n_obs)} observations")
        if excluded and set(states.reasoning_state) <= excluded:
            reason = f"no rank-eligible state: every state's setting is excluded ({sorted(excluded)})"
        rows.append({"model": model, "headline_state": None, "interval": interval,
                     "headline_status": reason, "note": None})
    return pd.DataFrame(rows, columns=["model", "headline_state", "interval", "headline_status", "note"])


def reasoning_effects(idata, si: StanInput, config: Mapping[str, Any] | None = None,
                      scale: DisplayScale | None = None) -> pd.DataFrame:
    """Shared effect per setting (default = 0) in latent and display units,
    with intervals; for each ladder step, P(step helps) = P(effect of the
    higher level > effect of the level below)."""
    cfg = config or si.config
    interval = float(cfg["display"].get("interval", 0.9))
    eff = draws_of(idata, "shared_effect")  # (draw, L + K_off)
    scale = scale or make_display_scale(idata, si, cfg)
    settings = si.settings
    rows = []
    lat = _summ(eff, interval)
    dsp = _summ(scale.apply_difference(eff), interval)
    for i, r in settings.iterrows():
        rows.append(
            {
                "setting": r.setting,
                "setting_kind": r.setting_kind,
                "latent_mean": lat["mean"][i],
                "latent_lower": lat["lower"][i],
                "latent_upper": lat["upper"][i],
                "display_mean": dsp["mean"][i],
                "display_lower": dsp["lower"][i],
                "display_upper": dsp["upper"][i],
                "p_positive": float((eff[:, i] > 0).mean()),
                "step_from": None,
                "p_step_helps": np.nan,
            }
        )
    ladder_pos = settings.loc[settings.setting_kind == "ladder", "setting_pos"].tolist()
    for a, b in zip(ladder_pos[:-1], ladder_pos[1:]):
        rows[b]["step_from"] = settings.loc[a, "setting"]
        rows[b]["p_step_helps"] = float((eff[:, b] > eff[:, a]).mean())
    out = pd.DataFrame(rows)
    default = pd.DataFrame([{"setting": si.config["reasoning"].get("default", "default"), "setting_kind": "default",
                             "latent_mean": 0.0, "latent_lower": 0.0, "latent_upper": 0.0,
                             "display_mean": 0.0, "display_lower": 0.0, "display_upper": 0.0,
                             "p_positive": 0.0, "step_from": None, "p_step_helps": np.nan}])
    out = pd.concat([default, out], ignore_index=True)
    out["interval"] = interval
    return out


def family_parameters(idata, si: StanInput, config: Mapping[str, Any] | None = None,
                      scale: DisplayScale | None = None) -> pd.DataFrame:
    """Difficulty (latent and display), discrimination and dispersion per family."""
    cfg = config or si.config
    interval = float(cfg["display"].get("interval", 0.9))
    scale = scale or make_display_scale(idata, si, cfg)
    b = draws_of(idata, "b")
    beta = draws_of(idata, "beta")
    fam = si.families[["family", "kind", "floor", "n_obs", "bounded_pos", "rating_pos"]].copy()
    for name, arr in (("b", b), ("b_display", scale.apply(b)), ("beta", beta),
                      ("beta_display", beta / scale.scale[:, None])):
        s = _summ(arr, interval)
        for k in ("mean", "lower", "upper"):
            fam[f"{name}_{k}"] = s[k]
    kappa = draws_of(idata, "kappa")
    fam["kappa_median"] = np.nan
    bp = fam["bounded_pos"].to_numpy()
    m = bp >= 0
    fam.loc[m, "kappa_median"] = np.median(kappa[:, bp[m]], axis=0)
    if "rating_sd" in idata.posterior and si.data["J_r"] > 0:
        rsd = draws_of(idata, "rating_sd")
        fam["rating_sd_median"] = np.nan
        rp = fam["rating_pos"].to_numpy()
        mr = rp >= 0
        fam.loc[mr, "rating_sd_median"] = np.median(rsd[:, rp[mr]], axis=0)
    return fam


# --------------------------------------------------------------------------- per-observation pass


def observation_draws(idata, si: StanInput, seed: int = 0, draws: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-observation expected score, pointwise log-likelihood and one
    posterior predictive draw, computed from the posterior in numpy.

    The same quantities as the program's `generated quantities` (switch
    `emit_obs`), but without moving (chain, draw, N) arrays through the
    engine: on a real-size panel that transfer took ~100 s and 2.6 GB with
    PyStan. Arrays are shaped (chain, draw, N) in Stan observation order
    (`si.observations`). `tests/model/test_engines.py` checks this against
    the Stan version.
    """
    from scipy.special import betainc, betaln, expit, gammaln, log_expit

    post = idata.posterior
    nc, nd = post.sizes["chain"], post.sizes["draw"]

    def flat(name):
        v = post[name].values
        return v.reshape((nc * nd,) + v.shape[2:])

    d = si.data
    obs = si.observations
    st = obs["state_pos"].to_numpy()
    fj = obs["family_pos"].to_numpy()
    phi, b, beta = flat("phi"), flat("b"), flat("beta")
    eta = beta[:, fj] * (phi[:, st] - b[:, fj])
    c = np.asarray(d["floor_c"])[fj]
    piece = obs["piece"].to_numpy()
    hurdle = obs["hurdle"].to_numpy().astype(bool)
    u = obs["u"].to_numpy(dtype=float)
    k = np.where(obs["correct"].notna(), obs["correct"].fillna(0), 0).astype(float)
    n = np.where(obs["items"].notna(), obs["items"].fillna(1), 1).astype(float)
    D, N = eta.shape
    mu = np.empty((D, N))
    ll = np.empty((D, N))
    rep = np.empty((D, N))
    rng = np.random.default_rng(seed)

    rt = piece == "rating"
    if rt.any():
        rsd = flat("rating_sd")[:, np.asarray(d["fam_rpos"])[fj[rt]] - 1]
        y = u[rt]
        mu[:, rt] = eta[:, rt]
        ll[:, rt] = -0.5 * ((y - eta[:, rt]) / rsd) ** 2 - np.log(rsd) - 0.5 * np.log(2 * np.pi)
        rep[:, rt] = rng.normal(eta[:, rt], rsd)
    bd = ~rt
    if bd.any():
        e = eta[:, bd]
        cb = c[bd]
        p = cb + (1 - cb) * expit(e)
        q = (1 - cb) * expit(-e)
        kap = flat("kappa")[:, np.asarray(d["fam_bpos"])[fj[bd]] - 1]
        a_, b_ = p * kap, q * kap
        h = flat("hurdle_a")[:, None] - flat("hurdle_b")[:, None] * e
        lpz, l1pz = log_expit(h), log_expit(-h)
        hb = hurdle[bd]
        pc = piece[bd]
        kb, nb, ub = k[bd], n[bd], u[bd]
        lchoose = gammaln(nb + 1) - gammaln(kb + 1) - gammaln(nb - kb + 1)
        out = np.zeros_like(e)
        m = pc == "bb"
        out[:, m] = betaln(kb[m] + a_[:, m], nb[m] - kb[m] + b_[:, m]) - betaln(a_[:, m], b_[:, m]) + lchoose[m]
        m = pc == "bbz"
        lbb0 = betaln(a_[:, m], nb[m] + b_[:, m]) - betaln(a_[:, m], b_[:, m])
        out[:, m] = np.logaddexp(lpz[:, m], l1pz[:, m] + lbb0)
        m = pc == "beta"
        out[:, m] = ((a_[:, m] - 1) * np.log(ub[m]) + (b_[:, m] - 1) * np.log1p(-ub[m])
                     - betaln(a_[:, m], b_[:, m]))
        m = pc == "one"
        out[:, m] = np.log(betainc(b_[:, m], a_[:, m], float(d["one_eps"])))
        m = pc == "zero"
        out[:, m] = lpz[:, m]
        add = hb & ~np.isin(pc, ["bbz", "zero"])
        out[:, add] += l1pz[:, add]
        ll[:, bd] = out
        mu[:, bd] = np.where(hb, expit(-h) * p, p)
        # predictive draws
        draw = np.empty_like(e)
        cnt = np.isin(pc, ["bb", "bbz"])
        pr = rng.beta(a_[:, cnt], b_[:, cnt])
        draw[:, cnt] = rng.binomial(nb[cnt].astype(np.int64), pr) / nb[cnt]
        cont = ~cnt
        x = rng.beta(a_[:, cont], b_[:, cont])
        draw[:, cont] = np.where(x >= 1 - float(d["one_eps"]), 1.0, x)
        zero = hb & (rng.random(e.shape) < expit(h))
        draw[zero] = 0.0
        rep[:, bd] = draw
    shape = (nc, nd, N)
    return {"mu_obs": mu.reshape(shape), "log_lik": ll.reshape(shape), "u_rep": rep.reshape(shape)}


def add_observation_draws(idata, si: StanInput, seed: int = 0):
    """Attach `log_likelihood` (log_lik), `posterior_predictive` (u_rep),
    `observed_data` (u) and `mu_obs` (in a `predictions`-style group named
    `expected_score`) to `idata`, with an `obs` dimension. Returns idata."""
    import xarray as xr

    od = observation_draws(idata, si, seed=seed)
    coords = {"chain": idata.posterior.chain.values, "draw": idata.posterior.draw.values,
              "obs": np.arange(od["log_lik"].shape[2])}
    dims = ("chain", "draw", "obs")

    def ds(name, arr):
        return xr.Dataset({name: (dims, arr)}, coords=coords)

    idata.add_groups(
        log_likelihood=ds("log_lik", od["log_lik"]),
        posterior_predictive=ds("u_rep", od["u_rep"].astype(np.float32)),
        expected_score=ds("mu_obs", od["mu_obs"].astype(np.float32)),
        observed_data=xr.Dataset({"u_rep": (("obs",), si.observations["u"].to_numpy(dtype=float))},
                                 coords={"obs": coords["obs"]}),
    )
    return idata
