"""Build the data dict of stan/atlas.stan from a `modeled_observations` frame.

Pure function of (observations, config). The returned `StanInput` carries the
data dict plus the index maps that name every parameter: `models` (theta),
`states` (phi), `families` (b, beta, kappa / rating_sd), `settings`
(shared_effect) and `observations` (per-observation generated quantities).
All positions in the maps are 0-based row positions; Stan's 1-based index of
an item is its position + 1.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from atlas_assets import settings
from atlas_assets.settings import CONFIG_DIR, PROJECT_ROOT

REQUIRED_COLUMNS = (
    "model",
    "reasoning_state",
    "family",
    "kind",
    "u",
    "correct",
    "items",
    "floor",
)


# --------------------------------------------------------------------------- config


def load_model_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> dict:
    """Read atlas_assets/config/model.yaml (or `path`), apply nested overrides and validate the
    result against atlas_assets.config_schema.ModelFile (strict types, no unknown keys): a
    ConfigError (a ValueError) names file, key and line (or "override")."""
    from atlas_assets.config_schema import ModelFile, load_validated

    path = Path(path) if path else settings.model_config_path()
    return load_validated(path, ModelFile, overrides)


def stan_file(config: Mapping[str, Any] | None = None) -> Path:
    rel = (config or {}).get("stan_file", "stan/atlas.stan")
    p = Path(rel)
    return p if p.is_absolute() else PROJECT_ROOT / p


# --------------------------------------------------------------------------- contrasts


def orthogonal_contrasts(levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal linear and quadratic polynomial contrasts over `levels`
    equally spaced levels (each sums to 0, unit Euclidean norm, mutually
    orthogonal), like R's contr.poly."""
    if levels < 3:
        raise ValueError("need at least 3 ladder levels for a quadratic contrast")
    x = np.arange(levels, dtype=float)
    basis = np.vander(x, 3, increasing=True)  # 1, x, x^2
    q, r = np.linalg.qr(basis)
    q = q * np.sign(np.diag(r))  # make the linear contrast increasing, quadratic convex
    return q[:, 1].copy(), q[:, 2].copy()


# --------------------------------------------------------------------------- result


@dataclass
class StanInput:
    data: dict
    models: pd.DataFrame        # model, theta_pos, is_reference, n_states, n_obs, n_families, pinned_state
    states: pd.DataFrame        # model, reasoning_state, state_pos, model_pos, setting_code, pinned, ...
    families: pd.DataFrame      # family, family_pos, kind, floor, bounded_pos, rating_pos, n_obs
    settings: pd.DataFrame      # setting, setting_pos (shared_effect index, 0-based), kind
    observations: pd.DataFrame  # the input rows in Stan order with state_pos, family_pos, piece
    config: dict = field(default_factory=dict)

    def coords(self) -> dict[str, list]:
        """Coordinates for ArviZ dims."""
        return {
            "model": self.models["model"].tolist(),
            "state": state_labels(self.states).tolist(),
            "family": self.families["family"].tolist(),
            "bounded_family": self.families.loc[self.families.bounded_pos >= 0]
            .sort_values("bounded_pos")["family"]
            .tolist(),
            "rating_family": self.families.loc[self.families.rating_pos >= 0]
            .sort_values("rating_pos")["family"]
            .tolist(),
            "setting": self.settings["setting"].tolist(),
            "obs": list(range(len(self.observations))),
        }

    def dims(self) -> dict[str, list[str]]:
        return {
            "theta": ["model"],
            "phi": ["state"],
            "b": ["family"],
            "b_raw": ["family"],
            "beta": ["family"],
            "lambda_raw": ["family"],
            "kappa": ["bounded_family"],
            "logkappa_raw": ["bounded_family"],
            "rating_sd": ["rating_family"],
            "shared_effect": ["setting"],
            "mu_obs": ["obs"],
            "log_lik": ["obs"],
            "u_rep": ["obs"],
        }


def state_labels(states: pd.DataFrame) -> pd.Series:
    return states["model"].astype(str) + "|" + states["reasoning_state"].astype(str)


