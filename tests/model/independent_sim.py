"""An independent simulator of `modeled_observations` for the recovery test.

The truth of a recovery test must not come from the code under test: if the
simulator asked `build_stan_data` which state is pinned, which models are
the reference set or what the ladder contrasts are, a bug there would be
copied into the truth and the fit would "recover" it. So this module imports
nothing from `atlas_assets`. It writes the model's generative story out from
its documentation (DESIGN.md "The capability model", docs/model.md and the
comments of stan/atlas.stan) and applies its own identification rules:

- Curve: ``E[u] = c_j + (1 - c_j) inv_logit(beta_j (phi_s - b_j))``,
  ``beta_j = exp(lambda_j)``, ``phi_s = theta_m + gamma_s``.
- Pieces: countable families draw ``correct ~ BetaBinomial(items, mu kappa_j,
  (1 - mu) kappa_j)``; continuous ones ``u ~ Beta(mu kappa_j, (1 - mu)
  kappa_j)``, reported as exactly 1 when ``u >= 1 - eps``; in floor-free
  bounded families a zero process with ``logit pz = hurdle_a - hurdle_b
  beta_j (phi_s - b_j)`` replaces the score by an exact zero; ratings are
  ``Normal(beta_j (phi_s - b_j), rating_sd_j)`` and are then standardised
  within the family (sample sd), as `sql/06_modeled_observations.sql` does,
  with the family's truth carried to that scale.
- Reasoning: ``gamma_s = shared[r] + per-model part``, shared[default] = 0.
  Ladder states: ``amp_m (L[l] - L[l_pin]) + curv_m (Q[l] - Q[l_pin])`` with
  L, Q the orthonormal linear and quadratic polynomial contrasts over the six
  ladder levels (R's ``contr.poly``), l_pin the level of the model's pinned
  state when that is on the ladder (else the offsets are 0). Off-ladder
  states that are not pinned: a free deviation ``N(0, offdev_sd[r])``.
  The pinned state carries no deviation of its own.
- Identification: theta of the models with an observed default state (the
  reference set) is standardised exactly, mean 0 and sample sd 1; models
  without an observed default get ``theta ~ N(0, 1)``. One pinned state per
  model: its default where observed, else its most-reported state (most
  observation rows), ties broken by `reasoning.pin_preference`.

The contrasts are built here by Gram-Schmidt on the monomials (0, x, x^2)
at the equally spaced levels; `contr_poly_closed_form` gives the documented
closed form (R's contr.poly for 6 levels) to check them against.

Output: a frame with the columns of `modeled_observations` and a
`IndependentTruth` whose every parameter is keyed by model / (model,
reasoning_state) / family / setting NAMES, never by positions.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import expit

DEFAULT = "default"
LADDER = ("minimal", "low", "medium", "high", "xhigh", "max")
OFF_LADDER = ("disabled", "enabled")
# model.yaml reasoning.pin_preference (the test passes the configured value)
PIN_PREFERENCE = ("medium", "high", "low", "xhigh", "max", "minimal", "enabled", "disabled")

# coverage thresholds of the cleaning chain (cleaning.yaml): a panel that
# satisfies them passes the coverage filter unchanged
MIN_MODELS_PER_FAMILY = 5
MIN_FAMILIES_PER_MODEL = 3

COLUMNS = [
    "model", "reasoning_state", "family", "kind", "u", "correct", "items", "floor",
    "n_components", "released_on", "selection", "benchmarks", "n_configs", "row_keys",
]


# --------------------------------------------------------------------------- contrasts


def ladder_contrasts(levels: int = len(LADDER)) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal linear and quadratic contrasts over `levels` equally spaced
    levels: classical Gram-Schmidt on 1, x, x^2 (x = 0..levels-1), each vector
    normalised; signs so that the linear one increases and the quadratic one
    is convex (positive at both ends)."""
    x = np.arange(levels, dtype=float)
    basis = []
    for v in (np.ones(levels), x, x**2):
        w = v.copy()
        for e in basis:
            w = w - (w @ e) * e
        basis.append(w / np.sqrt(w @ w))
    lin, quad = basis[1], basis[2]
    if lin[-1] < lin[0]:
        lin = -lin
    if quad[0] < 0:
        quad = -quad
    return lin, quad


