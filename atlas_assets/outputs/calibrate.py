"""Calibrate-in (issue 13): a capability for every model outside the main fit, from that fit, without a refit.

A model that arrives with two or three public numbers is removed by the coverage filter
(`sql/06_modeled_observations.sql`: < 3 families) or is simply newer than the last fit, so it
has no capability. Here each such model gets its posterior *given the main fit*: for every
posterior draw d of the family parameters (b, beta, kappa, hurdle, rating sd), of the shared
reasoning effects and of the reasoning scales, the posterior of the model's capability from
its own observations, under the program's likelihood and prior:

    theta ~ N(m_d, s_d)                              (the standardised scale; see "The prior of theta")
    phi_s = theta + shared_d[r_s] + amp d_lin_s + curv d_quad_s + dev_s
    amp ~ N(0, amp_sd_d), curv ~ N(0, curv_sd_d)     (if the model has a non-pinned ladder state)
    dev_s ~ N(0, offdev_sd_d[r_s])                   (each non-pinned off-ladder state)

with the pinned state, the contrasts and the per-model terms built exactly as
`stan_data.build_stan_data` builds them. One draw of phi per main-fit draw, so the calibrated
draws are aligned with the fitted ones: the same display scale applies per draw and rank
probabilities against fitted states are joint.

Method (measured in tests/outputs/test_calibrate.py against dense grids, and in bench/bench_calibrate.py):
- theta, per draw, by grid quadrature: the log posterior on a coarse grid over [-GRID_LIMIT, GRID_LIMIT]
  locates the mass, a fine grid of FINE_POINTS nodes spans it (the coarse nodes within LOG_DENSITY_WINDOW of
  the maximum, one coarse step beyond each side), and theta is drawn from the piecewise-linear density through
  the fine nodes (inverse CDF, exact within a cell). The same quadrature gives the marginal likelihood per draw.
  A one-state model (308 of the 312 real candidates) needs nothing else.
- the per-model reasoning terms, grouped in blocks that are independent given theta (the ladder states' shared
  amplitude and curvature; each off-ladder state's deviation; each unknown setting's effect), are integrated
  by importance sampling at every theta node: NUISANCE_SAMPLES draws from the Gaussian conditional of the
  block's coefficients given theta under a Gaussian approximation of each member state's likelihood
  (`_gaussian_approximation`, sd inflated by PROPOSAL_INFLATION), weighted by prior x exact likelihood /
  proposal. Drawing them from their prior instead was biased where the data sit in the prior's tail (a
  deviation at 3 prior sd: 0.11 latent units off with 64 prior draws, 0.03 with 1024; 0.004 with 8 draws
  from this proposal). After theta is drawn, the block's terms are resampled from RESAMPLE_SAMPLES fresh
  proposals at that theta (sampling importance resampling).

The prior of theta (outputs.yaml `calibrate.theta_prior`). The program's prior N(0, 1) is the
prior of a model drawn from the whole population; in the main fit hundreds of results swamp it,
for a model with two results it carries much of the estimate, and it shrinks every new model
towards the population's mean although capability rises steeply with release date (real fit:
correlation 0.83 between posterior-mean theta and release date, residual sd 0.53 against 1.0).
With "release_trend" the prior is what the fit itself says about a model released on that date:
per draw d, the fitted models' theta_d regressed on release date (ordinary least squares on a
line in years), m_d its prediction at the model's date and s_d the predictive sd (residual sd
with the line's own uncertainty). A model without a date keeps N(0, 1). Measured on the
forward_thin study (docs/validation.md).

What it is not: the new observations do not move the family parameters or the display scale
(a "cut" posterior, as in fixed-item IRT linking). `feedback_ess_share` measures how much they
would: the effective sample size of the main-fit draws reweighted by the new model's marginal
likelihood p(y_new | draw), over the number of draws. Near 1 the full refit would agree; low
values say the new numbers are in tension with the fitted families (a refit would move them).

A state whose reasoning setting is not one the fit knows (cannot happen after the registry's
reasoning rules map labels, but can with a new label or config) is given the prior of a new
shared effect, N(0, shared_sd_d), integrated like the per-model terms, and says so in its
status: its own capability phi_s is still measured by its data, only its split into theta and
a reasoning effect is unknown.

Pure functions of arrays and frames: the Dagster asset is `atlas_assets.defs.outputs.calibrated`.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy.special import betainc, expit, gammaln, log_expit, logsumexp

from atlas_assets.outputs.cell_model import FamilyLikelihood, predictive
from atlas_assets.outputs.cell_predictions import family_cell_frame, interval_columns, observed_verification
from atlas_assets.outputs.draws import PosteriorDraws, thin_index, typical_items

# Settings (module constants for now: a config file under atlas_assets/config/ would be part of the fit's
# fingerprint unless listed downstream in spec.py; candidates for an outputs.yaml section `calibrate`).
GRID_LIMIT = 7.0            # theta grid spans +-7 prior sd: beyond that N(0, 1) leaves < e^-24 of mass
COARSE_POINTS = 41          # coarse step 0.35 latent units (~6 display units)
FINE_POINTS = 64            # fine nodes per draw over the located mass
LOG_DENSITY_WINDOW = 20.0   # fine grid covers coarse nodes within this log-density of the per-draw maximum
NUISANCE_SAMPLES = 16       # importance draws of the per-model reasoning terms per draw and theta node
RESAMPLE_SAMPLES = 256      # importance draws at the drawn theta, one of which is kept (resampling)
PROPOSAL_INFLATION = 1.5    # proposal sd / sd of its Gaussian approximation: heavier than the target's tails
REFERENCE_SD = 2.0          # broad reference prior under which a state's likelihood is approximated
STATUS = "calibrated (thin evidence)"
PATH = "calibrated"
BLOCK_ELEMENTS = 1 << 20    # draws x nodes x nuisance draws evaluated at once (memory, not results)


# ----------------------------------------------------------------------------------------------- draws


@dataclass(frozen=True)
class ReasoningDraws:
    """The reasoning part of the posterior, per draw (draw first), in the fit's setting order."""

    ladder: tuple[str, ...]
    off_ladder: tuple[str, ...]
    default: str
    pin_preference: tuple[str, ...]
    shared_effect: np.ndarray   # (D, L + K) in the order ladder + off_ladder
    shared_sd: np.ndarray       # (D,)
    amp_sd: np.ndarray          # (D,)
    curv_sd: np.ndarray         # (D,)
    offdev_sd: np.ndarray       # (D, K)

    @property
    def n_draws(self) -> int:
        return self.shared_effect.shape[0]

    def setting_code(self, setting: str) -> int:
        """0 default, 1..L ladder, L+1..L+K off-ladder, -1 unknown (as `stan_data`)."""
        if setting == self.default:
            return 0
        known = list(self.ladder) + list(self.off_ladder)
        return known.index(setting) + 1 if setting in known else -1

    def take(self, keep: np.ndarray) -> "ReasoningDraws":
        return replace(self, shared_effect=self.shared_effect[keep], shared_sd=self.shared_sd[keep],
                       amp_sd=self.amp_sd[keep], curv_sd=self.curv_sd[keep], offdev_sd=self.offdev_sd[keep])

    def thin(self, max_draws: int) -> "ReasoningDraws":
        """The same evenly spaced draws as `PosteriorDraws.thin`."""
        keep = thin_index(self.n_draws, max_draws)
        return self if len(keep) == self.n_draws else self.take(keep)


