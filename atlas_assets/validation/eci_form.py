"""The "ECI form" baseline: Epoch's Capabilities Index model, fitted by least squares.

What it models. One S-shaped curve per benchmark family and one capability
per reasoning state s = "model|reasoning_state":

    bounded family j:  pred = c_j + (1 - c_j) * sigmoid(alpha_j * (C_s - D_j))
    rating family j:   pred = alpha_j * (C_s - D_j)        (u already standardised)

with c_j the family's guessing floor (column `floor`), D_j its difficulty and
alpha_j > 0 its slope (fitted as log alpha). The gauge is fixed by one anchor
family with D = 0 and alpha = 1 (default: the family with the most
observations), so capabilities are in logits of the anchor family's curve.

The fit is plain least squares on the scores (residual pred - u, every
observation weighted alike) plus a small L2 penalty on every free parameter,
by `scipy.optimize.least_squares` (trf) with an analytic sparse Jacobian. A
rating family's residuals are on its standardised scale, a bounded one's on
the 0-1 scale, so a rating score pulls its state much harder than a bounded
one (on the real panel webdev_arena keeps an in-sample residual sd of 0.10
standardised units, the bounded families 0.015-0.15 score units).

Why it is here. It is the baseline the Stan model (stan/atlas.stan, same
curve, beta-binomial/beta likelihoods, reasoning structure, full posterior)
has to beat or at least match: it takes well under a second at real size,
and its intervals come from refitting it on bootstrap resamples, as ECI-style
intervals do. Two interval versions are offered, so the cost of what the ECI
form leaves out can be measured:

- parameter-only (`predict_draws(residuals=False)`): the spread of the
  bootstrap refits' predictions (the ECI-style intervals); they describe where
  the curve is, not where a new score will land;
- with residuals (`residuals=True`): each replicate's prediction plus a
  residual resampled from that family's point-fit residuals (the fixed
  per-family error band `residual_sd` summarises them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.optimize import least_squares
from scipy.special import expit, logit

REQUIRED_COLUMNS = ("model", "reasoning_state", "family", "kind", "u", "floor")
KINDS = ("bounded", "rating")

# Default L2 weight. The penalty only has to keep plateaus finite: a state whose
# every score sits at 1 or at the floor, or a family resampled into a step, has
# no finite least-squares optimum (unpenalised, capabilities reach |C| ~ 150).
# It acts as a Gaussian prior of sd sigma / sqrt(l2) on every free parameter
# (sigma ~ 0.065, the median family residual sd on the real panel), so 1e-4
# means sd ~6.5 anchor logits: negligible where data inform a parameter.
# Measured on the real panel (2,293 observations, anchor gpqa_diamond): RMSE on
# held-out bounded scores, 5-fold cross-validation over observations, mean of 4
# splits: l2 = 0: 0.1183 (divergent plateaus), 1e-5: 0.1104, 1e-4: 0.1109,
# 3e-4: 0.1117, 1e-3: 0.1136, 3e-3: 0.1155, 1e-2: 0.1179, 3e-2: 0.1207. 0.01
# compresses the scale (capability sd 0.59 vs 2.03 at 1e-4, slopes up to 11):
# the penalty on C grows with the spread squared, the one on log alpha only
# logarithmically. 1e-4 is within 0.5% of the best held-out RMSE while keeping
# plateau states within ~8 logits (13 at 1e-5) and bootstrap refits short.
DEFAULT_L2 = 1e-4

# Stopping tolerance of least_squares (ftol = xtol = gtol). The default 1e-8 spends
# up to thousands of evaluations on degenerate bootstrap replicates (a 7-observation
# family resampled into a step: log alpha creeps up against the weak penalty);
# on the real panel (l2 = 3e-4) 1e-6 cut 30 refits from 7.2 s to 2.6 s (at most 79
# evaluations each; one of 100 refits at 1e-8 took 3,694), 95% of their
# predictions unchanged to 0.0007, far below the residual sd (~0.065).
SOLVER_TOL = 1e-6

# Initial-guess clipping of normalised scores before the logit (keeps plateaus finite).
_INIT_CLIP = 0.02


# --------------------------------------------------------------------------- input


@dataclass(frozen=True, eq=False)
class _Prepared:
    """Validated observations as integer codes into sorted state and family indexes."""

    states: pd.Index
    families: pd.Index
    state_code: np.ndarray
    family_code: np.ndarray
    u: np.ndarray
    floor: np.ndarray  # per observation (0 for ratings)
    bounded: np.ndarray  # per observation
    family_kind: np.ndarray  # per family
    family_floor: np.ndarray  # per family


def _row_names(index: pd.Index, mask: np.ndarray, limit: int = 5) -> str:
    labels = [str(x) for x in index[mask][:limit]]
    more = int(mask.sum()) - len(labels)
    return ", ".join(labels) + (f" (+{more} more)" if more > 0 else "")


def _prepare(observations: pd.DataFrame) -> _Prepared:
    """Check `observations` and encode it; every ValueError names the column and rows at fault."""
    if not isinstance(observations, pd.DataFrame):
        raise ValueError("observations must be a pandas DataFrame")
    missing = [c for c in REQUIRED_COLUMNS if c not in observations.columns]
    if missing:
        raise ValueError(f"observations: missing column(s) {missing}")
    df = observations.loc[:, list(REQUIRED_COLUMNS)]
    if len(df) == 0:
        raise ValueError("observations: no rows")
    for col in ("model", "reasoning_state", "family", "kind"):
        bad = df[col].isna().to_numpy()
        if bad.any():
            raise ValueError(f"observations: column {col!r} is empty in row(s) {_row_names(df.index, bad)}")
    kind = df["kind"].astype(str).to_numpy()
    bad = ~np.isin(kind, KINDS)
    if bad.any():
        raise ValueError(
            f"observations: column 'kind' has unknown value(s) {sorted(set(kind[bad]))} "
            f"in row(s) {_row_names(df.index, bad)}; expected one of {list(KINDS)}"
        )
    u = pd.to_numeric(df["u"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(u)
    if bad.any():
        raise ValueError(f"observations: column 'u' is missing or not finite in row(s) {_row_names(df.index, bad)}")
    bounded = kind == "bounded"
    bad = bounded & ((u < 0) | (u > 1))
    if bad.any():
        raise ValueError(
            f"observations: column 'u' outside [0, 1] on a bounded family in row(s) {_row_names(df.index, bad)}"
        )
    # a missing floor means no guessing floor (as in stan_data.build_stan_data); ratings have none
    floor = pd.to_numeric(df["floor"], errors="coerce").fillna(0.0).to_numpy(dtype=float)
    floor = np.where(bounded, floor, 0.0)
    bad = bounded & ((floor < 0) | (floor >= 1))
    if bad.any():
        raise ValueError(f"observations: column 'floor' outside [0, 1) in row(s) {_row_names(df.index, bad)}")

    family = df["family"].astype(str).to_numpy()
    families = pd.Index(np.unique(family), name="family")
    family_code = families.get_indexer(family)
    per_family = pd.DataFrame({"f": family_code, "kind": kind, "floor": floor}).groupby("f")
    n_kinds = per_family["kind"].nunique()
    if (n_kinds > 1).any():
        names = families[n_kinds.index[n_kinds > 1]].tolist()
        raise ValueError(f"observations: column 'kind' differs within family/families {names}")
    n_floors = per_family["floor"].nunique()
    if (n_floors > 1).any():
        names = families[n_floors.index[n_floors > 1]].tolist()
        raise ValueError(f"observations: column 'floor' differs within family/families {names}")

    label = df["model"].astype(str).to_numpy().astype(object) + "|" + df["reasoning_state"].astype(str).to_numpy()
    states = pd.Index(np.unique(label.astype(str)), name="state")
    return _Prepared(
        states=states,
        families=families,
        state_code=states.get_indexer(label.astype(str)),
        family_code=family_code,
        u=u,
        floor=floor,
        bounded=bounded,
        family_kind=per_family["kind"].first().to_numpy().astype(str),
        family_floor=per_family["floor"].first().to_numpy(dtype=float),
    )


def _anchor_code(families: pd.Index, family_code: np.ndarray, anchor: str | None) -> int:
    if anchor is None:
        counts = np.bincount(family_code, minlength=len(families))
        return int(np.argmax(counts))  # ties: the first name in sorted order
    if anchor not in families:
        raise ValueError(f"anchor family {anchor!r} is not among the observed families")
    return int(families.get_loc(anchor))


# --------------------------------------------------------------------------- the least-squares problem


class EciFormProblem:
    """Residuals and their analytic sparse Jacobian for one least-squares fit.

    Parameter vector x = [C of the free states, D of the non-anchor families,
    log alpha of the non-anchor families]. States that are not free (in a
    bootstrap replicate: states without a resampled observation) keep the
    values in `fixed_capability` and enter no residual. Residuals: pred - u
    per observation, then sqrt(l2) * x (the L2 penalty).
    """

    def __init__(
        self,
        state_code: np.ndarray,
        family_code: np.ndarray,
        u: np.ndarray,
        floor: np.ndarray,
        bounded: np.ndarray,
        *,
        n_states: int,
        n_families: int,
        anchor_code: int,
        l2: float,
        fixed_capability: np.ndarray | None = None,
    ):
        if not (np.isfinite(l2) and l2 >= 0):
            raise ValueError(f"l2 must be a finite number >= 0, got {l2!r}")
        self.n_states, self.n_families, self.anchor_code = n_states, n_families, anchor_code
        self.u, self.floor, self.bounded = u, floor, bounded
        self.sqrt_l2 = float(np.sqrt(l2))
        self.state_code, self.family_code = state_code, family_code
        self.free_states = np.unique(state_code)
        self.fixed_capability = (
            np.zeros(n_states) if fixed_capability is None else np.asarray(fixed_capability, dtype=float).copy()
        )
        n_free = len(self.free_states)
        self.nonanchor = np.delete(np.arange(n_families), anchor_code)
        family_pos = np.full(n_families, -1)
        family_pos[self.nonanchor] = np.arange(n_families - 1)
        self.n_params = n_free + 2 * (n_families - 1)
        self._d_slice = slice(n_free, n_free + n_families - 1)
        self._la_slice = slice(n_free + n_families - 1, self.n_params)

        # Fixed sparsity: a row per observation with columns [C_s, D_j, log alpha_j]
        # (only C_s for the anchor family, whose D and alpha are constants), then
        # one diagonal penalty row per parameter.
        n_obs = len(u)
        state_col = np.searchsorted(self.free_states, state_code)
        fpos = family_pos[family_code]
        cols = np.stack([state_col, n_free + fpos, n_free + (n_families - 1) + fpos], axis=1)
        not_anchor = fpos >= 0
        self._keep = np.stack([np.ones(n_obs, bool), not_anchor, not_anchor], axis=1)
        obs_indices = cols[self._keep]
        obs_indptr = np.concatenate([[0], np.cumsum(self._keep.sum(axis=1))])
        self._indices = np.concatenate([obs_indices, np.arange(self.n_params)]).astype(np.int32)
        self._indptr = np.concatenate([obs_indptr, obs_indptr[-1] + 1 + np.arange(self.n_params)]).astype(np.int32)
        self.shape = (n_obs + self.n_params, self.n_params)

    # ---- parameter vector <-> full arrays
    def unpack(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(capability per state, difficulty per family, log slope per family)."""
        capability = self.fixed_capability.copy()
        capability[self.free_states] = x[: len(self.free_states)]
        difficulty = np.zeros(self.n_families)
        difficulty[self.nonanchor] = x[self._d_slice]
        log_slope = np.zeros(self.n_families)
        log_slope[self.nonanchor] = x[self._la_slice]
        return capability, difficulty, log_slope

    def pack(self, capability: np.ndarray, difficulty: np.ndarray, log_slope: np.ndarray) -> np.ndarray:
        return np.concatenate(
            [capability[self.free_states], difficulty[self.nonanchor], log_slope[self.nonanchor]]
        )

    def _pieces(self, x):
        capability, difficulty, log_slope = self.unpack(x)
        slope = np.exp(log_slope)[self.family_code]
        z = slope * (capability[self.state_code] - difficulty[self.family_code])
        sig = expit(z)
        pred = np.where(self.bounded, self.floor + (1 - self.floor) * sig, z)
        dpred_dz = np.where(self.bounded, (1 - self.floor) * sig * (1 - sig), 1.0)
        return pred, dpred_dz, slope, z

    def residuals(self, x: np.ndarray) -> np.ndarray:
        pred = self._pieces(x)[0]
        return np.concatenate([pred - self.u, self.sqrt_l2 * x])

    def jacobian(self, x: np.ndarray) -> sp.csr_matrix:
        _, g, slope, z = self._pieces(x)
        # dz/dC = alpha, dz/dD = -alpha, dz/dlog(alpha) = z
        per_obs = np.stack([g * slope, -g * slope, g * z], axis=1)[self._keep]
        data = np.concatenate([per_obs, np.full(self.n_params, self.sqrt_l2)])
        return sp.csr_matrix((data, self._indices, self._indptr), shape=self.shape)

    def initial_guess(self) -> np.ndarray:
        """A cheap start: every curve at the anchor's shape (D = 0, alpha = 1), C_s the
        mean logit of the state's floor-normalised scores, then D_j from those C_s."""
        target = np.where(
            self.bounded,
            logit(np.clip((self.u - self.floor) / (1 - self.floor), _INIT_CLIP, 1 - _INIT_CLIP)),
            self.u,
        )
        counts = np.bincount(self.state_code, minlength=self.n_states)
        capability = self.fixed_capability.copy()
        sums = np.bincount(self.state_code, weights=target, minlength=self.n_states)
        capability[self.free_states] = sums[self.free_states] / counts[self.free_states]
        gap = capability[self.state_code] - target  # D_j that each observation alone would imply
        fcounts = np.bincount(self.family_code, minlength=self.n_families)
        difficulty = np.bincount(self.family_code, weights=gap, minlength=self.n_families) / np.maximum(fcounts, 1)
        # gauge: shift so that the anchor's difficulty is 0
        shift = difficulty[self.anchor_code]
        capability[self.free_states] -= shift
        difficulty -= shift
        return self.pack(capability, difficulty, np.zeros(self.n_families))

    def solve(self, x_start: np.ndarray):
        # x_scale="jac": capabilities, difficulties and log slopes have different
        # curvatures; without it 20 real-panel bootstrap refits took 3.3x as long.
        return least_squares(
            self.residuals, x_start, jac=self.jacobian, method="trf", x_scale="jac",
            ftol=SOLVER_TOL, xtol=SOLVER_TOL, gtol=SOLVER_TOL,
        )


