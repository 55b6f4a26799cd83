"""Curvature of the log density in the sampler's coordinates, at posterior draws: where leapfrog steps go unstable.

A leapfrog step of size eps is stable along a direction whose potential (minus the log density) curves by lam only
while eps^2 lam < 4; beyond that the energy error grows without bound and NUTS reports a divergence. The whitened
main fit adapts one step size for every draw, so the draws where the largest eigenvalue of the potential's Hessian
is high decide how large that step can be. Here that eigenvalue is found per draw by power iteration on
Hessian-vector products, each a finite difference of two batched gradients (the engine's own gradient: no Hessian
code), and its direction is read back onto the program's named coordinates (docs/model.md, stop 25: on the real
panel the stiffest draws sat at the wide ends of the funnels between the reasoning effects' scales, curv_sd and
offdev_sd, and their non-centred terms; stop 26 centres those terms conditionally). The coordinates' names:
precondition.coordinate_names.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from atlas_assets.model.precondition import Preconditioner

GradientFn = Callable[[np.ndarray], np.ndarray]   # rows of points -> rows of log-density gradients


def largest_curvature(gradient: GradientFn, points: np.ndarray, iterations: int = 30, step: float = 1e-4,
                      seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(lam (n,), direction (n, P)): per row of `points`, the eigenvalue of largest magnitude of the potential's
    Hessian (minus the log density's) and its unit eigenvector, by `iterations` power iterations whose products
    H v = -(g(x + step v) - g(x)) / step come from `gradient` on all rows at once."""
    points = np.atleast_2d(np.asarray(points, dtype=float))
    rng = np.random.default_rng(seed)
    direction = rng.standard_normal(points.shape)
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    at_points = gradient(points)
    lam = np.zeros(len(points))
    for _ in range(iterations):
        product = -(gradient(points + step * direction) - at_points) / step
        lam = np.sum(direction * product, axis=1)
        direction = product / np.maximum(np.linalg.norm(product, axis=1, keepdims=True), 1e-300)
    return lam, direction


def unstable_share(lam: np.ndarray, step_size: float) -> float:
    """Share of draws where a leapfrog step of `step_size` is unstable along the stiffest direction (eps^2 lam > 4)."""
    return float(np.mean(step_size ** 2 * np.asarray(lam) > 4.0))


def in_posterior_sds(pc: Preconditioner, direction: np.ndarray) -> np.ndarray:
    """A direction of the sampled coordinates pc_z carried to the program's coordinates, each in units of its
    earlier posterior sd (the map without its marginal scales: (I + L R') v, or chol v / its row norms), unit length:
    the entries say which named parameters the direction moves."""
    direction = np.atleast_2d(direction)
    if pc.dense:
        moved = direction @ pc.chol.T / np.linalg.norm(pc.chol, axis=1)
    else:
        moved = direction + (direction @ pc.right) @ pc.left.T
    return moved / np.linalg.norm(moved, axis=1, keepdims=True)


def leading_coordinates(names: list[str], moved: np.ndarray, k: int = 4) -> str:
    """The `k` coordinates a carried direction (one row of in_posterior_sds) loads on most, with their loadings."""
    top = np.argsort(-np.abs(moved))[:k]
    return ", ".join(f"{names[i]} {moved[i]:+.2f}" for i in top)