# --------------------------------------------------------------------------- builder


class ObservationError(ValueError):
    """A modeled_observations row the Stan data cannot be built from, named by row and field."""


def _offending(df: pd.DataFrame, mask, field: str, problem: str, limit: int = 5) -> ObservationError:
    """An error naming the field and the first offending rows (1-based row of modeled_observations and its key)."""
    rows = np.flatnonzero(np.asarray(mask))
    named = "; ".join(
        f"row {i + 1} ({df['model'].iat[i]}|{df['reasoning_state'].iat[i]}|{df['family'].iat[i]}, "
        f"{field}={df[field].iat[i]!r})" for i in rows[:limit])
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return ObservationError(f"modeled_observations field {field!r}: {problem} in {len(rows)} row(s): {named}{more}")


def _validate(df: pd.DataFrame, settings: list[str]) -> pd.DataFrame:
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ObservationError(f"modeled_observations lacks columns {missing}")
    df = df.reset_index(drop=True).copy()
    for column in ("model", "reasoning_state", "family"):
        if df[column].isna().any():
            raise _offending(df, df[column].isna(), column, "missing value")
        df[column] = df[column].astype(str)
    unknown = ~df["reasoning_state"].isin(settings)
    if unknown.any():
        raise _offending(df, unknown, "reasoning_state", f"unknown reasoning state (known: {settings})")
    bad_kind = ~df["kind"].isin(["bounded", "rating"])
    if bad_kind.any():
        raise _offending(df, bad_kind, "kind", "kind must be bounded or rating")
    dup = df.duplicated(["model", "reasoning_state", "family"], keep="first")
    if dup.any():
        raise _offending(df, dup, "family", "duplicate model x state x family (a cell must be resolved upstream)")
    u_missing = ~np.isfinite(pd.to_numeric(df["u"], errors="coerce").to_numpy(dtype=float))
    if u_missing.any():
        raise _offending(df, u_missing, "u", "missing or non-finite score")
    kinds = df.groupby("family")["kind"].nunique()
    if (kinds > 1).any():
        raise _offending(df, df["family"].isin(kinds[kinds > 1].index), "kind", "one family mixes bounded and rating rows")
    b = df["kind"] == "bounded"
    outside = b & ((df["u"] < 0) | (df["u"] > 1))
    if outside.any():
        raise _offending(df, outside, "u", "bounded score outside [0, 1]")
    countable = df["correct"].notna() & df["items"].notna()
    if (countable & ~b).any():
        raise _offending(df, countable & ~b, "correct", "a rating cannot carry (correct, items)")
    bad_items = countable & (df["items"] < 1)
    if bad_items.any():
        raise _offending(df, bad_items, "items", "items must be at least 1")
    bad = countable & ((df["correct"] < 0) | (df["correct"] > df["items"]))
    if bad.any():
        raise _offending(df, bad, "correct", "correct outside [0, items]")
    return df


def centring_off(n_amp: int, n_dev: int) -> dict:
    """The program's conditional-centring data at plain non-centring (prec 0): z = u."""
    return {f"{name}_{part}": np.zeros(n) for name, n in (("amp", n_amp), ("curv", n_amp), ("dev", n_dev))
            for part in ("hat", "prec")}