# --------------------------------------------------------------------------- fit


@dataclass(frozen=True, eq=False)
class EciFormFit:
    """One least-squares fit of the ECI form.

    `family_kind`, `family_floor` (per family, for `predict`), `family_residuals`
    (point-fit residuals per family, for the residual ensemble), `l2` and
    `converged` (least_squares status > 0) go beyond the minimal API.
    """

    states: pd.Index  # "model|reasoning_state" labels, parameter order
    families: pd.Index
    capability: np.ndarray  # C per state
    difficulty: np.ndarray  # D per family
    slope: np.ndarray  # alpha per family
    residual_sd: np.ndarray  # per family: root mean square of the fit's residuals on that family
    anchor: str
    seconds: float
    nfev: int
    family_kind: np.ndarray
    family_floor: np.ndarray
    family_residuals: tuple[np.ndarray, ...]
    l2: float
    converged: bool

    def _codes(self, model, reasoning_state, family) -> tuple[np.ndarray, np.ndarray]:
        model = np.atleast_1d(np.asarray(model, dtype=object)).astype(str)
        reasoning_state = np.atleast_1d(np.asarray(reasoning_state, dtype=object)).astype(str)
        family = np.atleast_1d(np.asarray(family, dtype=object)).astype(str)
        if not (len(model) == len(reasoning_state) == len(family)):
            raise ValueError(
                f"model, reasoning_state and family must have equal lengths, got "
                f"{len(model)}, {len(reasoning_state)}, {len(family)}"
            )
        labels = np.char.add(np.char.add(model, "|"), reasoning_state)
        return self.states.get_indexer(labels), self.families.get_indexer(family)

    def _predict_codes(self, s: np.ndarray, f: np.ndarray) -> np.ndarray:
        known = (s >= 0) & (f >= 0)
        out = np.full(len(s), np.nan)
        sk, fk = s[known], f[known]
        z = self.slope[fk] * (self.capability[sk] - self.difficulty[fk])
        c = self.family_floor[fk]
        out[known] = np.where(self.family_kind[fk] == "bounded", c + (1 - c) * expit(z), z)
        return out

    def predict(self, model, reasoning_state, family) -> np.ndarray:
        """Expected score per cell; NaN where the state or the family is not in the fit."""
        return self._predict_codes(*self._codes(model, reasoning_state, family))


