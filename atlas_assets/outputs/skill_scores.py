"""Skill scores per category (issue 12, seed 004 section 09): a state's capability from one category's families.

Each fitted family belongs to the category of its primary benchmark in the registry (`family_categories`;
outputs.yaml `skill_scores.also_in` adds further categories, e.g. a scientific coding benchmark in both coding
and science). A state's skill in category c is a capability phi_c on the same latent scale as phi, placed
per posterior draw d of the main fit's family parameters (a cut posterior, as calibrate-in,
outputs/calibrate.py, whose likelihood and grid quadrature this reuses):

    phi    ~ N(mu_d, sd_d)                   the population of fitted states at draw d (mean, sd of phi_d)
    phi    | the state's results OUTSIDE c   its general capability without the category
    phi_c  = phi + delta,  delta ~ N(0, tau_c^2)
    phi_c  | the state's results IN c        the skill

So the skill is the category's results read against a prior that is the state's general capability from its
OTHER results, widened by a category deviation tau_c. Using the fitted posterior of phi as that prior would count
the category's results twice (they are in it); a prior from the other categories does not. tau_c is learned per
category by empirical Bayes: the tau on a grid that maximises sum over states of log mean_d p_d(results in c |
results outside c, tau) (the predictive score of the category from the rest; thinned draws), over states with
>= min_families families in c and >= 1 outside it; a category with fewer than `min_states` such states takes the
tau that maximises the sum over all categories. tau -> 0 gives back the general capability from every result;
tau -> infinity the category's results alone. Per draw: the rest posterior on an adaptive grid, entering through its
mean m_d and variance v_d (prior of phi_c: N(m_d, v_d + tau^2); `exact=True` convolves the grid itself, a Gaussian
mixture: bench section 4 measures the difference, a median 0.014 display units), times the category likelihood, on
a second adaptive grid; one phi_c drawn per draw (inverse CDF), so display = offset_d + scale_d phi_c per draw, the
display scale of state_scores. A state's results at other reasoning settings of its model do not enter (the skill
is the state's own).

Published only where the state has >= min_families families in the category; every other state x category row
says "not enough data" and carries no number.

States calibrated in from outside the fit (`calibrated_skill_scores`) are read the same way, with calibrate-in's
prior of the state in place of the population of fitted states and its calibrate-in draws as the general
capability, under the deviation sds the fitted states learned; flagged path "calibrated", not ranked. `heldout_within_category` is the validation: leave one family's
cell out of a state with >= 3 families in a category, predict it from the skill, from the general capability
(tau = 0) and from the category alone, with the same draws and likelihood (bench/bench_skill_scores.py).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy.special import logsumexp

from atlas_assets.outputs.calibrate import (
    COARSE_POINTS,
    FINE_POINTS,
    PATH as CALIBRATED_PATH,
    Calibration,
    ReasoningDraws,
    ThetaPrior,
    _draw_chunks,
    _grid_posterior,
    _sample_piecewise_linear,
    likelihood_pieces,
    log_likelihood_at,
)
from atlas_assets.outputs.cell_model import predictive
from atlas_assets.outputs.draws import PosteriorDraws, thin_index

PUBLISHED = "published"
NOT_ENOUGH = "not enough data"
LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)


# ----------------------------------------------------------------------------------------------- categories


def family_categories(registry: pd.DataFrame, fitted_families, also_in: Mapping[str, list[str]] | None = None
                      ) -> pd.DataFrame:
    """(family, category, basis): one row per fitted family and category it counts toward. The category of the
    family's primary benchmark; a family without a primary takes its components' category when they agree (else
    their most common one, ties by name); `also_in` adds categories. A family the registry does not know is
    listed with category None (it counts toward no skill) so nothing is dropped silently."""
    rows = []
    reg = registry[registry["family"].isin(set(fitted_families))]
    for family in sorted(set(fitted_families)):
        mine = reg[reg["family"] == family]
        primary = mine.loc[mine["role"] == "primary", "category"].dropna()
        if len(primary) and primary.nunique() == 1:
            rows.append((family, primary.iloc[0], "primary benchmark"))
        elif len(mine["category"].dropna()):
            counts = mine["category"].dropna().value_counts()
            top = sorted(counts[counts == counts.max()].index)[0]
            rows.append((family, top, "its benchmarks' category" if counts.size == 1 else
                         f"most common of its benchmarks' categories ({', '.join(sorted(counts.index))})"))
        else:
            rows.append((family, None, "not in the registry: counts toward no skill"))
    for family, extra in (also_in or {}).items():
        if family in set(fitted_families):
            rows += [(family, c, "outputs.yaml skill_scores.also_in") for c in extra]
    out = pd.DataFrame(rows, columns=["family", "category", "basis"])
    return out.drop_duplicates(["family", "category"]).reset_index(drop=True)


# ----------------------------------------------------------------------------------------------- grids


@dataclass(frozen=True)
class Prior:
    """Per draw, N(mean, sd) of a state's phi before any of its results."""

    mean: np.ndarray  # (D,)
    sd: np.ndarray    # (D,)

    @staticmethod
    def population(draws: PosteriorDraws) -> "Prior":
        """The fitted states at each draw: the prior of a state drawn from them."""
        return Prior(draws.phi.mean(axis=1), draws.phi.std(axis=1))

    def take(self, keep: np.ndarray) -> "Prior":
        return Prior(self.mean[keep], self.sd[keep])