def contr_poly_closed_form() -> tuple[np.ndarray, np.ndarray]:
    """R's contr.poly(6), columns .L and .Q: (-5,-3,-1,1,3,5)/sqrt(70) and
    (5,-1,-4,-4,-1,5)/sqrt(84)."""
    lin = np.array([-5, -3, -1, 1, 3, 5], dtype=float) / np.sqrt(70.0)
    quad = np.array([5, -1, -4, -4, -1, 5], dtype=float) / np.sqrt(84.0)
    return lin, quad


# --------------------------------------------------------------------------- truth


@dataclass
class IndependentTruth:
    theta: pd.Series          # by model
    phi: pd.Series            # by (model, reasoning_state)
    gamma: pd.Series          # phi - theta, by (model, reasoning_state)
    b: pd.Series              # by family (ratings: on the standardised scale)
    beta: pd.Series           # by family (ratings: on the standardised scale)
    kappa: pd.Series          # by bounded family
    rating_sd: pd.Series      # by rating family (standardised scale)
    shared_effect: pd.Series  # by setting (ladder + off-ladder)
    amp: pd.Series            # by model, models with a non-pinned ladder state
    curv: pd.Series           # same models
    dev: pd.Series            # by (model, reasoning_state), non-pinned off-ladder states
    pinned: pd.Series         # model -> pinned reasoning state
    reference: list           # models with an observed default (sorted)
    hurdle_a: float
    hurdle_b: float
    families: pd.DataFrame    # family, kind, floor, countable, items, hard
    extras: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- helpers


def _names(rng: np.random.Generator, prefix: str, n: int) -> list[str]:
    """Unique names whose sorted order has nothing to do with the order in
    which they are generated (a positional mix-up cannot pass by luck)."""
    out: list[str] = []
    seen: set[str] = set()
    letters = np.array(list(string.ascii_lowercase))
    while len(out) < n:
        name = prefix + "-" + "".join(rng.choice(letters, 5))
        if name not in seen:
            seen.add(name)
            out.append(name)
    return out


def pin_state(states_nobs: dict[str, int], pin_preference=PIN_PREFERENCE) -> str:
    """The documented rule: default where observed, else most observation
    rows, ties broken by the configured preference order."""
    if DEFAULT in states_nobs:
        return DEFAULT
    rank = {s: i for i, s in enumerate(pin_preference)}
    return min(states_nobs, key=lambda s: (-states_nobs[s], rank.get(s, len(rank))))


def _state_plans(rng: np.random.Generator, n_models: int) -> list[list[str]]:
    plans = []
    for _ in range(n_models):
        if rng.random() < 0.5:
            # a model with a reasoning mode: a run of ladder settings (often
            # several, so the per-model ladder terms are informed), sometimes
            # a default, sometimes thinking switched off / on
            states = []
            if rng.random() < 0.5:
                states.append(DEFAULT)
            n_lad = int(rng.choice([1, 2, 3, 4, 5], p=[0.1, 0.2, 0.3, 0.25, 0.15]))
            levels = sorted(rng.choice(len(LADDER), n_lad, replace=False))
            states += [LADDER[i] for i in levels]
            if rng.random() < 0.4:
                states.append("disabled")
            if rng.random() < 0.2:
                states.append("enabled")
        else:
            r = rng.random()
            if r < 0.88:
                states = [DEFAULT]
            else:
                states = [str(rng.choice(["enabled", "disabled", "high", "medium"]))]
        plans.append(states)
    return plans


# --------------------------------------------------------------------------- simulator