def reasoning_draws_from_fit(loaded) -> ReasoningDraws:
    """ReasoningDraws of a fit read back by `fit_process.load_fit` (all draws; `.thin` like PosteriorDraws)."""
    from atlas_assets.model.scores import draws_of

    idata, rcfg = loaded.idata, loaded.config["reasoning"]
    D = draws_of(idata, "shared_sd").shape[0]
    K = len(rcfg["off_ladder"])
    offdev = draws_of(idata, "offdev_sd").reshape(D, -1) if K else np.zeros((D, 0))
    return ReasoningDraws(
        ladder=tuple(rcfg["ladder"]), off_ladder=tuple(rcfg["off_ladder"]), default=rcfg.get("default", "default"),
        pin_preference=tuple(rcfg.get("pin_preference", [])),
        shared_effect=draws_of(idata, "shared_effect").reshape(D, -1), shared_sd=draws_of(idata, "shared_sd").reshape(D),
        amp_sd=draws_of(idata, "amp_sd").reshape(D), curv_sd=draws_of(idata, "curv_sd").reshape(D), offdev_sd=offdev)


# ----------------------------------------------------------------------------------------------- likelihood


def likelihood_pieces(obs: pd.DataFrame, families: pd.DataFrame) -> pd.DataFrame:
    """`obs` (model, reasoning_state, family, kind, u, correct, items) with family_pos, piece, hurdle, k, n, and
    `drop_reason` (None, or why the row cannot enter the likelihood), by the rules of `build_stan_data`."""
    fam = families.set_index("family")
    out = obs.reset_index(drop=True).copy()
    out["family_pos"] = out["family"].map(fam["family_pos"]).astype(int)
    floor = out["family"].map(fam["floor"]).to_numpy(dtype=float)
    bounded = (out["family"].map(fam["kind"]) == "bounded").to_numpy()
    u = out["u"].to_numpy(dtype=float)
    countable = (out["correct"].notna() & out["items"].notna()).to_numpy() & bounded
    k = np.where(countable, pd.to_numeric(out["correct"]).fillna(0).to_numpy(dtype=float), 0).round()
    n = np.where(countable, pd.to_numeric(out["items"]).fillna(1).to_numpy(dtype=float), 1).round()
    floor_free = floor == 0
    zero = np.where(countable, k == 0, u == 0) & bounded
    piece = np.full(len(out), "", dtype=object)
    piece[countable & ~(zero & floor_free)] = "bb"
    piece[countable & zero & floor_free] = "bbz"
    cont = bounded & ~countable
    piece[cont & (u > 0) & (u < 1)] = "beta"
    piece[cont & (u >= 1)] = "one"
    piece[cont & (u <= 0)] = "zero"
    piece[~bounded] = "rating"
    reason = np.full(len(out), None, dtype=object)
    # the cleaning chain screens these out upstream; a row that still carries one is not invented into the fit
    reason[zero & ~floor_free & ~countable] = "continuous exact zero in a family with a guessing floor"
    reason[~np.isfinite(u)] = "missing score"
    reason[bounded & ((u < 0) | (u > 1))] = "bounded score outside [0, 1]"
    reason[countable & ((n < 1) | (k < 0) | (k > n))] = "correct/items out of range"
    out["piece"], out["hurdle"], out["k"], out["n"], out["drop_reason"] = piece, bounded & floor_free, k, n, reason
    return out


def _per_draw(x: np.ndarray, ndim: int) -> np.ndarray:
    return np.asarray(x, dtype=float).reshape((-1,) + (1,) * (ndim - 1))


def observation_log_likelihood(eta: np.ndarray, piece: str, fam: FamilyLikelihood, u: float = np.nan,
                               k: float = 0.0, n: float = 1.0) -> np.ndarray:
    """Log-likelihood of ONE observation at linear predictors `eta` (draw first, any trailing shape), with the
    family's parameters per draw: the formulas of `scores.observation_draws` (constants kept, so the marginal
    likelihood of a calibrated model is a proper one). The beta functions are written as log-gammas because
    a + b = kappa: the terms in kappa alone are computed once per draw, not once per grid node (2.4x faster)."""
    eta = np.asarray(eta, dtype=float)
    if piece == "rating":
        sd = _per_draw(fam.rating_sd, eta.ndim)
        return -0.5 * ((u - eta) / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi)
    c = fam.floor
    kap = _per_draw(fam.kappa, eta.ndim)
    a = (c + (1 - c) * expit(eta)) * kap
    b = (1 - c) * expit(-eta) * kap
    lg_a, lg_b = gammaln(a), gammaln(b)
    if fam.hurdle:
        h = _per_draw(fam.hurdle_a, eta.ndim) - _per_draw(fam.hurdle_b, eta.ndim) * eta
    if piece == "bb":
        # log C(n, k) + lbeta(k + a, n - k + b) - lbeta(a, b)
        const = gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1) + gammaln(kap) - gammaln(n + kap)
        out = gammaln(k + a) + gammaln(n - k + b) - lg_a - lg_b + const
    elif piece == "bbz":
        # log P(0 | n) = lbeta(a, n + b) - lbeta(a, b)
        lp0 = gammaln(n + b) - lg_b + gammaln(kap) - gammaln(n + kap)
        return np.logaddexp(log_expit(h), log_expit(-h) + lp0)
    elif piece == "beta":
        out = (a - 1) * np.log(u) + (b - 1) * np.log1p(-u) + gammaln(kap) - lg_a - lg_b
    elif piece == "one":
        with np.errstate(divide="ignore"):
            out = np.log(betainc(b, a, fam.one_eps))
    elif piece == "zero":
        return log_expit(h)
    else:
        raise ValueError(f"unknown likelihood piece {piece!r}")
    return out + log_expit(-h) if fam.hurdle else out


# ----------------------------------------------------------------------------------------------- one model


@dataclass(frozen=True)
class StateLayout:
    """The states of one calibrated model, built as `build_stan_data` builds a model's states.

    `block` groups the states whose reasoning terms are shared: 0 holds the pinned state and any other
    state without a per-model term, 1 the non-pinned ladder states (one amplitude and curvature for all),
    then one block per non-pinned off-ladder state (its deviation) and per unknown setting. Given theta the
    blocks are independent, so each block's terms are integrated on their own."""

    states: pd.DataFrame   # reasoning_state, setting_code, pinned, d_lin, d_quad, dev_setting, unknown_setting, block

    @property
    def has_ladder_terms(self) -> bool:
        return bool((self.states["block"] == 1).any())