def _log_likelihood(obs: pd.DataFrame, draws: PosteriorDraws, families: pd.DataFrame, nodes: np.ndarray) -> np.ndarray:
    """(D, G): the summed log-likelihood of `obs` (likelihood_pieces rows of ONE state) at phi = nodes."""
    out = np.zeros(nodes.shape)
    if obs.empty:
        return out
    rows = obs[["family_pos", "piece", "u", "k", "n"]].assign(layout_pos=0)  # narrow: itertuples is the cost
    for sl in _draw_chunks(nodes.shape[0], nodes.shape[1]):
        out[sl] = log_likelihood_at(lambda _: nodes[sl], rows, draws, families, sl)
    return out


def _normal_logpdf(x: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    return -0.5 * ((x - mean[:, None]) / sd[:, None]) ** 2 - np.log(sd)[:, None] - LOG_SQRT_2PI


@dataclass(frozen=True)
class Rest:
    """Per draw, the posterior of phi from a state's results outside the category: grid nodes and normalised
    log masses, or (no such results) the prior itself."""

    prior: Prior
    nodes: np.ndarray | None = None      # (D, R)
    log_mass: np.ndarray | None = None   # (D, R), logsumexp over R = 0

    @property
    def centre(self) -> np.ndarray:
        if self.nodes is None:
            return self.prior.mean
        return (np.exp(self.log_mass) * self.nodes).sum(axis=1)

    @property
    def variance(self) -> np.ndarray:
        if self.nodes is None:
            return self.prior.sd ** 2
        return (np.exp(self.log_mass) * (self.nodes - self.centre[:, None]) ** 2).sum(axis=1)

    def log_prior_of_skill(self, x: np.ndarray, tau: float, exact: bool = False) -> np.ndarray:
        """(D, G): log density of phi_c = phi + N(0, tau^2) at x. By default the rest posterior enters through its
        mean and variance per draw (N(mean, var + tau^2)); `exact`: the grid mixture itself (bench: how far the two
        differ)."""
        if self.nodes is None or not exact:
            return _normal_logpdf(x, self.centre, np.sqrt(self.variance + tau ** 2))
        out = np.empty(x.shape)
        for sl in _draw_chunks(x.shape[0], x.shape[1] * self.nodes.shape[1]):
            z = (x[sl, :, None] - self.nodes[sl, None, :]) / tau
            out[sl] = logsumexp(self.log_mass[sl, None, :] - 0.5 * z ** 2, axis=2)
        return out - np.log(tau) - LOG_SQRT_2PI


def posterior_grid(obs: pd.DataFrame, draws: PosteriorDraws, families: pd.DataFrame, prior: Prior,
                   coarse_points: int = COARSE_POINTS, fine_points: int = FINE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Per draw, phi's log posterior (unnormalised) on an adaptive grid from `obs` under `prior`."""
    return _grid_posterior(lambda x: _normal_logpdf(x, prior.mean, prior.sd) + _log_likelihood(obs, draws, families, x),
                           draws.n_draws, coarse_points, fine_points, prior.mean)


def rest_posterior(rest: pd.DataFrame, draws: PosteriorDraws, families: pd.DataFrame, prior: Prior) -> Rest:
    if rest.empty:
        return Rest(prior)
    nodes, lp = posterior_grid(rest, draws, families, prior)
    return Rest(prior, nodes, lp - logsumexp(lp, axis=1, keepdims=True))


def _log_area(nodes: np.ndarray, lp: np.ndarray) -> np.ndarray:
    """Per draw, log of the trapezoid integral of exp(lp) over equally spaced nodes."""
    top = lp.max(axis=1, keepdims=True)
    area = (nodes[:, 1] - nodes[:, 0]) * (np.exp(lp - top).sum(axis=1) - 0.5 * np.exp(lp[:, [0, -1]] - top).sum(axis=1))
    return top[:, 0] + np.log(area)


def skill_posterior(rest: Rest, category: pd.DataFrame, tau: float, draws: PosteriorDraws, families: pd.DataFrame,
                    rng: np.random.Generator | None, exact: bool = False) -> tuple[np.ndarray | None, np.ndarray]:
    """(phi_c draws (D,) or None when rng is None, log p_d(category results | rest, tau) (D,))."""
    nodes, lp = _grid_posterior(lambda x: rest.log_prior_of_skill(x, tau, exact)
                                + _log_likelihood(category, draws, families, x),
                                draws.n_draws, COARSE_POINTS, FINE_POINTS, rest.centre)
    return (None if rng is None else _sample_piecewise_linear(nodes, lp, rng)), _log_area(nodes, lp)


def log_evidence_by_sd(rest: Rest, category: pd.DataFrame, taus: list[float], draws: PosteriorDraws,
                       families: pd.DataFrame, fine_points: int = 2 * FINE_POINTS) -> np.ndarray:
    """(len(taus), D): log p_d(category results | rest, tau) for each tau, on ONE fine grid per draw spanning the
    mass under every tau (the category likelihood is evaluated twice, not twice per tau)."""
    from atlas_assets.outputs.calibrate import GRID_LIMIT, LOG_DENSITY_WINDOW, _fine_range

    D, centre = draws.n_draws, rest.centre
    grid = np.linspace(-GRID_LIMIT, GRID_LIMIT, COARSE_POINTS)
    coarse = centre[:, None] + grid[None, :]
    lik = _log_likelihood(category, draws, families, coarse)
    lo, hi = np.full(D, np.inf), np.full(D, -np.inf)
    for tau in taus:
        a, b = _fine_range(rest.log_prior_of_skill(coarse, tau) + lik, grid, LOG_DENSITY_WINDOW)
        lo, hi = np.minimum(lo, a), np.maximum(hi, b)
    nodes = centre[:, None] + lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, fine_points)[None, :]
    lik = _log_likelihood(category, draws, families, nodes)
    return np.stack([_log_area(nodes, rest.log_prior_of_skill(nodes, tau) + lik) for tau in taus])


def state_rng(seed: int, *parts: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32("|".join(parts).encode())])