def _fit_prepared(
    data: _Prepared,
    *,
    anchor_code: int,
    l2: float,
    state_code: np.ndarray | None = None,
    family_code: np.ndarray | None = None,
    u: np.ndarray | None = None,
    floor: np.ndarray | None = None,
    bounded: np.ndarray | None = None,
    start: EciFormFit | None = None,
) -> EciFormFit:
    """Fit on `data` (or on the given subset/resample of its coded rows)."""
    t0 = time.perf_counter()
    rows = (
        (data.state_code, data.family_code, data.u, data.floor, data.bounded)
        if state_code is None
        else (state_code, family_code, u, floor, bounded)
    )
    n_states, n_families = len(data.states), len(data.families)
    problem = EciFormProblem(
        *rows,
        n_states=n_states,
        n_families=n_families,
        anchor_code=anchor_code,
        l2=l2,
        fixed_capability=None if start is None else _aligned(start.capability, start.states, data.states),
    )
    if start is None:
        x_start = problem.initial_guess()
    else:
        # values carried by label; anything the start lacks starts from the cheap guess
        guess_c, guess_d, guess_la = problem.unpack(problem.initial_guess())
        capability = _aligned(start.capability, start.states, data.states, fill=guess_c)
        difficulty = _aligned(start.difficulty, start.families, data.families, fill=guess_d)
        log_slope = _aligned(np.log(start.slope), start.families, data.families, fill=guess_la)
        x_start = problem.pack(capability, difficulty, log_slope)
    result = problem.solve(x_start)
    capability, difficulty, log_slope = problem.unpack(result.x)
    resid = result.fun[: len(rows[0])]
    fam = rows[1]
    counts = np.bincount(fam, minlength=n_families)
    residual_sd = np.sqrt(np.bincount(fam, weights=resid**2, minlength=n_families) / np.maximum(counts, 1))
    residual_sd[counts == 0] = np.nan
    order = np.argsort(fam, kind="stable")
    family_residuals = tuple(np.split(resid[order], np.cumsum(counts)[:-1]))
    return EciFormFit(
        states=data.states,
        families=data.families,
        capability=capability,
        difficulty=difficulty,
        slope=np.exp(log_slope),
        residual_sd=residual_sd,
        anchor=str(data.families[anchor_code]),
        seconds=time.perf_counter() - t0,
        nfev=int(result.nfev),
        family_kind=data.family_kind,
        family_floor=data.family_floor,
        family_residuals=family_residuals,
        l2=float(l2),
        converged=bool(result.status > 0),
    )