def build_stan_data(observations: pd.DataFrame, config: Mapping[str, Any] | None = None) -> StanInput:
    """Turn `modeled_observations` rows into the data of stan/atlas.stan.

    Rules (see docs/model.md):
    - one state per (model, reasoning_state); one pinned state per model: its
      `default` where observed, else its most-reported state (ties broken by
      `reasoning.pin_preference`);
    - reference models (capability standardised to mean 0, sd 1) are those
      with an observed default state;
    - ladder states carry a per-model amplitude/curvature on the orthonormal
      linear/quadratic contrasts, measured from the pinned state's level when
      the pinned state is on the ladder (so the pinned state's term is 0);
    - non-pinned off-ladder states carry a free deviation.
    """
    cfg = dict(config) if config is not None else load_model_config()
    rcfg = cfg["reasoning"]
    ladder = list(rcfg["ladder"])
    off = list(rcfg["off_ladder"])
    default = rcfg.get("default", "default")
    all_settings = [default] + ladder + off
    df = _validate(observations, all_settings)
    eps = float(cfg["likelihood"]["one_censor_eps"])

    # ---- families ---------------------------------------------------------
    fam = (
        df.groupby("family", sort=True)
        .agg(kind=("kind", "first"), floor=("floor", "first"), n_obs=("u", "size"),
             floor_n=("floor", "nunique"))
        .reset_index()
    )
    if (fam.floor_n > 1).any():
        raise ValueError(f"families with several floors: {fam.loc[fam.floor_n > 1, 'family'].tolist()}")
    fam = fam.drop(columns="floor_n")
    fam["floor"] = fam["floor"].fillna(0.0).astype(float)
    fam.loc[fam.kind == "rating", "floor"] = 0.0
    if ((fam.floor < 0) | (fam.floor >= 1)).any():
        raise ValueError("floor outside [0, 1)")
    fam["family_pos"] = np.arange(len(fam))
    fam["bounded_pos"] = -1
    fam["rating_pos"] = -1
    isb = fam.kind == "bounded"
    fam.loc[isb, "bounded_pos"] = np.arange(int(isb.sum()))
    fam.loc[~isb, "rating_pos"] = np.arange(int((~isb).sum()))

    # ---- models and states -------------------------------------------------
    models = sorted(df["model"].unique())
    model_pos = {m: i for i, m in enumerate(models)}
    order = {s: i for i, s in enumerate(all_settings)}
    pref = {s: i for i, s in enumerate([default] + list(rcfg.get("pin_preference", [])))}
    st = (
        df.groupby(["model", "reasoning_state"])
        .agg(n_obs=("u", "size"), n_families=("family", "nunique"))
        .reset_index()
    )
    st["setting_order"] = st["reasoning_state"].map(order)
    st = st.sort_values(["model", "setting_order"]).reset_index(drop=True)
    st["state_pos"] = np.arange(len(st))
    st["model_pos"] = st["model"].map(model_pos)

    # pinned state: default, else most observations, then preference order
    st["_pref"] = st["reasoning_state"].map(lambda s: pref.get(s, 100 + order[s]))
    st["_is_default"] = st["reasoning_state"] == default
    ranked = st.sort_values(["model", "_is_default", "n_obs", "_pref"], ascending=[True, False, False, True])
    pinned_pos = ranked.groupby("model")["state_pos"].first()
    st["pinned"] = st["state_pos"].isin(pinned_pos.values)

    # setting code: 0 default, 1..L ladder, L+1..L+K off-ladder
    L, K = len(ladder), len(off)
    code = {default: 0}
    code.update({s: i + 1 for i, s in enumerate(ladder)})
    code.update({s: L + 1 + i for i, s in enumerate(off)})
    st["setting_code"] = st["reasoning_state"].map(code).astype(int)
    st["on_ladder"] = st["setting_code"].between(1, L)
    st["off_ladder"] = st["setting_code"] > L

    lin, quad = orthogonal_contrasts(L)
    pin_state = st.loc[st.pinned].set_index("model")
    pin_code = st["model"].map(pin_state["setting_code"])
    pin_on_ladder = pin_code.between(1, L)
    lvl = st["setting_code"] - 1
    pin_lvl = pin_code - 1
    st["d_lin"] = 0.0
    st["d_quad"] = 0.0
    lad = st["on_ladder"]
    st.loc[lad, "d_lin"] = lin[lvl[lad]] - np.where(pin_on_ladder[lad], lin[pin_lvl[lad].clip(0, L - 1)], 0.0)
    st.loc[lad, "d_quad"] = quad[lvl[lad]] - np.where(pin_on_ladder[lad], quad[pin_lvl[lad].clip(0, L - 1)], 0.0)
    st.loc[st.pinned, ["d_lin", "d_quad"]] = 0.0

    # per-model ladder terms only for models with a non-pinned ladder state
    amp_models = sorted(st.loc[lad & ~st.pinned, "model"].unique())
    amp_pos = {m: i + 1 for i, m in enumerate(amp_models)}
    st["amp_index"] = np.where(lad & ~st.pinned, st["model"].map(amp_pos).fillna(0), 0).astype(int)
    st.loc[st.amp_index == 0, ["d_lin", "d_quad"]] = 0.0

    # free deviation for non-pinned off-ladder states
    dev_mask = st["off_ladder"] & ~st["pinned"]
    st["dev_index"] = 0
    st.loc[dev_mask, "dev_index"] = np.arange(1, int(dev_mask.sum()) + 1)
    dev_setting = (st.loc[dev_mask, "setting_code"] - L).astype(int).tolist()

    # reference models: those with an observed default state
    ref = sorted(st.loc[st.reasoning_state == default, "model"].unique())
    if len(ref) < 3:
        raise ValueError(f"need >= 3 models with an observed default state, have {len(ref)}")
    ref_set = set(ref)
    free = [m for m in models if m not in ref_set]

    mdf = pd.DataFrame({"model": models, "theta_pos": np.arange(len(models))})
    mdf["is_reference"] = mdf["model"].isin(ref_set)
    g = df.groupby("model")
    mdf["n_states"] = mdf["model"].map(st.groupby("model").size())
    mdf["n_obs"] = mdf["model"].map(g.size())
    mdf["n_families"] = mdf["model"].map(g["family"].nunique())
    mdf["pinned_state"] = mdf["model"].map(pin_state["reasoning_state"])
    mdf["has_ladder_terms"] = mdf["model"].isin(amp_pos)
    if "released_on" in df.columns:
        mdf["released_on"] = mdf["model"].map(g["released_on"].first())

    # ---- observations --------------------------------------------------------
    key = dict(zip(zip(st.model, st.reasoning_state), st.state_pos))
    fam_pos = dict(zip(fam.family, fam.family_pos))
    obs = df.reset_index(drop=True).copy()
    obs["state_pos"] = [key[k] for k in zip(obs.model, obs.reasoning_state)]
    obs["family_pos"] = obs["family"].map(fam_pos)
    obs = obs.sort_values(["family_pos", "state_pos"]).reset_index(drop=True)
    obs["obs_pos"] = np.arange(len(obs))
    fl = obs["family"].map(dict(zip(fam.family, fam.floor))).to_numpy()
    bounded = (obs["kind"] == "bounded").to_numpy()
    countable = (obs["correct"].notna() & obs["items"].notna()).to_numpy() & bounded
    u = obs["u"].to_numpy(dtype=float)
    k = np.where(countable, obs["correct"].fillna(0).to_numpy(), 0).round().astype(int)
    n = np.where(countable, obs["items"].fillna(1).to_numpy(), 1).round().astype(int)
    floor_free = fl == 0
    zero = np.where(countable, k == 0, u == 0) & bounded
    # A continuous exact zero below a guessing floor is a refusal the upstream guard removes. A countable
    # 0/n can still arrive there (a small positive score rounds to no whole item, e.g. 0.3% of 60): that
    # is an ordinary beta-binomial outcome, so it stays in the plain beta-binomial piece, without a hurdle.
    if (zero & ~floor_free & ~countable).any():
        bad = obs.loc[zero & ~floor_free & ~countable, ["model", "reasoning_state", "family"]].head().to_dict("records")
        raise ValueError(f"exact zeros in families with a guessing floor (should be screened upstream): {bad}")
    piece = np.full(len(obs), "", dtype=object)
    piece[countable & ~(zero & floor_free)] = "bb"
    piece[countable & zero & floor_free] = "bbz"
    cont = bounded & ~countable
    piece[cont & (u > 0) & (u < 1)] = "beta"
    piece[cont & (u >= 1)] = "one"
    piece[cont & (u <= 0)] = "zero"
    piece[~bounded] = "rating"
    obs["piece"] = piece
    obs["hurdle"] = bounded & floor_free
    nz = bounded & floor_free & ~zero

    def idx(mask: np.ndarray) -> list[int]:
        return (np.flatnonzero(mask) + 1).tolist()

    m_bb = piece == "bb"
    m_bbz = piece == "bbz"
    m_bt = piece == "beta"
    m_rt = piece == "rating"

    # CSR averaging matrix: pbar_j = weighted mean of phi over the states observed on j
    # (observations are sorted by family, so rows come out in order). Any fixed weights
    # give the same model (b = pbar - b_raw / beta has |db/db_raw| = 1/beta whatever pbar
    # is); they only move the centre at which the intercept is sampled. `b_centre`:
    #   mean         every observation weighs the same;
    #   information  weight s (1 - s) + 0.01, s = (u - c) / (1 - c) clipped to [0, 1]
    #                (ratings 1): the logistic information proxy, so the centre sits
    #                where the curve is informed, not among a zero-heavy family's floor.
    pri = cfg["priors"]
    par = cfg.get("parametrization", {})
    counts = obs.groupby("family_pos").size().reindex(range(len(fam)), fill_value=0).to_numpy()
    fpos = obs["family_pos"].to_numpy()
    centre = par.get("b_centre", "mean")
    if centre == "mean":
        wts = np.ones(len(obs))
    elif centre == "information":
        s_u = np.clip((u - fl) / (1.0 - fl), 0.0, 1.0)
        wts = np.where(bounded, s_u * (1.0 - s_u) + 0.01, 1.0)
    else:
        raise ValueError(f"parametrization.b_centre must be mean or information, not {centre!r}")
    wsum = np.bincount(fpos, weights=wts, minlength=len(fam))
    avg_w = (wts / wsum[fpos]).tolist()
    avg_v = (obs["state_pos"] + 1).tolist()
    avg_u = (np.concatenate([[0], np.cumsum(counts)]) + 1).astype(int).tolist()

    pre = par.get("preconditioning", {}) or {}
    data = {
        "N": int(len(obs)),
        "M": len(models),
        "S": int(len(st)),
        "J": int(len(fam)),
        "obs_state": (obs["state_pos"] + 1).tolist(),
        "obs_family": (obs["family_pos"] + 1).tolist(),
        "state_model": (st["model_pos"] + 1).tolist(),
        "floor_c": fam["floor"].tolist(),
        "M_ref": len(ref),
        "ref_model": [model_pos[m] + 1 for m in ref],
        "free_model": [model_pos[m] + 1 for m in free],
        "free_pin_setting": [int(pin_state.loc[m, "setting_code"]) for m in free],
        "L": L,
        "K_off": K,
        "state_setting": st["setting_code"].tolist(),
        "A": len(amp_models),
        "state_amp": st["amp_index"].tolist(),
        "d_lin": st["d_lin"].tolist(),
        "d_quad": st["d_quad"].tolist(),
        "D": int(dev_mask.sum()),
        "state_dev": st["dev_index"].astype(int).tolist(),
        "dev_setting": dev_setting,
        "N_bb": int(m_bb.sum()),
        "bb_idx": idx(m_bb),
        "bb_k": k[m_bb].tolist(),
        "bb_n": n[m_bb].tolist(),
        "N_bbz": int(m_bbz.sum()),
        "bbz_idx": idx(m_bbz),
        "bbz_n": n[m_bbz].tolist(),
        "N_bt": int(m_bt.sum()),
        "bt_idx": idx(m_bt),
        "bt_u": u[m_bt].tolist(),
        "N_one": int((piece == "one").sum()),
        "one_idx": idx(piece == "one"),
        "one_eps": eps,
        # log of the dispersion's cap (0: none); precondition.logkappa_coordinate inverts the program's saturation
        "log_kappa_max": float(np.log(float(cfg["likelihood"]["kappa_max"])))
        if cfg["likelihood"].get("kappa_max") else 0.0,
        "N_zero": int((piece == "zero").sum()),
        "zero_idx": idx(piece == "zero"),
        "N_nz": int(nz.sum()),
        "nz_idx": idx(nz),
        "N_rt": int(m_rt.sum()),
        "rt_idx": idx(m_rt),
        "rt_y": u[m_rt].tolist(),
        "J_b": int(isb.sum()),
        "J_r": int((~isb).sum()),
        "fam_bpos": (fam["bounded_pos"] + 1).tolist(),
        "fam_rpos": (fam["rating_pos"] + 1).tolist(),
        "prior_b_mu_loc": float(pri["b_mu"]["loc"]),
        "prior_b_mu_scale": float(pri["b_mu"]["scale"]),
        "prior_b_sd_scale": float(pri["b_sd"]["scale"]),
        "prior_lambda_mu_loc": float(pri["lambda_mu"]["loc"]),
        "prior_lambda_mu_scale": float(pri["lambda_mu"]["scale"]),
        "prior_lambda_sd_scale": float(pri["lambda_sd"]["scale"]),
        "prior_logkappa_mu_loc": float(pri["logkappa_mu"]["loc"]),
        "prior_logkappa_mu_scale": float(pri["logkappa_mu"]["scale"]),
        "prior_logkappa_sd_scale": float(pri["logkappa_sd"]["scale"]),
        "prior_rating_sd_scale": float(pri["rating_sd"]["scale"]),
        "prior_hurdle_a_loc": float(pri["hurdle_a"]["loc"]),
        "prior_hurdle_a_scale": float(pri["hurdle_a"]["scale"]),
        "prior_hurdle_b_scale": float(pri["hurdle_b"]["scale"]),
        "prior_shared_effect_scale": float(pri["shared_effect_sd"]["scale"]),
        "prior_amp_scale": float(pri["amplitude_sd"]["scale"]),
        "prior_curv_scale": float(pri["curvature_sd"]["scale"]),
        "prior_offdev_scale": float(pri["off_ladder_sd"]["scale"]),
        "nc_b": int(par.get("b", "centered") == "noncentered"),
        "shift_b": int(par.get("b", "centered") == "shifted"),
        "n_avg": int(len(avg_w)),
        "avg_w": avg_w,
        "avg_v": avg_v,
        "avg_u": avg_u,
        "nc_lambda": int(par.get("lambda", "centered") == "noncentered"),
        "nc_logkappa": int(par.get("logkappa", "noncentered") == "noncentered"),
        "radial_sd": float(par.get("radial_sd", 0.15)),
        "scale_capability": float(pre.get("capability", 0.15)),
        "scale_b": float(pre.get("b", 0.2)),
        "scale_lambda": float(pre.get("lambda", 0.1)),
        "scale_logkappa": float(pre.get("logkappa", 0.25)),
        "scale_shared": float(pre.get("shared_effect", 0.1)),
        "emit_obs": int(bool(cfg["sampler"].get("emit_observation_draws", True))
                        and bool(cfg["sampler"].get("observation_draws", True))),
        # affine preconditioner: off here; precondition.Preconditioner.data() switches it on
        "P_pc": 0,
        "pc_loc": [],
        "P_dense": 0,
        "pc_chol": np.zeros((0, 0)),
        "pc_scale": [],
        "K_pc": 0,
        "pc_left": np.zeros((0, 0)),
        "pc_right_t": np.zeros((0, 0)),
        # under the preconditioner, the positive scales are reached by softplus or exp (docs/model.md)
        "scale_softplus": int(par.get("scale_link", "log") == "softplus"),
        # conditional centring of the per-model and per-state terms: off here (plain non-centred);
        # precondition.Preconditioner.data() fills it from an earlier posterior
        **centring_off(len(amp_models), int(dev_mask.sum())),
    }

    settings = pd.DataFrame(
        {
            "setting": ladder + off,
            "setting_pos": np.arange(L + K),
            "setting_kind": ["ladder"] * L + ["off_ladder"] * K,
            "ladder_level": list(range(1, L + 1)) + [0] * K,
            "linear_contrast": list(lin) + [np.nan] * K,
            "quadratic_contrast": list(quad) + [np.nan] * K,
        }
    )
    states = st.drop(columns=["_pref", "_is_default", "setting_order"])
    states["is_reference_model"] = states["model"].isin(ref_set)
    return StanInput(
        data=data,
        models=mdf,
        states=states,
        families=fam,
        settings=settings,
        observations=obs,
        config=dict(cfg),
    )