# ----------------------------------------------------------------------------------------------- evidence


def fit_pieces(observations: pd.DataFrame, families: pd.DataFrame) -> pd.DataFrame:
    """The fit's observations (state_pos, family, kind, u, correct, items) as likelihood rows; a row that cannot
    enter the likelihood is an error here (the fit used every one)."""
    pieces = likelihood_pieces(observations, families)
    bad = pieces[pieces["drop_reason"].notna()]
    if len(bad):
        row = bad.iloc[0]
        raise ValueError(f"fit observation (state_pos {row['state_pos']}, family {row['family']}) cannot enter the "
                         f"likelihood: {row['drop_reason']}")
    return pieces


def category_evidence(pieces: pd.DataFrame, membership: pd.DataFrame, states: pd.DataFrame) -> pd.DataFrame:
    """Every state x category (categories of the fitted families): the state's families in it, how many, and how
    many families it has outside it."""
    member = membership.dropna(subset=["category"])
    cats = sorted(member["category"].unique())
    fams = pieces.groupby("state_pos")["family"].agg(lambda f: sorted(set(f)))
    in_cat = member.groupby("category")["family"].agg(set)
    rows = []
    for pos in range(len(states)):
        mine = fams.get(pos, [])
        for c in cats:
            inside = [f for f in mine if f in in_cat[c]]
            rows.append((pos, c, len(inside), ", ".join(inside), len(mine) - len(inside)))
    out = pd.DataFrame(rows, columns=["state_pos", "category", "n_families", "families", "n_families_outside"])
    out.insert(0, "model", states["model"].to_numpy()[out["state_pos"]])
    out.insert(1, "reasoning_state", states["reasoning_state"].to_numpy()[out["state_pos"]])
    return out


