"""Simulate `modeled_observations` panels from the capability model itself.

`simulate_panel` draws known parameters, a sparse and selective observation
pattern shaped like the real data (bounded countable, bounded continuous,
ratings, exact zeros on hard floor-free families, several reasoning states
for frontier models, ladder and off-ladder settings, models without an
observed default), then draws scores from the likelihood in stan/atlas.stan.
The true parameters are returned in the model's own gauge: capability is
exactly standardised (mean 0, sd 1) over models with an observed default,
and every per-model reasoning deviation is measured from the pinned state
chosen by `stan_data.build_stan_data` on the same panel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy.special import expit

from atlas_assets.model.stan_data import build_stan_data, load_model_config, state_labels

LADDER = ["minimal", "low", "medium", "high", "xhigh", "max"]
OFF = ["disabled", "enabled"]


@dataclass
class SimulationTruth:
    theta: pd.Series            # by model
    phi: pd.Series              # by "model|reasoning_state"
    b: pd.Series                # by family
    beta: pd.Series             # by family
    kappa: pd.Series            # by bounded family
    rating_sd: pd.Series        # by rating family
    shared_effect: pd.Series    # by setting (ladder + off-ladder)
    hurdle_a: float
    hurdle_b: float
    extras: dict = field(default_factory=dict)


# sizes shaped like the real panel (DESIGN.md / issue 4)
REAL_SIZE = dict(n_models=280, n_families=40, target_obs=2300)
SMALL_SIZE = dict(n_models=60, n_families=14, target_obs=520)


def simulate_panel(
    n_models: int = 280,
    n_families: int = 40,
    target_obs: int = 2300,
    seed: int = 1,
    config: Mapping[str, Any] | None = None,
    n_rating_families: int = 2,
    n_zero_families: int = 2,
) -> tuple[pd.DataFrame, SimulationTruth]:
    rng = np.random.default_rng(seed)
    cfg = dict(config) if config is not None else load_model_config()

    # ---- models and their reasoning states -----------------------------------
    models = [f"m{i:03d}" for i in range(n_models)]
    theta_raw = rng.normal(0.0, 1.0, n_models)
    reasoning_model = rng.random(n_models) < np.clip(0.1 + 0.2 * (theta_raw + 1), 0.05, 0.6)
    rows = []
    for i, m in enumerate(models):
        states: list[str] = []
        if reasoning_model[i]:
            has_default = rng.random() < 0.55
            if has_default:
                states.append("default")
            n_lad = rng.choice([1, 2, 3, 4], p=[0.35, 0.3, 0.25, 0.1])
            start = rng.integers(0, len(LADDER) - n_lad + 1)
            states += LADDER[start:start + n_lad]
            if rng.random() < 0.3:
                states.append("disabled")
            if rng.random() < 0.12:
                states.append("enabled")
        else:
            if rng.random() < 0.92:
                states.append("default")
            else:
                states.append(rng.choice(["enabled", "high", "disabled"]))
        for s in dict.fromkeys(states):
            rows.append((m, s))
    st = pd.DataFrame(rows, columns=["model", "reasoning_state"])

    # ---- families ---------------------------------------------------------------
    J = n_families
    fams = [f"f{j:02d}" for j in range(J)]
    kind = np.array(["bounded"] * J, dtype=object)
    kind[:n_rating_families] = "rating"
    b_true = rng.normal(0.2, 0.8, J)
    lam = rng.normal(0.45, 0.35, J)
    floor = np.zeros(J)
    countable = np.zeros(J, dtype=bool)
    items = np.zeros(J, dtype=int)
    order = np.arange(n_rating_families, J)
    rng.shuffle(order)
    zero_fams = order[:n_zero_families]
    rest = order[n_zero_families:]
    b_true[zero_fams] = rng.uniform(2.2, 3.0, len(zero_fams))      # hard, floor-free
    n_mc = max(1, int(round(0.25 * len(rest))))
    floor[rest[:n_mc]] = rng.choice([0.25, 0.25, 0.2, 0.1], n_mc)    # multiple choice floors
    countable[zero_fams] = np.arange(len(zero_fams)) % 2 == 0   # one countable, one continuous
    cmask = rng.random(len(rest)) < 0.62
    countable[rest[cmask]] = True
    items[countable] = rng.choice([60, 120, 198, 300, 500, 1000, 2500], int(countable.sum()))
    kappa = np.exp(rng.normal(np.log(35.0), 0.6, J))
    kappa[kind == "rating"] = np.nan
    rating_sd = np.where(kind == "rating", rng.uniform(0.2, 0.35, J), np.nan)
    popularity = rng.normal(-1.6, 0.9, J)
    popularity[zero_fams] += 0.3
    popularity[kind == "rating"] += 1.0   # arenas rate many models

    # ---- which cells are observed: sparse and selective ------------------------
    st["model_pos"] = st["model"].map({m: i for i, m in enumerate(models)})
    th = theta_raw[st["model_pos"].to_numpy()]
    n_states_of_model = st.groupby("model")["reasoning_state"].transform("size").to_numpy()
    # stronger models and frontier states are evaluated on more (and harder) families
    logits = (
        popularity[None, :]
        + 0.5 * th[:, None]
        + 0.35 * np.clip(th[:, None] - b_true[None, :], -3, 3) * (b_true[None, :] > 1.5)
        - 0.35 * (n_states_of_model[:, None] - 1)
    )
    shift = _calibrate_shift(logits, target_obs)
    observed = rng.random(logits.shape) < expit(logits + shift)
    # every state observed at least once; every model on >= 3 families
    for s in range(len(st)):
        if not observed[s].any():
            observed[s, rng.choice(J, p=_softmax(logits[s]))] = True
    for m, grp in st.groupby("model").groups.items():
        idx = np.asarray(list(grp))
        while np.any(observed[idx], axis=0).sum() < 3:
            s = rng.choice(idx)
            observed[s, rng.choice(J, p=_softmax(logits[s]))] = True
    # every family on >= 8 states
    for j in range(J):
        while observed[:, j].sum() < 8:
            observed[rng.integers(len(st)), j] = True

    si, fj = np.nonzero(observed)
    obs = pd.DataFrame(
        {
            "model": st["model"].to_numpy()[si],
            "reasoning_state": st["reasoning_state"].to_numpy()[si],
            "family": np.array(fams)[fj],
            "kind": kind[fj],
            "u": 0.5,
            "correct": np.where(countable[fj], items[fj] // 2, np.nan),
            "items": np.where(countable[fj], items[fj], np.nan),
            "floor": floor[fj],
        }
    )

    # ---- gauge and reasoning structure, from the same rules as the fit -------
    skeleton = build_stan_data(obs, cfg)
    sst = skeleton.states
    ref = skeleton.models.loc[skeleton.models.is_reference, "model"]
    theta = pd.Series(theta_raw, index=models)
    theta = (theta - theta[ref].mean()) / theta[ref].std(ddof=1)

    shared = pd.Series(
        [-0.35, -0.2, 0.0, 0.15, 0.22, 0.25, -0.7, 0.1],
        index=LADDER + OFF,
    )
    code_of = {"default": 0.0}
    shared_vec = np.concatenate([[0.0], shared.to_numpy()])
    amp_sd, curv_sd = 0.15, 0.06
    off_sd = {"disabled": 0.4, "enabled": 0.15}
    amp = rng.normal(0, amp_sd, skeleton.data["A"])
    curv = rng.normal(0, curv_sd, skeleton.data["A"])
    dev_state = sst.loc[sst.dev_index > 0]
    dev = np.zeros(skeleton.data["D"])
    for _, r in dev_state.iterrows():
        dev[r.dev_index - 1] = rng.normal(0, off_sd[r.reasoning_state])
    amp_full = np.concatenate([[0.0], amp])
    curv_full = np.concatenate([[0.0], curv])
    dev_full = np.concatenate([[0.0], dev])
    phi_vals = (
        theta[sst["model"]].to_numpy()
        + shared_vec[sst["setting_code"].to_numpy()]
        + amp_full[sst["amp_index"].to_numpy()] * sst["d_lin"].to_numpy()
        + curv_full[sst["amp_index"].to_numpy()] * sst["d_quad"].to_numpy()
        + dev_full[sst["dev_index"].to_numpy()]
    )
    del code_of
    phi = pd.Series(phi_vals, index=state_labels(sst).to_numpy())

    # ---- scores ---------------------------------------------------------------------
    hurdle_a, hurdle_b = -4.0, 1.0
    beta = np.exp(lam)
    labels = (obs["model"] + "|" + obs["reasoning_state"]).to_numpy()
    ph = phi[labels].to_numpy()
    fpos = np.array([int(f[1:]) for f in obs["family"]])
    eta = beta[fpos] * (ph - b_true[fpos])
    c = floor[fpos]
    p = c + (1 - c) * expit(eta)
    p = np.clip(p, 1e-9, 1 - 1e-9)
    k = kappa[fpos]
    u = np.zeros(len(obs))
    isr = kind[fpos] == "rating"
    isc = countable[fpos]
    floor_free = (~isr) & (c == 0)
    hz = floor_free & (rng.random(len(obs)) < expit(hurdle_a - hurdle_b * eta))
    n_it = items[fpos]
    correct = np.full(len(obs), np.nan)

    def draw_bounded(sel: np.ndarray) -> None:
        bb = sel & isc
        pr = rng.beta(p[bb] * k[bb], (1 - p[bb]) * k[bb])
        correct[bb] = rng.binomial(n_it[bb], pr)
        u[bb] = correct[bb] / n_it[bb]
        ct = sel & ~isc
        u[ct] = np.round(rng.beta(p[ct] * k[ct], (1 - p[ct]) * k[ct]), 3)

    draw_bounded(~isr)
    # the pipeline drops scores below half the guessing floor; redraw those
    # (a mild truncation the model ignores) so the panel keeps its shape
    for _ in range(100):
        low = (~isr) & (c > 0) & (u < c / 2)
        if not low.any():
            break
        draw_bounded(low)
    u[hz] = 0.0
    correct[hz & isc] = 0
    u[isr] = eta[isr] + rng.normal(0, rating_sd[fpos][isr])
    obs["u"] = u
    obs["correct"] = correct

    # standardise ratings within family; map the truth to that scale
    b_fit = b_true.copy()
    beta_fit = beta.copy()
    rsd_fit = rating_sd.copy()
    for j in np.flatnonzero(kind == "rating"):
        sel = obs["family"] == fams[j]
        mean, sd = obs.loc[sel, "u"].mean(), obs.loc[sel, "u"].std(ddof=1)
        obs.loc[sel, "u"] = (obs.loc[sel, "u"] - mean) / sd
        b_fit[j] = b_true[j] + mean / beta[j]
        beta_fit[j] = beta[j] / sd
        rsd_fit[j] = rating_sd[j] / sd

    obs["correct"] = obs["correct"].astype("Int64")
    obs["items"] = obs["items"].astype("Int64")
    obs["n_components"] = 1
    rel = pd.Series(
        pd.Timestamp("2023-01-01") + pd.to_timedelta(
            np.clip(400 + 250 * theta_raw + rng.normal(0, 150, n_models), 0, 1100).astype(int), unit="D"
        ),
        index=models,
    )
    obs["released_on"] = obs["model"].map(rel).dt.date

    bounded_fams = [f for f, kd in zip(fams, kind) if kd == "bounded"]
    rating_fams = [f for f, kd in zip(fams, kind) if kd == "rating"]
    truth = SimulationTruth(
        theta=theta,
        phi=phi,
        b=pd.Series(b_fit, index=fams),
        beta=pd.Series(beta_fit, index=fams),
        kappa=pd.Series(kappa, index=fams)[bounded_fams],
        rating_sd=pd.Series(rsd_fit, index=fams)[rating_fams],
        shared_effect=shared,
        hurdle_a=hurdle_a,
        hurdle_b=hurdle_b,
        extras={
            "amp": amp,
            "curv": curv,
            "dev": dev,
            "amp_sd": amp_sd,
            "curv_sd": curv_sd,
            "off_sd": off_sd,
            "floor": pd.Series(floor, index=fams),
            "countable": pd.Series(countable, index=fams),
        },
    )
    return obs[
        ["model", "reasoning_state", "family", "kind", "u", "correct", "items", "floor", "n_components", "released_on"]
    ], truth


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def _calibrate_shift(logits: np.ndarray, target: int) -> float:
    lo, hi = -10.0, 10.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if expit(logits + mid).sum() > target:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def simulated_references(observations: pd.DataFrame, truth: SimulationTruth,
                         low_value: float = 130.0, high_value: float = 150.0) -> dict:
    """`display.reference` for a simulated panel: the default states of the two best-measured models
    (most families) among those at the low and high fifth of true capability. The production config
    names real states, which a simulated panel does not have."""
    counts = observations.groupby(["model", "reasoning_state"])["family"].nunique().rename("n_families").reset_index()
    defaults = counts[counts.reasoning_state == "default"].copy()
    defaults["truth"] = truth.phi[(defaults.model + "|" + defaults.reasoning_state).to_numpy()].to_numpy()
    defaults = defaults.sort_values("truth")
    fifth = max(1, len(defaults) // 5)
    low = defaults.head(fifth).sort_values("n_families", kind="stable").iloc[-1]
    high = defaults.tail(fifth).sort_values("n_families", kind="stable").iloc[-1]
    return {"low": {"model": low.model, "reasoning_state": "default", "value": low_value},
            "high": {"model": high.model, "reasoning_state": "default", "value": high_value}}