def _aligned(values: np.ndarray, index: pd.Index, target: pd.Index, fill: np.ndarray | None = None) -> np.ndarray:
    """`values` (labelled by `index`) reordered onto `target`; missing labels take `fill` (else 0)."""
    out = np.zeros(len(target)) if fill is None else np.asarray(fill, dtype=float).copy()
    pos = index.get_indexer(target)
    out[pos >= 0] = np.asarray(values, dtype=float)[pos[pos >= 0]]
    return out


def fit_eci_form(
    observations: pd.DataFrame,
    *,
    anchor: str | None = None,
    l2: float = DEFAULT_L2,
    x0: EciFormFit | None = None,
) -> EciFormFit:
    """Least-squares fit of the ECI form to `modeled_observations`-like rows.

    anchor: the family pinned at D = 0, alpha = 1 (default: most observations;
    an unknown name raises ValueError). x0: an earlier fit to start from; its
    values are matched by state and family label (a start only: a fit in
    another gauge is still a valid, if poorer, start).
    """
    data = _prepare(observations)
    anchor_code = _anchor_code(data.families, data.family_code, anchor)
    return _fit_prepared(data, anchor_code=anchor_code, l2=l2, start=x0)


# --------------------------------------------------------------------------- bootstrap


@dataclass(frozen=True, eq=False)
class EciFormBootstrap:
    """Case-bootstrap refits of the ECI form around a point fit.

    Resampling is within families: each family's observations are drawn with
    replacement to their own count, so every family keeps data in every
    replicate. Why: which benchmarks were run, and how often, is the panel's
    design rather than a random draw, and a family without data would freeze
    its curve (and for the anchor, the gauge's footing) at the point fit. A
    state with no resampled observation in a replicate keeps its point-fit
    capability in that replicate (its parameter is held fixed, not refitted to
    the penalty's zero). So a state with a single observation is either held
    or refitted exactly onto that score: on the real panel its 90% capability
    interval is narrower (median 0.24 logits) than that of states with 3-4
    observations (0.89), a property of this form of interval, not knowledge.
    """

    point: EciFormFit
    replicates: list[EciFormFit]
    seconds: float  # wall time of the point fit and all refits

    def predict_draws(self, model, reasoning_state, family, *, residuals: bool, seed: int = 0) -> np.ndarray:
        """(B, n_cells) predictive draws; NaN columns where the state or family is not in the fit.

        residuals=False: each replicate's expected score (parameter-only ensemble,
        the ECI-style intervals). residuals=True: plus a residual drawn (seeded) from
        that family's point-fit residuals. Bounded families are clipped to [0, 1].
        """
        s, f = self.point._codes(model, reasoning_state, family)
        draws = np.stack([rep._predict_codes(s, f) for rep in self.replicates])
        if residuals:
            rng = np.random.default_rng(seed)
            known = (s >= 0) & (f >= 0)
            for j in np.unique(f[known]):
                cells = np.flatnonzero(known & (f == j))
                pool = self.point.family_residuals[j]
                draws[:, cells] += pool[rng.integers(0, len(pool), size=(draws.shape[0], len(cells)))]
        bounded_cells = (f >= 0) & (self.point.family_kind[np.maximum(f, 0)] == "bounded")
        draws[:, bounded_cells] = np.clip(draws[:, bounded_cells], 0.0, 1.0)
        return draws

    def capability_draws(self) -> np.ndarray:
        """(B, n_states) capability per replicate."""
        return np.stack([rep.capability for rep in self.replicates])

    def capability_intervals(self, interval: float = 0.9) -> pd.DataFrame:
        """Per state: point capability and the bootstrap percentile interval."""
        if not 0 < interval < 1:
            raise ValueError(f"interval must be in (0, 1), got {interval!r}")
        tail = (1 - interval) / 2
        lower, upper = np.quantile(self.capability_draws(), [tail, 1 - tail], axis=0)
        return pd.DataFrame({
            "state": self.point.states.to_numpy(),
            "capability": self.point.capability,
            "lower": lower,
            "upper": upper,
        })