def state_layout(n_obs_by_state: Mapping[str, int], reasoning: ReasoningDraws) -> StateLayout:
    """Pinned state (default where observed, else most observations, ties by `pin_preference`), ladder
    contrasts relative to the pinned level, and which states carry a free off-ladder deviation. A state with 0
    observations is an unmeasured setting: its phi comes from theta and the reasoning terms alone."""
    from atlas_assets.model.stan_data import orthogonal_contrasts

    L = len(reasoning.ladder)
    lin, quad = orthogonal_contrasts(L)
    pref = {s: i for i, s in enumerate([reasoning.default] + list(reasoning.pin_preference))}
    rows = []
    for state, n_obs in n_obs_by_state.items():
        code = reasoning.setting_code(state)
        rows.append({"reasoning_state": state, "setting_code": code, "n_obs": int(n_obs),
                     "_default": state == reasoning.default, "_pref": pref.get(state, 100 + (code if code >= 0 else 99))})
    st = pd.DataFrame(rows)
    st["_order"] = st["setting_code"].where(st["setting_code"] >= 0, 10_000)
    st = st.sort_values(["_order", "reasoning_state"]).reset_index(drop=True)
    # a state without results (an unmeasured setting, placed through the structure) is never the pinned one
    st["observed"] = st["n_obs"] > 0
    if not st["observed"].any():
        raise ValueError("a calibrated model needs at least one state with results")
    pinned = st.sort_values(["observed", "_default", "n_obs", "_pref"], ascending=[False, False, False, True]).index[0]
    st["pinned"] = st.index == pinned
    on_ladder = st["setting_code"].between(1, L)
    pin_code = int(st.loc[pinned, "setting_code"])
    base_lin = lin[pin_code - 1] if 1 <= pin_code <= L else 0.0
    base_quad = quad[pin_code - 1] if 1 <= pin_code <= L else 0.0
    lvl = (st["setting_code"] - 1).clip(0, L - 1).to_numpy()
    ladder_term = on_ladder & ~st["pinned"]
    st["d_lin"] = np.where(ladder_term, lin[lvl] - base_lin, 0.0)
    st["d_quad"] = np.where(ladder_term, quad[lvl] - base_quad, 0.0)
    off = (st["setting_code"] > L) & ~st["pinned"]
    st["dev_setting"] = np.where(off, st["setting_code"] - L - 1, -1).astype(int)
    st["unknown_setting"] = st["setting_code"] < 0
    own = (off | st["unknown_setting"]).to_numpy()
    st["block"] = np.where(ladder_term, 1, 0)
    st.loc[own, "block"] = 2 + np.arange(int(own.sum()))
    return StateLayout(st.drop(columns=["_default", "_pref", "_order"]))


def _state_offsets(layout: StateLayout, reasoning: ReasoningDraws) -> np.ndarray:
    """(D, S_m): the shared effect of each state's setting per draw (0 for default and unknown settings)."""
    out = np.zeros((reasoning.n_draws, len(layout.states)))
    for i, code in enumerate(layout.states["setting_code"]):
        if code >= 1:
            out[:, i] = reasoning.shared_effect[:, code - 1]
    return out