def simulate_independent_panel(
    seed: int = 7,
    n_models: int = 60,
    n_families: int = 14,
    target_obs: int = 560,
    n_rating_families: int = 1,
    n_hard_families: int = 2,
    pin_preference=PIN_PREFERENCE,
    one_censor_eps: float = 0.005,
    amp_sd: float = 0.4,
    curv_sd: float = 0.2,
    offdev_sd: dict | None = None,
    hurdle_a: float = -4.0,
    hurdle_b: float = 1.0,
) -> tuple[pd.DataFrame, IndependentTruth]:
    """Draw a panel and its truth (see the module docstring)."""
    rng = np.random.default_rng(seed)
    offdev_sd = dict(offdev_sd or {"disabled": 0.4, "enabled": 0.3})
    lin, quad = ladder_contrasts(len(LADDER))
    level = {s: i for i, s in enumerate(LADDER)}

    # ---- models and their reasoning states ---------------------------------
    models = _names(rng, "mdl", n_models)
    plans = _state_plans(rng, n_models)
    if sum(DEFAULT in p for p in plans) < 5:
        for p in plans[:5]:
            if DEFAULT not in p:
                p.insert(0, DEFAULT)
    # evaluation effort, independent of capability; models with a reasoning
    # mode are evaluated more (as in the real panel)
    effort = rng.normal(0.0, 0.4, n_models) + 0.4 * np.array([len(p) > 1 for p in plans])
    st_model = [m for m, p in zip(models, plans) for _ in p]
    st_state = [s for p in plans for s in p]
    st_mi = np.array([i for i, p in enumerate(plans) for _ in p])
    n_st = len(st_state)

    # ---- families ----------------------------------------------------------------
    J = n_families
    fams = _names(rng, "fam", J)
    kind = np.array(["bounded"] * J, dtype=object)
    kind[:n_rating_families] = "rating"
    bounded_idx = np.arange(n_rating_families, J)
    rng.shuffle(bounded_idx)
    hard = np.zeros(J, dtype=bool)
    hard[bounded_idx[:n_hard_families]] = True
    rest = bounded_idx[n_hard_families:]
    countable = np.zeros(J, dtype=bool)
    floor = np.zeros(J)
    # hard floor-free families: alternate countable / continuous
    countable[bounded_idx[:n_hard_families]] = np.arange(n_hard_families) % 2 == 0
    n_floor = max(3, len(rest) // 4)
    floor[rest[:n_floor]] = rng.choice([0.25, 0.2, 0.1], n_floor)
    countable[rest[: n_floor - 1]] = True           # multiple choice: countable with a floor
    other = rest[n_floor:]
    countable[other[rng.random(len(other)) < 0.6]] = True
    items = np.where(countable, rng.choice([80, 150, 198, 400, 1000], J), 0)

    b_true = rng.normal(0.2, 0.8, J)
    b_true[hard] = rng.uniform(1.8, 2.5, int(hard.sum()))
    lam = rng.normal(0.4, 0.3, J)
    beta_true = np.exp(lam)
    kappa = np.where(kind == "bounded", np.exp(rng.normal(np.log(40.0), 0.5, J)), np.nan)
    rating_sd = np.where(kind == "rating", rng.uniform(0.25, 0.35, J), np.nan)
    popularity = rng.normal(-1.0, 0.6, J)
    popularity[kind == "rating"] += 0.8

    # ---- observation pattern: sparse, not driven by capability -------------------
    n_states_of = np.array([len(plans[i]) for i in st_mi])
    logits = popularity[None, :] + effort[st_mi][:, None] - 0.1 * (n_states_of[:, None] - 1)
    lo, hi = -10.0, 10.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if expit(logits + mid).sum() > target_obs else (mid, hi)
    observed = rng.random(logits.shape) < expit(logits + 0.5 * (lo + hi))
    for s in range(n_st):                                   # every state observed
        if not observed[s].any():
            observed[s, rng.integers(J)] = True
    for i in range(n_models):                               # every model on >= 3 families
        rows = np.flatnonzero(st_mi == i)
        while observed[rows].any(axis=0).sum() < MIN_FAMILIES_PER_MODEL:
            observed[rng.choice(rows), rng.integers(J)] = True
    for j in range(J):                                      # every family on >= 8 models
        while len(set(st_mi[observed[:, j]])) < max(8, MIN_MODELS_PER_FAMILY):
            observed[rng.integers(n_st), j] = True
    nobs_state = observed.sum(axis=1)

    # ---- identification: pins and the reference set --------------------------------
    pinned = {}
    for i, m in enumerate(models):
        rows = np.flatnonzero(st_mi == i)
        pinned[m] = pin_state({st_state[r]: int(nobs_state[r]) for r in rows}, pin_preference)
    reference = sorted(m for m, p in zip(models, plans) if DEFAULT in p)
    n_tie_pins = 0
    for i, m in enumerate(models):
        counts = nobs_state[st_mi == i]
        if pinned[m] != DEFAULT and (counts == counts.max()).sum() > 1:
            n_tie_pins += 1

    # ---- capability and reasoning effects ---------------------------------------
    theta = pd.Series(rng.normal(0.0, 1.0, n_models), index=models)
    t_ref = theta[reference]
    theta[reference] = (t_ref - t_ref.mean()) / t_ref.std(ddof=1)   # exact standardisation
    shared = pd.Series(
        {"minimal": -0.45, "low": -0.25, "medium": 0.05, "high": 0.25, "xhigh": 0.35,
         "max": 0.4, "disabled": -0.6, "enabled": 0.15}
    )
    shared_full = {DEFAULT: 0.0, **shared.to_dict()}
    amp, curv, dev = {}, {}, {}
    for i, m in enumerate(models):
        lad_states = [s for s in plans[i] if s in level and s != pinned[m]]
        if lad_states:
            amp[m] = rng.normal(0.0, amp_sd)
            curv[m] = rng.normal(0.0, curv_sd)
        for s in plans[i]:
            if s in OFF_LADDER and s != pinned[m]:
                dev[(m, s)] = rng.normal(0.0, offdev_sd[s])
    phi, gamma = {}, {}
    for m, s in zip(st_model, st_state):
        g = shared_full[s]
        if s != pinned[m]:
            if s in level:
                p = pinned[m]
                lp = lin[level[p]] if p in level else 0.0
                qp = quad[level[p]] if p in level else 0.0
                g += amp[m] * (lin[level[s]] - lp) + curv[m] * (quad[level[s]] - qp)
            elif s in OFF_LADDER:
                g += dev[(m, s)]
        gamma[(m, s)] = g
        phi[(m, s)] = theta[m] + g

    # ---- scores ----------------------------------------------------------------------
    si_, fj = np.nonzero(observed)
    n = len(si_)
    ph = np.array([phi[(st_model[s], st_state[s])] for s in si_])
    eta = beta_true[fj] * (ph - b_true[fj])
    c = floor[fj]
    mu = c + (1 - c) * expit(eta)
    mu_c = (1 - c) * expit(-eta)                     # 1 - mu, computed without cancellation
    isr = kind[fj] == "rating"
    isc = countable[fj]
    k = kappa[fj]
    n_it = items[fj]
    u = np.zeros(n)
    correct = np.full(n, np.nan)

    def draw_bounded(sel):
        cc = sel & isc
        pr = rng.beta(mu[cc] * k[cc], mu_c[cc] * k[cc])
        correct[cc] = rng.binomial(n_it[cc], pr)
        u[cc] = correct[cc] / n_it[cc]
        ct = sel & ~isc
        x = rng.beta(mu[ct] * k[ct], mu_c[ct] * k[ct])
        u[ct] = np.where(x >= 1 - one_censor_eps, 1.0, x)

    draw_bounded(~isr)
    # upstream drops scores below half a guessing floor: redraw them (a mild
    # truncation that the model ignores) so that the pattern stays as drawn
    for _ in range(200):
        low = (~isr) & (c > 0) & (u < c / 2)
        if not low.any():
            break
        draw_bounded(low)
    floor_free = (~isr) & (c == 0)
    hz = floor_free & (rng.random(n) < expit(hurdle_a - hurdle_b * eta))
    u[hz] = 0.0
    correct[hz & isc] = 0
    u[isr] = eta[isr] + rng.normal(0.0, rating_sd[fj][isr])

    obs = pd.DataFrame(
        {
            "model": [st_model[s] for s in si_],
            "reasoning_state": [st_state[s] for s in si_],
            "family": np.array(fams, dtype=object)[fj],
            "kind": kind[fj],
            "u": u,
            "correct": pd.array(np.where(isc, correct, np.nan), dtype="Float64").astype("Int64"),
            "items": pd.array(np.where(isc, n_it, np.nan), dtype="Float64").astype("Int64"),
            "floor": c,
        }
    )

    # ratings: standardised within family; carry the truth to that scale
    b_fit, beta_fit, rsd_fit = b_true.copy(), beta_true.copy(), rating_sd.copy()
    for j in np.flatnonzero(kind == "rating"):
        sel = obs["family"] == fams[j]
        mean, sd = obs.loc[sel, "u"].mean(), obs.loc[sel, "u"].std(ddof=1)
        obs.loc[sel, "u"] = (obs.loc[sel, "u"] - mean) / sd
        # (y - mean) / sd = (beta / sd) (phi - (b + mean / beta)) + noise / sd
        b_fit[j] = b_true[j] + mean / beta_true[j]
        beta_fit[j] = beta_true[j] / sd
        rsd_fit[j] = rating_sd[j] / sd

    release = pd.Series(
        (pd.Timestamp("2023-01-01") + pd.to_timedelta(rng.integers(0, 1100, n_models), unit="D")).date,
        index=models,
    )
    obs["n_components"] = 1
    obs["released_on"] = obs["model"].map(release)
    obs["selection"] = "primary"
    obs["benchmarks"] = [[f] for f in obs["family"]]
    obs["n_configs"] = 1
    obs["row_keys"] = [[f"sim:{i}"] for i in range(n)]
    obs = obs.sample(frac=1.0, random_state=int(rng.integers(1 << 31))).reset_index(drop=True)
    _check_panel(obs)

    idx2 = lambda d: pd.Series(d, index=pd.MultiIndex.from_tuples(list(d), names=["model", "reasoning_state"]),
                               dtype=float) if d else pd.Series([], dtype=float)
    bounded_fams = [f for f, kd in zip(fams, kind) if kd == "bounded"]
    rating_fams = [f for f, kd in zip(fams, kind) if kd == "rating"]
    truth = IndependentTruth(
        theta=theta,
        phi=idx2(phi),
        gamma=idx2(gamma),
        b=pd.Series(b_fit, index=fams),
        beta=pd.Series(beta_fit, index=fams),
        kappa=pd.Series(kappa, index=fams)[bounded_fams],
        rating_sd=pd.Series(rsd_fit, index=fams)[rating_fams],
        shared_effect=shared,
        amp=pd.Series(amp, dtype=float),
        curv=pd.Series(curv, dtype=float),
        dev=idx2(dev),
        pinned=pd.Series(pinned),
        reference=reference,
        hurdle_a=hurdle_a,
        hurdle_b=hurdle_b,
        families=pd.DataFrame(
            {"family": fams, "kind": kind, "floor": floor, "countable": countable, "items": items, "hard": hard}
        ),
        extras={
            "contrasts": pd.DataFrame({"linear": lin, "quadratic": quad}, index=list(LADDER)),
            "amp_sd": amp_sd,
            "curv_sd": curv_sd,
            "offdev_sd": offdev_sd,
            "pins_by_tie_break": n_tie_pins,
            "n_zero": int((obs["u"] == 0).sum()),
            "n_one": int(((obs["u"] == 1) & obs["correct"].isna()).sum()),
        },
    )
    return obs[COLUMNS], truth


def _check_panel(obs: pd.DataFrame) -> None:
    """The panel is what the coverage filter would keep unchanged."""
    fam_models = obs.groupby("family")["model"].nunique()
    assert (fam_models >= MIN_MODELS_PER_FAMILY).all(), fam_models[fam_models < MIN_MODELS_PER_FAMILY]
    model_fams = obs.groupby("model")["family"].nunique()
    assert (model_fams >= MIN_FAMILIES_PER_MODEL).all(), model_fams[model_fams < MIN_FAMILIES_PER_MODEL]
    assert (obs.groupby("family")["u"].agg(lambda x: x.max() - x.min()) > 1e-9).all()
    assert not obs.duplicated(["model", "reasoning_state", "family"]).any()
    zero_with_floor = (obs["u"] == 0) & (obs["floor"] > 0) & obs["correct"].isna()
    assert not zero_with_floor.any()
