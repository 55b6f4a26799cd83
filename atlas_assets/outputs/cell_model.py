"""What the fitted likelihood says about one (reasoning state, family) cell, per posterior draw.

The formulas are those of `atlas_assets.model.scores.observation_draws` (and of the
program's generated quantities), written per family so they also serve cells that
have NO observation (the predictions users ask for, and reliability "if every model
had been scored"):

    eta  = beta_j (phi_s - b_j)
    p    = c_j + (1 - c_j) inv_logit(eta)          curve (bounded families)
    q    = (1 - c_j) inv_logit(-eta)               its complement, kept precise near 1
    pz   = inv_logit(hurdle_a - hurdle_b eta)      zero process (floor-free bounded families)

- countable cell (n items): K ~ beta-binomial(n, p kappa_j, q kappa_j), score K / n;
  Var(K / n) = p q (kappa_j + n) / (n (kappa_j + 1));
- continuous cell: beta(p kappa_j, q kappa_j), Var = p q / (kappa_j + 1); a draw >= 1 - eps
  is read as 1 (a reported exact 1 stands for u >= 1 - eps);
- zero process: U = 0 with probability pz, else the above: E = (1 - pz) p,
  Var = (1 - pz) Var_curve + pz (1 - pz) p^2;
- rating family: Normal(eta, rating_sd_j) on the family's standardised scale.

`tests/outputs/test_cell_model.py` checks the expected score against
`observation_draws`' `mu_obs` on every observed cell.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit


@dataclass(frozen=True)
class FamilyLikelihood:
    """One family's likelihood parameters, per draw (arrays of length D)."""

    kind: str                       # bounded | rating
    floor: float
    hurdle: bool                    # the zero process applies (bounded, floor-free)
    kappa: np.ndarray | None        # bounded
    rating_sd: np.ndarray | None    # rating
    hurdle_a: np.ndarray
    hurdle_b: np.ndarray
    one_eps: float = 0.005


def _col(x: np.ndarray | None) -> np.ndarray | None:
    return None if x is None else np.asarray(x, dtype=float)[:, None]


def moments(eta: np.ndarray, fam: FamilyLikelihood, n_items: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Expected score and variance of the score around it, (D, C) each, for cells of one family whose
    linear predictor is `eta` (D, C); `n_items` (C,) gives the items of countable cells, NaN (or None)
    for continuous ones."""
    eta = np.asarray(eta, dtype=float)
    if fam.kind == "rating":
        sd = _col(fam.rating_sd)
        return eta.copy(), np.broadcast_to(sd ** 2, eta.shape).copy()
    c = fam.floor
    p = c + (1 - c) * expit(eta)
    q = (1 - c) * expit(-eta)
    kap = _col(fam.kappa)
    n = np.full(eta.shape[1], np.nan) if n_items is None else np.asarray(n_items, dtype=float)
    factor = np.where(np.isfinite(n), (kap + np.nan_to_num(n, nan=1.0)) / (np.nan_to_num(n, nan=1.0) * (kap + 1)),
                      1.0 / (kap + 1))
    var = p * q * factor
    if not fam.hurdle:
        return p, var
    pz = expit(_col(fam.hurdle_a) - _col(fam.hurdle_b) * eta)
    mean = (1 - pz) * p
    return mean, (1 - pz) * var + pz * (1 - pz) * p ** 2


def predictive(rng: np.random.Generator, eta: np.ndarray, fam: FamilyLikelihood,
               n_items: np.ndarray | None = None) -> np.ndarray:
    """One posterior predictive draw per (draw, cell) on the scale of u (countable: K / n)."""
    eta = np.asarray(eta, dtype=float)
    if fam.kind == "rating":
        return rng.normal(eta, _col(fam.rating_sd))
    c = fam.floor
    kap = _col(fam.kappa)
    a_ = (c + (1 - c) * expit(eta)) * kap
    b_ = (1 - c) * expit(-eta) * kap
    n = np.full(eta.shape[1], np.nan) if n_items is None else np.asarray(n_items, dtype=float)
    out = np.empty_like(eta)
    cnt = np.isfinite(n)
    if cnt.any():
        pr = rng.beta(a_[:, cnt], b_[:, cnt])
        out[:, cnt] = rng.binomial(n[cnt].astype(np.int64), pr) / n[cnt]
    if (~cnt).any():
        x = rng.beta(a_[:, ~cnt], b_[:, ~cnt])
        out[:, ~cnt] = np.where(x >= 1 - fam.one_eps, 1.0, x)
    if fam.hurdle:
        pz = expit(_col(fam.hurdle_a) - _col(fam.hurdle_b) * eta)
        out[rng.random(eta.shape) < pz] = 0.0
    return out