@dataclass(frozen=True)
class Block:
    """One block of per-model reasoning terms: c ~ N(0, diag(prior_sd^2)) (r = 1 or 2 coefficients) and each
    member state's term is design @ c (off-ladder / unknown: one state, design [[1]]; ladder: the states'
    (d_lin, d_quad) rows, c = (amp, curv))."""

    members: np.ndarray      # layout positions of the member states (m,)
    design: np.ndarray       # (m, r)
    prior_sd: np.ndarray     # (D, r)
    rows: pd.DataFrame       # the block's observations
    # Gaussian approximation of each member's likelihood, per draw (the proposal's ingredients, not the target)
    approx_mean: np.ndarray  # (D, m)
    approx_var: np.ndarray   # (D, m)
    z: np.ndarray            # (D, K, r) standard normal draws shared by every theta node (smooth in theta)

    def proposal(self, theta: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For theta (D, G): coefficient draws c (D, G, K, r) from the Gaussian conditional of c given theta under
        the approximated likelihoods (covariance inflated by PROPOSAL_INFLATION^2), and log prior - log proposal."""
        X, D = self.design, theta.shape[0]
        prec_prior = 1.0 / self.prior_sd ** 2                                           # (D, r)
        w_inv = 1.0 / self.approx_var                                                   # (D, m)
        lam = np.einsum("ms,dm,mt->dst", X, w_inv, X) + prec_prior[:, :, None] * np.eye(X.shape[1])[None]
        cov = np.linalg.inv(lam)
        gain = np.einsum("drs,ms,dm->drm", cov, X, w_inv)                              # (D, r, m)
        resid = self.approx_mean[:, None, :] - theta[:, :, None] - offsets[:, None, self.members]   # (D, G, m)
        mean = np.einsum("drm,dgm->dgr", gain, resid)
        chol = PROPOSAL_INFLATION * np.linalg.cholesky(cov)                             # (D, r, r)
        c = mean[:, :, None, :] + np.einsum("drs,dks->dkr", chol, self.z)[:, None, :, :]
        log_q = (-0.5 * (self.z ** 2).sum(axis=2) - np.log(np.abs(np.linalg.det(chol)))[:, None])[:, None, :]
        log_prior = (-0.5 * (c / self.prior_sd[:, None, None, :]) ** 2
                     - np.log(self.prior_sd)[:, None, None, :]).sum(axis=3)
        return c, log_prior - log_q


def log_likelihood_at(phi_of_state, obs: pd.DataFrame, draws: PosteriorDraws, families: pd.DataFrame, sl: slice) -> np.ndarray:
    """Sum of the log-likelihoods of `obs` for draws `sl`, each row at phi_of_state(layout position)."""
    out = 0.0
    for row in obs.itertuples(index=False):
        j = int(row.family_pos)
        phi = phi_of_state(int(row.layout_pos))
        shape = (-1,) + (1,) * (phi.ndim - 1)
        eta = draws.beta[sl, j].reshape(shape) * (phi - draws.b[sl, j].reshape(shape))
        out = out + observation_log_likelihood(eta, row.piece, _draw_slice(draws.family(j, families), sl),
                                               u=float(row.u), k=float(row.k), n=float(row.n))
    return out


def _draw_slice(fam: FamilyLikelihood, sl: slice) -> FamilyLikelihood:
    take = lambda x: None if x is None else np.asarray(x)[sl]  # noqa: E731
    return replace(fam, kappa=take(fam.kappa), rating_sd=take(fam.rating_sd), hurdle_a=take(fam.hurdle_a),
                   hurdle_b=take(fam.hurdle_b))


def _draw_chunks(D: int, per_draw: int):
    step = max(1, BLOCK_ELEMENTS // max(1, per_draw))
    for start in range(0, D, step):
        yield slice(start, min(D, start + step))


def _grid_posterior(log_density, D: int, coarse_points: int, fine_points: int, centre: np.ndarray | float = 0.0):
    """Per draw, a 1-D adaptive grid: log_density(nodes (D, G)) on a coarse grid over centre +- GRID_LIMIT, then
    on FINE_POINTS nodes over the located mass. Returns (fine nodes, log density there)."""
    grid = np.linspace(-GRID_LIMIT, GRID_LIMIT, coarse_points)
    centre = np.broadcast_to(np.asarray(centre, dtype=float), (D,))
    coarse = log_density(centre[:, None] + grid[None, :])
    lo, hi = _fine_range(coarse, grid, LOG_DENSITY_WINDOW)
    nodes = centre[:, None] + lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, fine_points)[None, :]
    return nodes, log_density(nodes)


def _gaussian_approximation(rows: pd.DataFrame, draws: PosteriorDraws, families: pd.DataFrame,
                            centre: np.ndarray, coarse_points: int, fine_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Per draw, mean and variance of a Gaussian matching one state's likelihood in phi: the moments of
    likelihood x N(centre, REFERENCE_SD^2) on an adaptive grid, with the reference divided back out (a weak
    likelihood gets a very wide Gaussian: the proposal then falls back to the prior)."""
    D = draws.n_draws
    ref = REFERENCE_SD ** 2

    def log_density(nodes):
        out = np.empty(nodes.shape)
        for sl in _draw_chunks(D, nodes.shape[1]):
            out[sl] = log_likelihood_at(lambda s: nodes[sl], rows, draws, families, sl)
        return out - 0.5 * (nodes - centre[:, None]) ** 2 / ref

    nodes, lp = _grid_posterior(log_density, D, coarse_points, fine_points, centre)
    w = np.exp(lp - lp.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    mean = (w * nodes).sum(axis=1)
    var = np.maximum((w * (nodes - mean[:, None]) ** 2).sum(axis=1), 1e-12)
    prec = 1.0 / var - 1.0 / ref
    weak = prec < 1e-3
    lik_var = np.where(weak, 1e3, 1.0 / np.where(weak, 1.0, prec))
    lik_mean = np.where(weak, centre, lik_var * (mean / var - centre / ref))
    return lik_mean, lik_var


def _blocks(layout: StateLayout, obs: pd.DataFrame, reasoning: ReasoningDraws, draws: PosteriorDraws,
            families: pd.DataFrame, offsets: np.ndarray, rng: np.random.Generator, samples: int,
            coarse_points: int, fine_points: int, theta_centre: np.ndarray | float = 0.0) -> list[Block]:
    st, D = layout.states, reasoning.n_draws
    out = []
    for blk in sorted(set(st["block"]) - {0}):
        members = np.flatnonzero(st["block"].to_numpy() == blk)
        if blk == 1:
            design = st.loc[members, ["d_lin", "d_quad"]].to_numpy(dtype=float)
            prior_sd = np.column_stack([reasoning.amp_sd, reasoning.curv_sd])
        else:
            (i,) = members
            design = np.ones((1, 1))
            sd = reasoning.shared_sd if st.at[i, "unknown_setting"] else reasoning.offdev_sd[:, int(st.at[i, "dev_setting"])]
            prior_sd = sd[:, None]
        rows = obs[obs["layout_pos"].isin(members)]
        if rows.empty:
            # only unmeasured settings: nothing to approximate, their terms are drawn from the prior afterwards
            out.append(Block(members=members, design=design, prior_sd=np.maximum(prior_sd, 1e-6), rows=rows,
                             approx_mean=np.zeros((D, len(members))), approx_var=np.full((D, len(members)), 1e3),
                             z=rng.standard_normal((D, 1, design.shape[1]))))
            continue
        approx = [_gaussian_approximation(rows[rows["layout_pos"] == i], draws, families, theta_centre + offsets[:, i],
                                          coarse_points, fine_points) for i in members]
        out.append(Block(members=members, design=design, prior_sd=np.maximum(prior_sd, 1e-6), rows=rows,
                         approx_mean=np.column_stack([a[0] for a in approx]),
                         approx_var=np.column_stack([a[1] for a in approx]),
                         z=rng.standard_normal((D, samples, design.shape[1]))))
    return out


def _block_terms(block: Block, theta: np.ndarray, offsets: np.ndarray, draws: PosteriorDraws,
                 families: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """For theta (D, G): the block's coefficient draws (D, G, K, r) and their log importance weights
    (prior x likelihood / proposal), in chunks of draws."""
    D, G, K, r = theta.shape[0], theta.shape[1], block.z.shape[1], block.design.shape[1]
    coef = np.empty((D, G, K, r))
    logw = np.empty((D, G, K))
    where = {int(s): i for i, s in enumerate(block.members)}
    for sl in _draw_chunks(D, G * K):
        sub = replace(block, prior_sd=block.prior_sd[sl], approx_mean=block.approx_mean[sl],
                      approx_var=block.approx_var[sl], z=block.z[sl])
        c, log_ratio = sub.proposal(theta[sl], offsets[sl])
        terms = c @ block.design.T                                                     # (d, G, K, m)
        phi = lambda s: theta[sl, :, None] + offsets[sl, s, None, None] + terms[..., where[s]]  # noqa: E731
        coef[sl], logw[sl] = c, log_ratio + log_likelihood_at(phi, block.rows, draws, families, sl)
    return coef, logw


def _log_posterior(theta, pinned_rows, blocks, draws, families, offsets, prior: ThetaPrior) -> np.ndarray:
    """(D, G): log prior of theta + log-likelihood of the pinned-block rows + for each block of reasoning terms
    the log of its importance-sampled likelihood averaged over its terms."""
    D, G = theta.shape
    z = (theta - prior.mean[:, None]) / prior.sd[:, None]
    lp = -0.5 * z ** 2 - np.log(prior.sd)[:, None] - 0.5 * np.log(2 * np.pi)
    if len(pinned_rows):
        ll = np.empty((D, G))
        for sl in _draw_chunks(D, G):
            ll[sl] = log_likelihood_at(lambda s: theta[sl] + offsets[sl, s, None], pinned_rows, draws, families, sl)
        lp = lp + ll
    for block in blocks:
        if block.rows.empty:
            continue  # no results: the block's prior integrates to 1, it says nothing about theta
        _, logw = _block_terms(block, theta, offsets, draws, families)
        lp = lp + logsumexp(logw, axis=2) - np.log(logw.shape[2])
    return lp


def _fine_range(lp_coarse: np.ndarray, grid: np.ndarray, window: float) -> tuple[np.ndarray, np.ndarray]:
    """Per draw: the span of coarse nodes within `window` of the maximum, one coarse step beyond each side."""
    step = grid[1] - grid[0]
    inside = lp_coarse >= lp_coarse.max(axis=1, keepdims=True) - window
    first = inside.argmax(axis=1)
    last = grid.size - 1 - inside[:, ::-1].argmax(axis=1)
    return grid[first] - step, grid[last] + step


def _sample_piecewise_linear(nodes: np.ndarray, logf: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row from the density linear between (nodes, exp(logf)) (rows: equally spaced nodes)."""
    f = np.exp(logf - logf.max(axis=1, keepdims=True))
    mass = 0.5 * (f[:, :-1] + f[:, 1:])
    cdf = np.cumsum(mass, axis=1)
    rows = np.arange(len(f))
    u = rng.random(len(f)) * cdf[:, -1]
    cell = np.minimum((cdf < u[:, None]).sum(axis=1), mass.shape[1] - 1)
    left = u - np.where(cell > 0, cdf[rows, np.maximum(cell - 1, 0)], 0.0)
    share = np.clip(left / mass[rows, cell], 0.0, 1.0)
    f0, f1 = f[rows, cell], f[rows, cell + 1]
    # inverse of the cell's CDF h (f0 t + (f1 - f0) t^2 / 2), in the form that is stable when f1 ~ f0
    t = share * (f0 + f1) / (f0 + np.sqrt(np.maximum(f0 ** 2 + (f1 - f0) * share * (f0 + f1), 0.0)))
    t = np.where(np.isfinite(t), np.clip(t, 0.0, 1.0), 0.5)
    return nodes[rows, cell] + t * (nodes[:, 1] - nodes[:, 0])


def _pick(log_weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per row, an index drawn with probability proportional to exp(log_weights)."""
    p = np.exp(log_weights - log_weights.max(axis=1, keepdims=True))
    cum = np.cumsum(p, axis=1)
    return np.minimum((cum < rng.random(len(p))[:, None] * cum[:, -1:]).sum(axis=1), p.shape[1] - 1)


@dataclass(frozen=True)
class ThetaPrior:
    """Per draw, the prior of one calibrated model's theta: N(mean, sd)."""

    mean: np.ndarray  # (D,)
    sd: np.ndarray    # (D,)
    source: str = "program"

    @staticmethod
    def program(n_draws: int) -> "ThetaPrior":
        return ThetaPrior(np.zeros(n_draws), np.ones(n_draws), "program")


def _years(dates) -> np.ndarray:
    return ((pd.to_datetime(pd.Series(dates), errors="coerce") - pd.Timestamp("2020-01-01")).dt.days / 365.25).to_numpy(float)


def release_trend_priors(fitted_theta: np.ndarray, fitted_released, new_released: Mapping[str, Any],
                         min_dated_models: int = 20, bandwidth_years: float | None = None) -> dict[str, ThetaPrior]:
    """Per model of `new_released` (model -> release date or None), its theta prior from the fitted models'
    theta (D, M) regressed on their release dates (M,), draw by draw: N(prediction, predictive sd) of a line in
    years, fitted by least squares weighted by a Gaussian kernel of `bandwidth_years` around the model's date
    (None: unweighted, one line for all). Undated models, and every model when fewer than `min_dated_models`
    fitted models are dated, get N(0, 1)."""
    D = fitted_theta.shape[0]
    years = _years(fitted_released)
    dated = np.isfinite(years)
    new_years = dict(zip(new_released, _years(list(new_released.values()))))
    if dated.sum() < max(int(min_dated_models), 3):
        return {m: ThetaPrior.program(D) for m in new_released}
    t, y = years[dated], fitted_theta[:, dated]                      # (n,), (D, n)
    X = np.column_stack([np.ones(len(t)), t])
    out = {}
    for model, t0 in new_years.items():
        if not np.isfinite(t0):
            out[model] = ThetaPrior.program(D)
            continue
        w = np.ones(len(t)) if bandwidth_years is None else np.exp(-0.5 * ((t - t0) / float(bandwidth_years)) ** 2)
        bread = np.linalg.inv(X.T @ (w[:, None] * X))
        coef = (y * w) @ X @ bread                                     # (D, 2): weighted least squares per draw
        resid = y - coef @ X.T
        n_eff = w.sum() ** 2 / (w ** 2).sum()
        s2 = (w * resid ** 2).sum(axis=1) / w.sum() * n_eff / max(n_eff - 2.0, 1.0)   # (D,)
        x0 = np.array([1.0, t0])
        leverage = x0 @ bread @ (X.T @ ((w ** 2)[:, None] * X)) @ bread @ x0
        out[model] = ThetaPrior(coef @ x0, np.sqrt(s2 * (1.0 + leverage)), "release_trend")
    return out


def theta_priors_from_fit(loaded, n_draws: int, new_released: Mapping[str, Any], calibrate_cfg: Mapping[str, Any]
                          ) -> dict[str, ThetaPrior]:
    """The configured theta prior (outputs.yaml `calibrate`) of each model in `new_released`, from a fit read by
    `fit_process.load_fit`, on its draws thinned to `n_draws` (aligned with `PosteriorDraws.thin`)."""
    from atlas_assets.outputs.predicted_states import reasoning_posterior

    if calibrate_cfg["theta_prior"] == "program":
        return {}
    theta = reasoning_posterior(loaded.idata).thin(n_draws).theta
    if theta.shape[1] != len(loaded.stan_input.models):
        # a posterior without the model-level theta (hand-built test fits): nothing to regress on
        return {}
    return release_trend_priors(theta, loaded.stan_input.models["released_on"], new_released,
                                int(calibrate_cfg["min_dated_models"]), calibrate_cfg.get("bandwidth_years"))


@dataclass(frozen=True)
class CalibratedModel:
    layout: StateLayout
    phi: np.ndarray            # (D, S_m) capability of each state, aligned with the main fit's draws
    theta: np.ndarray          # (D,)
    log_evidence: np.ndarray   # (D,) log p(y_model | draw) (marginal over theta and the reasoning terms)
    term_ess: float = np.nan   # smallest mean ESS share of the reasoning-term importance weights (NaN: none)


def calibrate_model(draws: PosteriorDraws, reasoning: ReasoningDraws, families: pd.DataFrame, obs: pd.DataFrame,
                    rng: np.random.Generator, *, coarse_points: int = COARSE_POINTS, fine_points: int = FINE_POINTS,
                    nuisance_samples: int = NUISANCE_SAMPLES, prior: ThetaPrior | None = None,
                    unmeasured: tuple[str, ...] | list[str] = ()) -> CalibratedModel:
    """Posterior draws of one model's states given the main fit; `obs` are its rows from `likelihood_pieces`
    (all of one model, on fitted families, without a drop reason). `prior`: of theta (default N(0, 1)).
    `unmeasured`: further settings of the model, without results, placed through the reasoning structure
    (theta + shared effect + the model's ladder terms as its results inform them, or a prior deviation)."""
    if not len(obs):
        raise ValueError("a model without observations on fitted families is not calibrated")
    prior = prior or ThetaPrior.program(draws.n_draws)
    counts = obs.groupby("reasoning_state").size().to_dict()
    counts.update({s: 0 for s in unmeasured if s not in counts})
    layout = state_layout(counts, reasoning)
    st = layout.states
    obs = obs.assign(layout_pos=obs["reasoning_state"].map(dict(zip(st["reasoning_state"], st.index))).to_numpy())
    offsets = _state_offsets(layout, reasoning)
    pinned_rows = obs[st["block"].to_numpy()[obs["layout_pos"].to_numpy()] == 0]
    blocks = _blocks(layout, obs, reasoning, draws, families, offsets, rng, nuisance_samples, coarse_points, fine_points,
                     prior.mean)
    D = draws.n_draws
    nodes, lp = _grid_posterior(lambda t: _log_posterior(t, pinned_rows, blocks, draws, families, offsets, prior), D,
                                coarse_points, fine_points, prior.mean)
    theta = _sample_piecewise_linear(nodes, lp, rng)
    phi = theta[:, None] + offsets
    ess = []
    for block in blocks:
        if block.rows.empty:
            # unmeasured settings only: their terms are exact draws from the prior
            coef = block.prior_sd * rng.standard_normal((D, block.design.shape[1]))
            phi[:, block.members] += coef @ block.design.T
            continue
        # the block's terms given the drawn theta: importance resampling from fresh proposals at that theta
        fresh = replace(block, z=rng.standard_normal((D, RESAMPLE_SAMPLES, block.design.shape[1])))
        coef, logw = _block_terms(fresh, theta[:, None], offsets, draws, families)
        pick = _pick(logw[:, 0, :], rng)
        phi[:, block.members] += coef[np.arange(D), 0, pick, :] @ block.design.T
        w = np.exp(logw[:, 0, :] - logw[:, 0, :].max(axis=1, keepdims=True))
        ess.append(float(np.mean(w.sum(axis=1) ** 2 / (w ** 2).sum(axis=1)) / w.shape[1]))
    # marginal likelihood per draw: trapezoid over the fine nodes (the prior density is inside lp)
    top = lp.max(axis=1, keepdims=True)
    area = (nodes[:, 1] - nodes[:, 0]) * (np.exp(lp - top).sum(axis=1) - 0.5 * np.exp(lp[:, [0, -1]] - top).sum(axis=1))
    return CalibratedModel(layout, phi, theta, top[:, 0] + np.log(area), min(ess) if ess else np.nan)


def model_rng(seed: int, model: str) -> np.random.Generator:
    """A stream per model: a model's draws do not depend on which other models are calibrated with it."""
    return np.random.default_rng([int(seed), zlib.crc32(model.encode())])


def effective_sample_share(log_weights: np.ndarray) -> float:
    """Kish ESS of the normalised weights exp(log_weights), over their number."""
    w = np.exp(log_weights - log_weights.max())
    return float(w.sum() ** 2 / (w ** 2).sum() / len(w))


# ----------------------------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class Candidates:
    observations: pd.DataFrame  # rows to calibrate: likelihood_pieces columns + outside_reason
    exclusions: pd.DataFrame    # model, reasoning_state, family, n_obs, reason: what is not calibrated, and why
    # unknown-setting rows (state 'unknown') of models that also have labelled rows: not evidence for the
    # calibration, placed afterwards as a mixture over the model's settings (outputs/unknown_settings.py)
    unknown: pd.DataFrame | None = None


EXCLUSION_COLUMNS = ["model", "reasoning_state", "family", "n_obs", "reason"]


def candidate_observations(family_observations: pd.DataFrame, fit_observations: pd.DataFrame,
                           families: pd.DataFrame, coverage_audit: pd.DataFrame | None = None) -> Candidates:
    """The rows of `family_observations` (stage 05, before the coverage filter) of models outside the fit, on
    families in the fit; ratings standardised as stage 06 standardised the fit's rows. `coverage_audit`: the
    `audit_exclusions` rows of stage modeled_observations (reason per model x family) say why a model is out."""
    fo = family_observations.reset_index(drop=True)
    fitted_models = set(fit_observations["model"])
    fitted_families = set(families["family"])
    fitted_states = set(zip(fit_observations["model"], fit_observations["reasoning_state"]))
    excluded = []

    # states of fitted models that the fit lacks: their model's capability is fitted; the next refit adds them
    in_fit_model = fo["model"].isin(fitted_models)
    new_state = in_fit_model & ~pd.Series(list(zip(fo["model"], fo["reasoning_state"]))).isin(fitted_states)
    for (m, s), rows in fo[new_state & fo["family"].isin(fitted_families)].groupby(["model", "reasoning_state"]):
        excluded.append({"model": m, "reasoning_state": s, "family": ", ".join(sorted(rows["family"])),
                         "n_obs": len(rows), "reason": "state of a fitted model, new since the fit: its model's "
                         "capability is fitted and the next refit adds the state (not calibrated separately)"})

    outside = fo[~in_fit_model]
    for m, rows in outside[~outside["family"].isin(fitted_families)].groupby("model"):
        on_fitted = outside[(outside["model"] == m) & outside["family"].isin(fitted_families)]
        reason = ("no observation on a family in the fit: nothing to calibrate from" if on_fitted.empty
                  else "family not in the fit (rows on it cannot be used)")
        excluded.append({"model": m, "reasoning_state": ", ".join(sorted(rows["reasoning_state"].unique())),
                         "family": ", ".join(sorted(rows["family"].unique())), "n_obs": len(rows), "reason": reason})
    cand = outside[outside["family"].isin(fitted_families)].copy()

    # ratings: stage 06 z-scores each rating family again over the rows it keeps; apply the same map
    rating_families = families.loc[families["kind"] == "rating", "family"]
    keys = pd.MultiIndex.from_frame(fit_observations[["model", "reasoning_state", "family"]])
    in_fit = pd.MultiIndex.from_frame(fo[["model", "reasoning_state", "family"]]).isin(keys)
    for fam in rating_families:
        kept = fo.loc[in_fit & (fo["family"] == fam).to_numpy(), "u"].astype(float)
        rows = cand["family"] == fam
        if rows.any():
            sd = kept.std(ddof=1) if len(kept) > 1 else np.nan
            cand.loc[rows, "u"] = (cand.loc[rows, "u"].astype(float) - kept.mean()) / sd if sd > 0 else np.nan

    reasons = {}
    if coverage_audit is not None and len(coverage_audit):
        audit = coverage_audit[coverage_audit["model"].isin(cand["model"])]
        for m, rows in audit.groupby("model"):
            n_fam = outside.loc[outside["model"] == m, "family"].nunique()
            reasons[m] = "; ".join(f"{r} ({n_fam} families before the filter)" if r == "model_too_few_families" else r
                                   for r in sorted(rows["reason"].dropna().unique()))
    cand["outside_reason"] = cand["model"].map(reasons).fillna("new since the fit (not in its data)")
    pieces = likelihood_pieces(cand, families) if len(cand) else cand.assign(
        family_pos=[], piece=[], hurdle=[], k=[], n=[], drop_reason=[])
    for row in pieces[pieces["drop_reason"].notna()].itertuples(index=False):
        excluded.append({"model": row.model, "reasoning_state": row.reasoning_state, "family": row.family,
                         "n_obs": 1, "reason": row.drop_reason})
    kept = pieces[pieces["drop_reason"].isna()]
    for m in sorted(set(pieces["model"]) - set(kept["model"])):
        excluded.append({"model": m, "reasoning_state": None, "family": None, "n_obs": 0,
                         "reason": "every row on a fitted family was unusable: not calibrated"})
    from atlas_assets.outputs.unknown_settings import STATE as UNKNOWN

    unknown_row = (kept["reasoning_state"] == UNKNOWN).to_numpy()
    labelled = set(kept.loc[~unknown_row, "model"])
    mixed = unknown_row & kept["model"].isin(labelled).to_numpy()
    return Candidates(kept[~mixed].reset_index(drop=True),
                      pd.DataFrame(excluded, columns=EXCLUSION_COLUMNS).sort_values(["model", "reason"], kind="mergesort")
                      .reset_index(drop=True), kept[mixed].reset_index(drop=True))


# ----------------------------------------------------------------------------------------------- all models


@dataclass(frozen=True)
class Calibration:
    states: pd.DataFrame        # one row per calibrated state (model, reasoning_state, layout, evidence)
    phi: np.ndarray             # (D, S_cal) aligned with the main fit's draws
    observations: pd.DataFrame  # the rows used, with cal_pos (row of `states`)
    seconds: float
    log_evidence: np.ndarray | None = None  # (D, S_cal): its model's log p(y_model | draw), per state column


def calibrate(draws: PosteriorDraws, reasoning: ReasoningDraws, families: pd.DataFrame, observations: pd.DataFrame,
              seed: int, theta_priors: Mapping[str, ThetaPrior] | None = None,
              unmeasured: Mapping[str, Any] | None = None, **settings) -> Calibration:
    """Calibrate every model in `observations` (candidate rows, e.g. `candidate_observations(...).observations`);
    `theta_priors`: per model (e.g. `release_trend_priors`), else N(0, 1); `unmeasured`: per model, settings
    without results to place through the reasoning structure (states with n_obs 0)."""
    import time

    start = time.perf_counter()
    frames, phis, used, evidence = [], [], [], []
    theta_priors = theta_priors or {}
    for model, rows in observations.groupby("model", sort=True):
        prior = theta_priors.get(model) or ThetaPrior.program(draws.n_draws)
        extra = [] if unmeasured is None else [r for r in unmeasured.get(model, ()) if r not in set(rows["reasoning_state"])]
        fit = calibrate_model(draws, reasoning, families, rows, model_rng(seed, model), prior=prior,
                              unmeasured=tuple(extra), **settings)
        st = fit.layout.states.copy()
        fam = rows.groupby("reasoning_state")["family"].agg(lambda f: ", ".join(sorted(set(f))))
        st.insert(0, "model", model)
        st["n_families"] = st["reasoning_state"].map(rows.groupby("reasoning_state")["family"].nunique()).fillna(0).astype(int)
        st["families"] = st["reasoning_state"].map(fam)
        st["model_n_obs"], st["model_n_families"] = len(rows), rows["family"].nunique()
        st["outside_reason"] = rows["outside_reason"].iloc[0] if "outside_reason" in rows else None
        st["feedback_ess_share"] = effective_sample_share(fit.log_evidence)
        st["reasoning_term_ess_share"] = fit.term_ess
        st["theta_mean"], st["theta_sd"] = fit.theta.mean(), fit.theta.std()
        st["theta_prior"] = prior.source
        st["prior_mean"], st["prior_sd"] = float(prior.mean.mean()), float(np.sqrt(np.mean(prior.sd ** 2)))
        frames.append(st)
        phis.append(fit.phi)
        evidence.append(np.repeat(fit.log_evidence[:, None], fit.phi.shape[1], axis=1))
        used.append(rows)
    if not frames:
        return Calibration(pd.DataFrame(columns=["model", "reasoning_state", "cal_pos"]), np.zeros((draws.n_draws, 0)),
                           observations.assign(cal_pos=[]), time.perf_counter() - start)
    states = pd.concat(frames, ignore_index=True)
    states["cal_pos"] = np.arange(len(states))
    key = dict(zip(zip(states["model"], states["reasoning_state"]), states["cal_pos"]))
    obs = pd.concat(used, ignore_index=True)
    obs["cal_pos"] = [key[k] for k in zip(obs["model"], obs["reasoning_state"])]
    return Calibration(states, np.concatenate(phis, axis=1), obs, time.perf_counter() - start,
                       np.concatenate(evidence, axis=1))


def add_unknown_settings(cal: Calibration, unknown: pd.DataFrame, draws: PosteriorDraws, families: pd.DataFrame,
                         seed: int) -> Calibration:
    """The calibration with one more state per model in `unknown` (its unknown-setting rows; the model must be
    calibrated from labelled rows): phi the mixture over the model's calibrated states (measured and unmeasured)
    weighted per draw by those rows (outputs/unknown_settings.py); the rows join the observations, so its
    observed cells get p-values like any state's. Column `setting_probabilities` says where it was placed."""
    from atlas_assets.outputs.unknown_settings import STATE, place

    if unknown is None or unknown.empty:
        return cal
    states, phis, obs = [cal.states], [cal.phi], [cal.observations]
    evidence = [] if cal.log_evidence is None else [cal.log_evidence]
    next_pos = len(cal.states)
    for model, rows in unknown.groupby("model", sort=True):
        mine = cal.states[cal.states["model"] == model]
        if mine.empty:
            continue
        placed = place(model, mine["reasoning_state"].tolist(), cal.phi[:, mine["cal_pos"].to_numpy()], rows, draws,
                       families, seed)
        row = mine.iloc[[0]].copy()
        row["reasoning_state"], row["setting_code"], row["pinned"], row["observed"] = STATE, -1, False, True
        row["unknown_setting"], row["d_lin"], row["d_quad"], row["dev_setting"], row["block"] = True, 0.0, 0.0, -1, -1
        row["n_obs"], row["n_families"] = len(rows), rows["family"].nunique()
        row["families"] = ", ".join(sorted(set(rows["family"])))
        row["setting_probabilities"] = json.dumps(placed.setting_probabilities())
        row["cal_pos"] = next_pos
        states.append(row)
        phis.append(placed.phi[:, None])
        obs.append(rows.assign(cal_pos=next_pos))
        if evidence:
            evidence.append(cal.log_evidence[:, [int(mine["cal_pos"].iloc[0])]])
        next_pos += 1
    return Calibration(pd.concat(states, ignore_index=True), np.concatenate(phis, axis=1),
                       pd.concat(obs, ignore_index=True), cal.seconds,
                       np.concatenate(evidence, axis=1) if evidence else None)


# ----------------------------------------------------------------------------------------------- tables


def fitted_headline_display(draws: PosteriorDraws, states: pd.DataFrame, eligible: np.ndarray) -> pd.DataFrame:
    """Display draws (D, H) of each fitted model's headline state (its eligible state with the highest posterior
    mean, as `scores.headline_states`), as a frame of columns named by model."""
    mean = draws.phi.mean(axis=0)
    st = states.reset_index(drop=True).assign(_mean=mean, _pos=np.arange(len(states)))[np.asarray(eligible, bool)]
    head = st.loc[st.groupby("model")["_mean"].idxmax(), ["model", "_pos"]]
    return pd.DataFrame(draws.display(draws.phi[:, head["_pos"].to_numpy()]), columns=head["model"].to_numpy())


def eligibility(states: pd.DataFrame, rules: Mapping[str, Any]) -> np.ndarray:
    """The fit's rank-eligibility rule (`scores.rank_eligible`) on calibrated states."""
    ok = ((states["n_families"] >= int(rules.get("min_families", 1))) & (states["n_obs"] >= int(rules.get("min_observations", 1)))
          & (states["n_obs"] > 0) & ~states["unknown_setting"].astype(bool))  # a headline needs a known setting
    return (ok & ~states["reasoning_state"].isin(set(rules.get("exclude_settings", []) or []))).to_numpy()


def calibrated_state_table(cal: Calibration, draws: PosteriorDraws, fitted_headlines: pd.DataFrame,
                           rules: Mapping[str, Any], interval: float, top_k: int) -> pd.DataFrame:
    """One row per calibrated state: evidence, display and latent summaries, status, rank probabilities (eligible
    states only, among the fitted models' headline states and the calibrated models' eligible headlines)."""
    st = cal.states.copy()
    if st.empty:
        return st
    st["path"] = PATH
    st["eligible"] = eligibility(st, rules)
    disp = draws.display(cal.phi)
    a = (1 - interval) / 2
    q = np.quantile(disp, [a, 0.5, 1 - a], axis=0)
    st["display_mean"], st["display_median"] = disp.mean(axis=0), q[1]
    st["display_lower"], st["display_upper"], st["display_sd"] = q[0], q[2], disp.std(axis=0)
    st["latent_mean"], st["latent_sd"] = cal.phi.mean(axis=0), cal.phi.std(axis=0)
    if cal.log_evidence is not None:
        # the same draws reweighted by the model's marginal likelihood: what a refit with it would give (up to the
        # reference standardisation); far from display_mean = the new numbers would move the families
        w = np.exp(cal.log_evidence - cal.log_evidence.max(axis=0, keepdims=True))
        st["display_mean_reweighted"] = (w * disp).sum(axis=0) / w.sum(axis=0)
    else:
        st["display_mean_reweighted"] = np.nan
    st["interval"] = interval
    min_f, min_o = int(rules.get("min_families", 1)), int(rules.get("min_observations", 1))
    st["status"] = np.where(
        st["eligible"], f"{STATUS}: rank-eligible",
        [f"{STATUS}: below the rank-eligibility gate ({f} families, {o} observations; a rank needs >= {min_f} "
         f"families and >= {min_o} observations in one state)" for f, o in zip(st["n_families"], st["n_obs"])])
    st.loc[st["unknown_setting"], "status"] = (f"{STATUS}: unknown reasoning setting, its shared effect drawn from "
                                               "the spread of the shared effects (the model has no known setting); "
                                               "never rank-eligible")
    if "setting_probabilities" in st:
        mixed = st["setting_probabilities"].notna()
        st.loc[mixed, "status"] = (f"{STATUS}: unknown setting: mixture over the model's settings, weighted by the "
                                   "run's own scores; never rank-eligible")
    else:
        st["setting_probabilities"] = None
    st.loc[~st["observed"], "status"] = (f"{STATUS}: predicted setting, no result at this setting (theta from the "
                                         "model's other settings, the fit's shared effect and the model's reasoning "
                                         "terms); never rank-eligible")
    # rank probabilities: each model once (its headline), fitted and calibrated alike
    elig = st[st["eligible"]]
    heads = elig.loc[elig.groupby("model")["display_mean"].idxmax()] if len(elig) else elig
    pop = np.concatenate([fitted_headlines.to_numpy(), disp[:, heads["cal_pos"].to_numpy()]], axis=1)
    owner = np.concatenate([fitted_headlines.columns.to_numpy(dtype=object), heads["model"].to_numpy(dtype=object)])
    st["p_rank1"], st[f"p_top{top_k}"], st["expected_rank"] = np.nan, np.nan, np.nan
    for i in elig.index:
        others = pop[:, owner != st.at[i, "model"]]
        rank = 1 + (others > disp[:, [int(st.at[i, "cal_pos"])]]).sum(axis=1)
        st.loc[i, ["p_rank1", f"p_top{top_k}", "expected_rank"]] = [(rank == 1).mean(), (rank <= top_k).mean(), rank.mean()]
    st["headline"] = st.index.isin(heads.index)
    columns = ["model", "reasoning_state", "path", "status", "eligible", "headline", "n_obs", "n_families", "families",
               "model_n_obs", "model_n_families", "display_mean", "display_median", "display_lower", "display_upper",
               "display_sd", "latent_mean", "latent_sd", "interval", "display_mean_reweighted", "p_rank1", f"p_top{top_k}", "expected_rank",
               "outside_reason", "observed", "pinned", "setting_code", "unknown_setting", "setting_probabilities",
               "theta_prior", "prior_mean", "prior_sd",
               "theta_mean", "theta_sd",
               "feedback_ess_share", "reasoning_term_ess_share", "cal_pos"]
    return st[columns].sort_values(["display_mean", "model"], ascending=[False, True]).reset_index(drop=True)


def calibrated_cell_predictions(cal: Calibration, draws: PosteriorDraws, families: pd.DataFrame,
                                fit_observations: pd.DataFrame, eligible: np.ndarray, cfg: Mapping[str, Any],
                                scales: pd.DataFrame | None = None) -> pd.DataFrame:
    """The columns of `cell_predictions` for calibrated states: every fitted family x calibrated state; unobserved
    cells predicted with the family's typical item count in the FIT, observed cells with their mid-p value
    (replicates from the calibrated posterior, which their own score informed: with one or two observations a
    p-value near 1/2 is expected, and only a far-off one is a signal). `state_pos` is the row (`cal_pos`) of
    the calibrated state."""
    pairs = interval_columns(cfg["cell_predictions"]["intervals"])
    rng = np.random.default_rng([int(cfg["draws"]["seed"]), 13])
    typical = typical_items(fit_observations, len(families))
    obs = cal.observations
    obs_items = np.where(obs["piece"].isin(["bb", "bbz"]), obs["n"].astype(float), np.nan)
    scale_by_family = {} if scales is None else {r["family"]: r for _, r in scales.iterrows()}
    phi = cal.phi
    S = phi.shape[1]
    frames = []
    for j, fam in families.reset_index(drop=True).iterrows():
        lik = draws.family(j, families)
        rows_j = np.flatnonzero(obs["family_pos"].to_numpy() == j)
        seen = obs["cal_pos"].to_numpy(dtype=int)[rows_j]
        todo = np.setdiff1d(np.arange(S), seen)
        eta = lambda pos: draws.beta[:, [j]] * (phi[:, pos] - draws.b[:, [j]])  # noqa: E731
        rep_obs = predictive(rng, eta(seen), lik, obs_items[rows_j]) if len(seen) else np.empty((draws.n_draws, 0))
        items_new = np.full(len(todo), typical[j])
        rep_new = predictive(rng, eta(todo), lik, items_new) if len(todo) else np.empty((draws.n_draws, 0))
        u_obs = obs["u"].to_numpy(dtype=float)[rows_j]
        frames.append(family_cell_frame(rep_obs, rep_new, u_obs, seen, todo, obs_items[rows_j], items_new, fam["family"],
                                        j, scale_by_family.get(fam["family"]), pairs, lik.kind))
    out = pd.concat(frames, ignore_index=True)
    st = cal.states.set_index("cal_pos")
    out.insert(0, "model", st["model"].to_numpy()[out["state_pos"]])
    out.insert(1, "reasoning_state", st["reasoning_state"].to_numpy()[out["state_pos"]])
    out["eligible"] = np.asarray(eligible, dtype=bool)[out["state_pos"]]
    out["verification_class"] = observed_verification(out, obs.rename(columns={"cal_pos": "state_pos"}))
    out["path"] = PATH
    return out.sort_values(["family_pos", "state_pos"], kind="mergesort").reset_index(drop=True)