def _split(pieces: pd.DataFrame, state_pos: int, families_in: set[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    mine = pieces[pieces["state_pos"] == state_pos]
    inside = mine["family"].isin(families_in)
    return mine[~inside], mine[inside]


def deviation_sds(pieces: pd.DataFrame, membership: pd.DataFrame, evidence: pd.DataFrame, draws: PosteriorDraws,
                  families: pd.DataFrame, prior: Prior, cfg: Mapping[str, Any]) -> pd.DataFrame:
    """Per category, tau_c chosen on cfg `deviation_sd.grid` by the summed log predictive score of the category's
    results from the state's other results (thinned to cfg `deviation_sd.draws` draws); `basis` says whether the
    category's own states chose it or the pooled score did (fewer than `min_states`)."""
    grid = [float(t) for t in cfg["deviation_sd"]["grid"]]
    keep = thin_index(draws.n_draws, int(cfg["deviation_sd"]["draws"]))
    sub, sub_prior = draws.thin(int(cfg["deviation_sd"]["draws"])), prior.take(keep)
    in_cat = membership.dropna(subset=["category"]).groupby("category")["family"].agg(set)
    usable = evidence[(evidence["n_families"] >= int(cfg["min_families"])) & (evidence["n_families_outside"] >= 1)]
    scores = {}
    for c, rows in usable.groupby("category"):
        per_tau = np.zeros(len(grid))
        for pos in rows["state_pos"]:
            rest_rows, cat_rows = _split(pieces, int(pos), in_cat[c])
            rest = rest_posterior(rest_rows, sub, families, sub_prior)
            log_ev = log_evidence_by_sd(rest, cat_rows, grid, sub, families)
            per_tau += logsumexp(log_ev, axis=1) - np.log(log_ev.shape[1])
        scores[c] = (per_tau, len(rows))
    pooled = np.sum([s for s, _ in scores.values()], axis=0) if scores else np.zeros(len(grid))
    out = []
    for c in sorted(in_cat.index):
        own, n = scores.get(c, (None, 0))
        if own is not None and n >= int(cfg["deviation_sd"]["min_states"]):
            tau, basis = grid[int(np.argmax(own))], f"its own {n} states"
        else:
            tau, basis = grid[int(np.argmax(pooled))], f"pooled over every category (its own states: {n})"
        out.append({"category": c, "deviation_sd": tau, "basis": basis, "n_states": n,
                    "log_score_by_sd": None if own is None else
                    "; ".join(f"{t:g}: {s:.2f}" for t, s in zip(grid, own))})
    return pd.DataFrame(out)


# ----------------------------------------------------------------------------------------------- table


SUMMARY_COLUMNS = ("display_mean", "display_median", "display_lower", "display_upper", "display_sd", "latent_mean",
                   "latent_sd", "general_display_mean", "deviation_mean", "deviation_lower", "deviation_upper")
TABLE_COLUMNS = ["model", "reasoning_state", "state_pos", "category", "status", "n_families", "families",
                 "n_families_outside", *SUMMARY_COLUMNS, "deviation_sd", "deviation_sd_display", "category_rank",
                 "interval", "rule"]


def _skill_table(pieces: pd.DataFrame, evidence: pd.DataFrame, membership: pd.DataFrame, tau_of: Mapping[str, float],
                 draws: PosteriorDraws, families: pd.DataFrame, prior_of, general: np.ndarray, min_f: int,
                 interval: float, seed: int) -> pd.DataFrame:
    """`evidence` with every summary filled where the state has >= min_f families in the category, and its status.
    `prior_of(state_pos)`: the Prior of the state's phi before any of its results; `general` (D, S): the state's
    general capability draws on the display scale, the reference of its deviation."""
    in_cat = membership.dropna(subset=["category"]).groupby("category")["family"].agg(set)
    a = (1 - interval) / 2
    out = evidence.copy()
    for name in SUMMARY_COLUMNS:
        out[name] = np.nan
    out["deviation_sd"] = out["category"].map(tau_of)
    out["deviation_sd_display"] = out["deviation_sd"] * float(np.mean(draws.scale))
    for i, row in out[out["n_families"] >= min_f].iterrows():
        pos = int(row["state_pos"])
        rest_rows, cat_rows = _split(pieces, pos, in_cat[row["category"]])
        rest = rest_posterior(rest_rows, draws, families, prior_of(pos))
        rng = state_rng(seed, row["model"], row["reasoning_state"], row["category"])
        phi_c, _ = skill_posterior(rest, cat_rows, float(tau_of[row["category"]]), draws, families, rng)
        disp = draws.display(phi_c)
        q = np.quantile(disp, [a, 0.5, 1 - a])
        dev = disp - general[:, pos]
        dq = np.quantile(dev, [a, 1 - a])
        out.loc[i, list(SUMMARY_COLUMNS)] = [disp.mean(), q[1], q[0], q[2], disp.std(), phi_c.mean(), phi_c.std(),
                                             general[:, pos].mean(), dev.mean(), dq[0], dq[1]]
    published = out["n_families"] >= min_f
    out["status"] = np.where(published, PUBLISHED, [
        f"{NOT_ENOUGH}: {n} {'family' if n == 1 else 'families'} in {c} (a skill score needs >= {min_f})"
        for n, c in zip(out["n_families"], out["category"])])
    out["interval"] = interval
    return out


def skill_scores(draws: PosteriorDraws, families: pd.DataFrame, observations: pd.DataFrame, states: pd.DataFrame,
                 membership: pd.DataFrame, cfg: Mapping[str, Any], interval: float, seed: int,
                 taus: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(skill table: every state x category, taus). `cfg`: outputs.yaml `skill_scores`; `observations`: the fit's
    (state_pos, family, kind, u, correct, items); `states`: the fit's states (model, reasoning_state) by position."""
    pieces = fit_pieces(observations, families)
    evidence = category_evidence(pieces, membership, states)
    prior = Prior.population(draws)
    taus = deviation_sds(pieces, membership, evidence, draws, families, prior, cfg) if taus is None else taus
    min_f = int(cfg["min_families"])
    out = _skill_table(pieces, evidence, membership, dict(zip(taus["category"], taus["deviation_sd"])), draws,
                       families, lambda _pos: prior, draws.display(draws.phi), min_f, interval, seed)
    out["rule"] = (f"skill = the state's capability from the category's families, per draw: prior its general "
                   f"capability from its other results widened by N(0, deviation_sd^2) (per category, empirical "
                   f"Bayes); published with >= {min_f} families in the category")
    out["category_rank"] = np.nan
    published = out["status"] == PUBLISHED
    ranked = out[published]
    out.loc[ranked.index, "category_rank"] = ranked.groupby("category")["display_mean"].rank(ascending=False,
                                                                                            method="min")
    return _ordered(out[TABLE_COLUMNS]), taus


def _ordered(table: pd.DataFrame) -> pd.DataFrame:
    return table.sort_values(["category", "display_mean", "model", "reasoning_state"],
                             ascending=[True, False, True, True], na_position="last").reset_index(drop=True)


# ----------------------------------------------------------------------------------------------- calibrated states


def calibrated_priors(states: pd.DataFrame, reasoning: ReasoningDraws, theta_priors: Mapping[str, ThetaPrior]
                      ) -> dict[int, Prior]:
    """Per calibrated state (`cal_pos`), calibrate-in's prior of its phi before any of its results: the model's theta
    prior (outputs.yaml calibrate.theta_prior; the program's N(0, 1) without one) shifted by its setting's shared
    effect, widened by the prior spread of the model's own reasoning terms that reach the state (none for the pinned
    state; amplitude and curvature on its ladder contrasts; an off-ladder deviation; an unknown setting's effect)."""
    out = {}
    for row in states.itertuples(index=False):
        theta = theta_priors.get(row.model) or ThetaPrior.program(reasoning.n_draws)
        code = int(row.setting_code)
        offset = reasoning.shared_effect[:, code - 1] if code >= 1 else np.zeros(reasoning.n_draws)
        if bool(row.pinned):
            terms = 0.0
        elif bool(row.unknown_setting):
            terms = reasoning.shared_sd ** 2
        elif int(row.dev_setting) >= 0:
            terms = reasoning.offdev_sd[:, int(row.dev_setting)] ** 2
        else:
            terms = (row.d_lin * reasoning.amp_sd) ** 2 + (row.d_quad * reasoning.curv_sd) ** 2
        out[int(row.cal_pos)] = Prior(theta.mean + offset, np.sqrt(theta.sd ** 2 + terms))
    return out


def calibrated_skill_scores(draws: PosteriorDraws, families: pd.DataFrame, calibration: Calibration,
                            reasoning: ReasoningDraws, theta_priors: Mapping[str, ThetaPrior], membership: pd.DataFrame,
                            taus: pd.DataFrame, cfg: Mapping[str, Any], interval: float, seed: int) -> pd.DataFrame:
    """The skill table of the states calibrated in (outputs/calibrate.py), by the fitted states' design: per draw,
    the prior of phi (calibrate-in's for the state, `calibrated_priors`, where a fitted state has the population of
    fitted states) updated by the state's results outside the category, widened by the category's deviation sd
    learned on the fitted states (`taus`: skill_deviations; the calibrated ones do not move it, as they do not move
    the family parameters), updated by its results in the category. The deviation is measured against the state's
    calibrate-in draws (`calibration.phi`), its general capability. Same columns as `skill_scores` plus `path`
    ("calibrated") and the state's `theta_prior`; the same "not enough data" rule; not ranked (category_rank empty:
    calibrated states are not on the fitted leaderboard). `cfg`: outputs.yaml `skill_scores`; the draws are thinned to
    its max_draws like the fitted states'."""
    keep = thin_index(draws.n_draws, int(cfg["max_draws"]))
    draws, reasoning = draws.thin(int(cfg["max_draws"])), reasoning.thin(int(cfg["max_draws"]))
    states = calibration.states.sort_values("cal_pos").reset_index(drop=True)
    min_f = int(cfg["min_families"])
    columns = [*TABLE_COLUMNS, "path", "theta_prior"]
    if states.empty:
        return pd.DataFrame(columns=columns)
    pieces = calibration.observations.rename(columns={"cal_pos": "state_pos"})
    evidence = category_evidence(pieces, membership, states)
    thinned = {m: ThetaPrior(p.mean[keep], p.sd[keep], p.source) for m, p in theta_priors.items()}
    priors = calibrated_priors(states, reasoning, thinned)
    out = _skill_table(pieces, evidence, membership, dict(zip(taus["category"], taus["deviation_sd"])), draws,
                       families, priors.__getitem__, draws.display(calibration.phi[keep]), min_f, interval, seed)
    out["rule"] = (f"calibrated state (outside the fit): skill = its capability from the category's families, per "
                   f"draw: prior its capability from its other results under calibrate-in's prior of the state, "
                   f"widened by N(0, deviation_sd^2) (the fitted states' per category); published with >= {min_f} "
                   f"families in the category; not ranked")
    out["category_rank"] = np.nan
    out["path"] = CALIBRATED_PATH
    out["theta_prior"] = states["theta_prior"].to_numpy()[out["state_pos"].to_numpy(dtype=int)]
    return _ordered(out[columns])


# ----------------------------------------------------------------------------------------------- validation


METHODS = ("skill", "general", "category_alone")


def heldout_within_category(draws: PosteriorDraws, families: pd.DataFrame, observations: pd.DataFrame,
                            states: pd.DataFrame, membership: pd.DataFrame, taus: pd.DataFrame, seed: int,
                            min_families: int = 3, intervals=(0.5, 0.9)) -> pd.DataFrame:
    """Leave one family's cell out of each state with >= min_families families in a category and predict it, per
    draw, from (skill) the skill without the cell, tau_c; (general) the capability from every other result of the
    state, tau = 0; (category_alone) the category's other results under the population prior. One row per cell x
    method with validation.metrics.cell_scores' columns. The family parameters are the main fit's, which saw the
    cell (no refit): the same for every method, so the comparison is on identical footing."""
    from atlas_assets.validation.metrics import cell_scores

    pieces = fit_pieces(observations, families)
    evidence = category_evidence(pieces, membership, states)
    prior = Prior.population(draws)
    tau_of = dict(zip(taus["category"], taus["deviation_sd"]))
    in_cat = membership.dropna(subset=["category"]).groupby("category")["family"].agg(set)
    fam_index = families.reset_index(drop=True)
    rows = []
    for row in evidence[evidence["n_families"] >= min_families].itertuples(index=False):
        rest_rows, cat_rows = _split(pieces, int(row.state_pos), in_cat[row.category])
        rest = rest_posterior(rest_rows, draws, families, prior)
        for family in sorted(set(cat_rows["family"])):
            held = cat_rows[cat_rows["family"] == family]
            kept = cat_rows[cat_rows["family"] != family]
            rng = state_rng(seed, row.model, row.reasoning_state, row.category, family)
            phi = {
                "skill": skill_posterior(rest, kept, float(tau_of[row.category]), draws, families, rng)[0],
                "general": _sample_piecewise_linear(*posterior_grid(pd.concat([rest_rows, kept]), draws, families,
                                                                    prior), rng),
                "category_alone": _sample_piecewise_linear(*posterior_grid(kept, draws, families, prior), rng),
            }
            j = int(held["family_pos"].iloc[0])
            lik = draws.family(j, fam_index)
            items = np.where(held["piece"].isin(["bb", "bbz"]), held["n"].astype(float), np.nan)
            for method in METHODS:
                eta = draws.beta[:, [j]] * (phi[method][:, None] - draws.b[:, [j]])
                ens = predictive(rng, np.repeat(eta, len(held), axis=1), lik, items)
                scored = cell_scores(held["u"].to_numpy(float), ens, intervals)
                scored.insert(0, "method", method)
                scored.insert(0, "u", held["u"].to_numpy(float))
                scored.insert(0, "kind", held["kind"].to_numpy())
                scored.insert(0, "family", family)
                scored.insert(0, "category", row.category)
                scored.insert(0, "reasoning_state", row.reasoning_state)
                scored.insert(0, "model", row.model)
                scored["n_category_families"] = int(row.n_families)
                rows.append(scored)
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def heldout_metrics(cells: pd.DataFrame, intervals=(0.5, 0.9)) -> pd.DataFrame:
    """Per method (and per category): validation.metrics.study_metrics over the held-out bounded cells."""
    from atlas_assets.validation.metrics import study_metrics

    out = []
    for (category, method), rows in pd.concat([cells.assign(category="all"), cells]).groupby(["category", "method"]):
        out.append({"category": category, "method": method, **study_metrics(rows, intervals)})
    return pd.DataFrame(out)
