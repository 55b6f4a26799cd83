"""Placing the coordinates that are new since an earlier posterior, so that a warm start whitens them as well.

A nightly refresh usually brings a model or two, a new reasoning state (sometimes the one its model is pinned by)
and, through the states each family's difficulty centre averages, a few shifted difficulties whose centre moved. No
earlier draw informs those coordinates, so the warm map (`precondition.build_preconditioner`) leaves them at a
prior-like place and scale. The main fit's identity metric cannot rescale them; a diagonal metric can, but that
route cost more than the pilot route, and from such inits one chain leapt far into a tail and stuck there (measured:
docs/model.md, stop 27). So the warm route used to give way to the pilot for any new coordinate.

Here each new coordinate gets, at every earlier draw, a draw from a Gaussian approximation of its conditional
posterior under the new data given that draw's other coordinates. All of it runs in the sampled coordinates of the
warm map (z, where a new coordinate is x = loc + scale * z), through the program's own log density and gradient
(`engines.CmdStanLogDensity`: one CmdStan call per batch of points), so nothing of the likelihood is written twice:

1. the conditional mode c of the new coordinates at the centre of the earlier draws (z = 0), by damped Newton
   (Levenberg-Marquardt: the gradient and a forward-difference Hessian, then a range of damped steps tried in one
   batch and the best one taken);
2. the new coordinates' Hessian H at c;
3. at each earlier draw, new coordinates at c, Newton steps m = c - H^-1 g (H held: the chord method), which carry
   how the conditional mode moves with the draw's other coordinates;
4. the draw m + L e, with L L' = -H^-1 and e standard normal.

A new reference model (one with a default state) is placed first as a free model against the earlier reference set
(with_models_free, reference_capabilities): its capability enters the standardised reference vector, so it moves every
Helmert coordinate of that block and the capability scale itself. The earlier draws are then carried over again with
it, to the new set's scale (precondition.rescaled_draws), and the rest is placed as above.

The map is then built from these draws like any other. It is only a preconditioner: the posterior does not depend on
what the placement gets wrong, and the stiffness step's typicality test still sends a poor placement to the diagonal
route. A log density with no interior maximum along a coordinate, or a Hessian that is not negative definite, raises
PlacementError, and the caller takes the pilot route.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

# z points (m, P) -> (log density (m,), gradient (m, P)), e.g. engines.CmdStanLogDensity on the warm map's data
Gradients = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


class PlacementError(RuntimeError):
    """The new coordinates' conditional posterior has no Gaussian approximation here."""


@dataclass(frozen=True)
class PlacementSettings:
    max_iterations: int = 40      # damped Newton iterations for the conditional mode at the centre
    tolerance: float = 1e-4       # ... until the Newton decrement g' (-H)^-1 g (log-density units) is below this
    trial_steps: int = 16         # damping values tried per iteration, in one batch
    max_step: float = 8.0         # a trial step is at most this long (z units of the prior-like scale)
    newton_steps: int = 2         # per-draw chord-Newton steps from c
    max_step_sd: float = 6.0      # a per-draw step is clipped to this many conditional sds
    difference: float = 1e-4      # forward-difference step of the Hessian (z units)


@dataclass
class Placement:
    z: np.ndarray                 # (n, P) the draws with the new coordinates placed
    mode: np.ndarray              # (k,) conditional mode at the centre, z units
    sd: np.ndarray                # (k,) conditional sd at the centre, z units
    info: dict = field(default_factory=dict)


def _gradient_and_hessian(gradients: Gradients, point: np.ndarray, new: np.ndarray,
                          step: float) -> tuple[float, np.ndarray, np.ndarray]:
    """(log density, gradient (k,), Hessian (k, k)) in the `new` coordinates at `point`: one batch of k + 1 points,
    the Hessian by forward differences of the gradient, symmetrised."""
    points = np.repeat(point[None, :], len(new) + 1, axis=0)
    points[np.arange(1, len(new) + 1), new] += step
    lp, grad = gradients(points)
    H = (grad[1:, new] - grad[0, new][None, :]).T / step
    return float(lp[0]), grad[0, new], 0.5 * (H + H.T)


