"""Hand-made posteriors: a few states, one or two families, a handful of draws."""

from __future__ import annotations

import numpy as np
import pandas as pd

from atlas_assets.outputs.draws import PosteriorDraws


def frames(families: list[tuple[str, str, float]], cells: list[tuple[int, int, float]], n_states: int,
           items: dict[int, int] | None = None):
    """families: (name, kind, floor); cells: (state_pos, family_pos, u); items: obs row -> n (countable)."""
    fam = pd.DataFrame(families, columns=["family", "kind", "floor"])
    fam["family_pos"] = np.arange(len(fam))
    obs = pd.DataFrame(cells, columns=["state_pos", "family_pos", "u"])
    obs["kind"] = fam["kind"].to_numpy()[obs["family_pos"]]
    obs["items"] = np.nan
    obs["correct"] = np.nan
    for row, n in (items or {}).items():
        obs.loc[row, "items"] = n
        obs.loc[row, "correct"] = round(obs.loc[row, "u"] * n)
    states = pd.DataFrame({"model": [f"m{i}" for i in range(n_states)], "reasoning_state": "default"})
    return fam, obs, states


def draws(phi, b, beta, kappa=None, rating_sd=None, scale=1.0, offset=0.0, hurdle_a=-30.0, hurdle_b=1.0, **extra):
    """PosteriorDraws from (D, S) / (D, J) lists; scalars broadcast over draws."""
    phi = np.atleast_2d(np.asarray(phi, dtype=float))
    D, J = phi.shape[0], np.atleast_2d(b).shape[1]
    full = lambda x: np.broadcast_to(np.asarray(x, dtype=float), (D, J)).copy() if x is not None else np.full((D, J), np.nan)  # noqa: E731
    vec = lambda x: np.broadcast_to(np.asarray(x, dtype=float), (D,)).copy()  # noqa: E731
    return PosteriorDraws(phi=phi, b=full(b), beta=full(beta), kappa=full(kappa), rating_sd=full(rating_sd),
                          hurdle_a=vec(hurdle_a), hurdle_b=vec(hurdle_b), scale=vec(scale), offset=vec(offset), **extra)


def config(**overrides):
    from atlas_assets.outputs.config import load_outputs_config

    return load_outputs_config(overrides=overrides or None)