def bootstrap_eci_form(
    observations: pd.DataFrame,
    *,
    n_boot: int = 100,
    seed: int = 0,
    anchor: str | None = None,
    l2: float = DEFAULT_L2,
) -> EciFormBootstrap:
    """Point fit plus `n_boot` refits on within-family case resamples (seeded), each
    warm-started from the point fit."""
    if int(n_boot) < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot!r}")
    t0 = time.perf_counter()
    data = _prepare(observations)
    anchor_code = _anchor_code(data.families, data.family_code, anchor)
    point = _fit_prepared(data, anchor_code=anchor_code, l2=l2)
    rng = np.random.default_rng(seed)
    by_family = [np.flatnonzero(data.family_code == j) for j in range(len(data.families))]
    replicates = []
    for _ in range(int(n_boot)):
        rows = np.concatenate([idx[rng.integers(0, len(idx), size=len(idx))] for idx in by_family])
        replicates.append(
            _fit_prepared(
                data,
                anchor_code=anchor_code,
                l2=l2,
                state_code=data.state_code[rows],
                family_code=data.family_code[rows],
                u=data.u[rows],
                floor=data.floor[rows],
                bounded=data.bounded[rows],
                start=point,
            )
        )
    return EciFormBootstrap(point=point, replicates=replicates, seconds=time.perf_counter() - t0)


# --------------------------------------------------------------------------- display units


def display(
    fit: EciFormFit,
    low: tuple[str, str, float] = ("claude-3-5-sonnet-20240620", "default", 130.0),
    high: tuple[str, str, float] = ("gpt-5-2025-08-07", "high", 150.0),
) -> pd.Series:
    """Capabilities mapped affinely so the two reference states read their values
    (ECI's display units; the same references as model.yaml `display.reference`).
    Apply it to each bootstrap replicate for intervals in display units."""
    refs = []
    for model, state, value in (low, high):
        label = f"{model}|{state}"
        if label not in fit.states:
            raise ValueError(f"display reference state {label!r} is not in the fit")
        refs.append((fit.capability[fit.states.get_loc(label)], float(value)))
    (c_lo, v_lo), (c_hi, v_hi) = refs
    if c_hi == c_lo:
        raise ValueError("display reference states have equal capability; the scale is undefined")
    values = v_lo + (fit.capability - c_lo) * (v_hi - v_lo) / (c_hi - c_lo)
    return pd.Series(values, index=fit.states, name="eci_display")