def conditional_mode(gradients: Gradients, centre: np.ndarray, new: np.ndarray,
                     settings: PlacementSettings = PlacementSettings()) -> tuple[np.ndarray, dict]:
    """The maximum of the log density over the `new` coordinates, the others held at `centre` (z). Damped Newton
    (Levenberg-Marquardt): at each iterate the gradient and Hessian, then steps (-H + lam I)^-1 g over a range of
    lam from plain Newton to a short gradient step, all tried in one batch, and the best taken. Coordinate-wise
    (Jacobi) updates diverged here: a new pinned state and the difficulty centres that average it are strongly
    coupled. Returns (mode (k,), info)."""
    s = settings
    k = len(new)
    c = centre[new].astype(float).copy()
    point = centre.copy()
    evaluations = 0
    for iteration in range(1, s.max_iterations + 1):
        point[new] = c
        lp, g, H = _gradient_and_hessian(gradients, point, new, s.difference)
        evaluations += k + 1
        A = -H
        eig = np.linalg.eigvalsh(A)
        if eig.min() > 0 and float(g @ np.linalg.solve(A, g)) < s.tolerance:
            return c, {"iterations": iteration, "evaluations": evaluations}
        floor = max(0.0, -eig.min()) * 1.01 + 1e-12
        lams = floor + max(np.abs(eig).max(), 1e-8) * 10.0 ** np.linspace(-8, 2, s.trial_steps)
        steps = np.array([np.linalg.solve(A + lam * np.eye(k), g) for lam in lams])
        length = np.linalg.norm(steps, axis=1, keepdims=True)
        max_step = s.max_step
        while True:
            trials = np.repeat(point[None, :], len(steps), axis=0)
            trials[:, new] = c + steps * np.minimum(1.0, max_step / np.maximum(length, 1e-300))
            try:
                trial_lp, _ = gradients(trials)
                break
            except RuntimeError:
                # the program cannot evaluate some trial (a probability that underflows to an exact 0 or 1 far
                # out): shorter steps
                max_step /= 4
                if max_step < 1e-3:
                    raise PlacementError("no evaluable step from the current point") from None
        evaluations += len(steps)
        best = int(np.argmax(trial_lp))
        if not trial_lp[best] > lp:
            raise PlacementError(f"no step increases the log density (iteration {iteration}, lp {lp:.2f})")
        c = trials[best, new]
    raise PlacementError(f"the new coordinates' conditional mode did not settle in {s.max_iterations} iterations")


def place_new_coordinates(gradients: Gradients, z_draws: np.ndarray, new: np.ndarray, rng: np.random.Generator,
                          settings: PlacementSettings = PlacementSettings()) -> Placement:
    """The draws `z_draws` (n, P; rows of the warm map's z) with the coordinates `new` (positions) replaced by draws
    of their Gaussian-approximated conditional posterior given each row's other coordinates (module docstring)."""
    start = time.perf_counter()
    new = np.asarray(new, dtype=int)
    z = np.array(z_draws, dtype=float)
    if not len(new):
        return Placement(z, np.zeros(0), np.zeros(0), {"placed": 0})
    centre = np.zeros(z.shape[1])
    mode, info = conditional_mode(gradients, centre, new, settings)
    at_mode = centre.copy()
    at_mode[new] = mode
    _, _, H = _gradient_and_hessian(gradients, at_mode, new, settings.difference)
    eig = np.linalg.eigvalsh(H)
    if eig.max() >= 0:
        raise PlacementError(f"the new coordinates' Hessian at their conditional mode is not negative definite "
                             f"(largest eigenvalue {eig.max():.3g})")
    cov = np.linalg.inv(-H)
    sd = np.sqrt(np.diag(cov))
    m = np.repeat(mode[None, :], len(z), axis=0)
    for _ in range(settings.newton_steps):
        z[:, new] = m
        _, grad = gradients(z)
        step = np.linalg.solve(-H, grad[:, new].T).T   # -H^-1 g: towards the maximum
        m = m + np.clip(step, -settings.max_step_sd * sd, settings.max_step_sd * sd)
    z[:, new] = m + rng.standard_normal((len(z), len(new))) @ np.linalg.cholesky(cov).T
    evaluations = info["evaluations"] + len(new) + 1 + settings.newton_steps * len(z)
    info = {"placed": int(len(new)), **info, "evaluations": int(evaluations),
            "seconds": round(time.perf_counter() - start, 2),
            "mode_spread_over_draws": round(float(np.median(m.std(axis=0) / sd)), 3)}
    return Placement(z, mode, sd, info)


