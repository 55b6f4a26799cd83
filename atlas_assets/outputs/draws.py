"""The posterior draws every output reads, in one place: thinned evenly, with the display scale per draw.

`PosteriorDraws` holds plain arrays (draw first) indexed like the fit's index frames
(`StanInput.states`, `.families`, `.observations`), so every output is a pure function of
it and can be tested on a handful of hand-made draws.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from atlas_assets.outputs.cell_model import FamilyLikelihood


@dataclass(frozen=True)
class PosteriorDraws:
    phi: np.ndarray            # (D, S) capability of each state (latent)
    b: np.ndarray              # (D, J) difficulty (latent)
    beta: np.ndarray           # (D, J) discrimination (latent)
    kappa: np.ndarray          # (D, J) dispersion, NaN for rating families
    rating_sd: np.ndarray      # (D, J) residual sd, NaN for bounded families
    hurdle_a: np.ndarray       # (D,)
    hurdle_b: np.ndarray       # (D,)
    scale: np.ndarray          # (D,) display units per latent unit
    offset: np.ndarray         # (D,) display = offset + scale * latent
    one_eps: float = 0.005
    mu_obs: np.ndarray | None = None   # (D, N) expected score of each observation (fit's own pass)
    u_rep: np.ndarray | None = None    # (D, N) posterior predictive draw of each observation

    @property
    def n_draws(self) -> int:
        return self.phi.shape[0]

    def display(self, latent: np.ndarray) -> np.ndarray:
        """Latent capability-scale draws (D, ...) on the display scale."""
        shape = (-1,) + (1,) * (np.ndim(latent) - 1)
        return self.offset.reshape(shape) + self.scale.reshape(shape) * latent

    def thin(self, max_draws: int) -> "PosteriorDraws":
        """At most `max_draws` draws, evenly spaced (all when there are fewer)."""
        keep = thin_index(self.n_draws, max_draws)
        if len(keep) == self.n_draws:
            return self
        changes = {name: getattr(self, name)[keep] for name in
                   ("phi", "b", "beta", "kappa", "rating_sd", "hurdle_a", "hurdle_b", "scale", "offset")}
        for name in ("mu_obs", "u_rep"):
            if getattr(self, name) is not None:
                changes[name] = getattr(self, name)[keep]
        return replace(self, **changes)

    def family(self, j: int, families: pd.DataFrame) -> FamilyLikelihood:
        row = families.iloc[j]
        bounded = row["kind"] != "rating"
        return FamilyLikelihood(
            kind="bounded" if bounded else "rating",
            floor=float(row["floor"]),
            hurdle=bool(bounded and float(row["floor"]) == 0.0),
            kappa=self.kappa[:, j] if bounded else None,
            rating_sd=None if bounded else self.rating_sd[:, j],
            hurdle_a=self.hurdle_a,
            hurdle_b=self.hurdle_b,
            one_eps=self.one_eps,
        )

    def eta(self, state_pos: np.ndarray, j: int) -> np.ndarray:
        """Linear predictor beta_j (phi_s - b_j), (D, len(state_pos))."""
        return self.beta[:, [j]] * (self.phi[:, np.asarray(state_pos, dtype=int)] - self.b[:, [j]])


def thin_index(n: int, max_draws: int) -> np.ndarray:
    if n <= max_draws:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, max_draws).round().astype(int))


def from_fit(loaded) -> PosteriorDraws:
    """PosteriorDraws of a fit read back by `atlas_assets.model.fit_process.load_fit`."""
    from atlas_assets.model.scores import draws_of

    idata, si, scale = loaded.idata, loaded.stan_input, loaded.scale
    fam = si.families
    D = draws_of(idata, "phi").shape[0]
    J = len(fam)
    kappa = np.full((D, J), np.nan)
    rating_sd = np.full((D, J), np.nan)
    bp, rp = fam["bounded_pos"].to_numpy(), fam["rating_pos"].to_numpy()
    if (bp >= 0).any():
        kappa[:, bp >= 0] = draws_of(idata, "kappa")[:, bp[bp >= 0]]
    if (rp >= 0).any():
        rating_sd[:, rp >= 0] = draws_of(idata, "rating_sd")[:, rp[rp >= 0]]

    def per_obs(group: str, name: str) -> np.ndarray | None:
        if group not in idata.groups() or name not in idata[group]:
            return None
        v = idata[group][name].values
        return v.reshape((v.shape[0] * v.shape[1],) + v.shape[2:]).astype(float)

    return PosteriorDraws(
        phi=draws_of(idata, "phi"), b=draws_of(idata, "b"), beta=draws_of(idata, "beta"),
        kappa=kappa, rating_sd=rating_sd,
        hurdle_a=draws_of(idata, "hurdle_a").reshape(D), hurdle_b=draws_of(idata, "hurdle_b").reshape(D),
        scale=np.asarray(scale.scale, dtype=float), offset=np.asarray(scale.offset, dtype=float),
        one_eps=float(si.data["one_eps"]),
        mu_obs=per_obs("expected_score", "mu_obs"), u_rep=per_obs("posterior_predictive", "u_rep"),
    )


def typical_items(observations: pd.DataFrame, n_families: int) -> np.ndarray:
    """Per family (position order): the median item count of its countable observations when most of
    its observations are countable, else NaN (continuous). What an unobserved cell is predicted with."""
    out = np.full(n_families, np.nan)
    obs = observations
    countable = obs["correct"].notna() & obs["items"].notna() & (obs["kind"] != "rating")
    for j, rows in obs.assign(_c=countable).groupby("family_pos"):
        if rows["_c"].mean() > 0.5:
            out[int(j)] = float(np.round(np.median(rows.loc[rows["_c"], "items"].astype(float))))
    return out


def observation_items(observations: pd.DataFrame) -> np.ndarray:
    """Items of each observation (NaN when continuous or a rating), in observation order."""
    countable = observations["correct"].notna() & observations["items"].notna() & (observations["kind"] != "rating")
    return np.where(countable, observations["items"].astype(float), np.nan)


def summarize(draws: np.ndarray, interval: float) -> dict[str, np.ndarray]:
    """mean, median and central interval of (D, ...) draws along the first axis."""
    a = (1 - interval) / 2
    q = np.quantile(draws, [a, 0.5, 1 - a], axis=0)
    return {"mean": draws.mean(axis=0), "median": q[1], "lower": q[0], "upper": q[2]}