def new_coordinates(pc) -> np.ndarray:
    """Positions of the map's coordinates that no earlier draw informs. Those whose prior is std_normal (a new
    model's ladder terms) would not force the pilot route on their own (precondition.standard_normal_mask), but
    their conditional posterior is not their prior either. Left at it, a new model's ladder amplitude carried 4.0 of
    the 4.9% that the rebuilt map's draws' gradient mean had of its second moment (the typicality test's 5% was
    nearly crossed); placed with the rest, the share was 1.2% (the 04-14 fit onto the real panel, docs/model.md,
    stop 27)."""
    return np.flatnonzero(~pc.matched)


def placed_map(pc, current, config: dict, gradients: Gradients, seed: int, map_args: dict,
               settings: PlacementSettings = PlacementSettings()):
    """The warm map `pc` rebuilt from its draws with the new coordinates placed (place_new_coordinates), now counted
    as matched; (map, info). `gradients` evaluates the program at points of `pc`'s z; `map_args`: the map's form
    (precondition.preconditioner_from_draws)."""
    from atlas_assets.model.precondition import preconditioner_from_draws

    new = new_coordinates(pc)
    placement = place_new_coordinates(gradients, pc.z(pc.draws), new, np.random.default_rng(seed), settings)
    matched = pc.matched.copy()
    matched[new] = True
    return preconditioner_from_draws(pc.x(placement.z), matched, pc.centring, current, config, **map_args), placement.info


def new_reference_models(previous, current) -> list[str]:
    """Reference models of `current` that `previous` lacks. The program holds the reference capabilities in Helmert
    coordinates of their standardised vector, so one new reference model moves every one of those coordinates."""
    known = set(previous.models["model"])
    models = current.models["model"]
    return [models.iat[i - 1] for i in current.data["ref_model"] if models.iat[i - 1] not in known]


def with_models_free(si, models) -> object:
    """A copy of the Stan input `si` in which the reference models `models` are free models: the reference set, and
    with it the capability scale, is then the one an earlier fit without them had, and each such model's capability
    is one coordinate of its own (`pin_free`) that place_new_coordinates can place."""
    from dataclasses import replace

    position = {m: i + 1 for i, m in enumerate(si.models["model"])}
    moving = {position[m] for m in models}
    pin_setting = dict(zip(si.data["free_model"], si.data["free_pin_setting"]))
    pinned = si.states.loc[si.states.pinned].set_index("model")
    for m in models:
        pin_setting[position[m]] = int(pinned.loc[m, "setting_code"])
    free = sorted(pin_setting)
    data = {**si.data, "ref_model": [i for i in si.data["ref_model"] if i not in moving], "free_model": free,
            "free_pin_setting": [pin_setting[i] for i in free]}
    data["M_ref"] = len(data["ref_model"])
    models_frame = si.models.assign(is_reference=si.models["is_reference"] & ~si.models["model"].isin(list(models)))
    states = si.states
    if "is_reference_model" in states:
        states = states.assign(is_reference_model=states["is_reference_model"] & ~states["model"].isin(list(models)))
    return replace(si, data=data, models=models_frame, states=states)


def reference_capabilities(previous_posterior, previous, current, config: dict, map_args: dict, max_draws: int,
                           density_for, seed: int, settings: PlacementSettings = PlacementSettings()) -> tuple[dict, dict]:
    """Capabilities of the reference models new since `previous_posterior`, at each of its (taken) draws: they are
    placed as free models (with_models_free) together with every other new coordinate, so the earlier fit's
    reference set fixes the scale; {pinned state label: (n,)}, info. The caller transports the earlier draws again
    with these (precondition.transported_draws `extra_phi`), which puts every reference capability in place.
    `density_for(stan_input, map)`: a context manager evaluating the program on that input through that map."""
    from atlas_assets.model.precondition import build_preconditioner, coordinate_names
    from atlas_assets.model.stan_data import state_labels

    models = new_reference_models(previous, current)
    variant = with_models_free(current, models)
    pc = build_preconditioner(previous_posterior, previous, variant, config, max_draws=max_draws, **map_args)
    with density_for(variant, pc) as density:
        placed, info = placed_map(pc, variant, config, density, seed, map_args, settings)
    names = coordinate_names(variant)
    pinned = variant.states.loc[variant.states.pinned]
    labels = dict(zip(pinned["model"], state_labels(pinned)))
    return {labels[m]: placed.draws[:, names.index(f"pin_free[{m}]")] for m in models}, {"models": models, **info}
