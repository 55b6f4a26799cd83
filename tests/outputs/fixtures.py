"""A simulated panel and a synthetic posterior around its truth, as an ArviZ posterior and as PosteriorDraws."""

from __future__ import annotations

import arviz as az
import numpy as np

from atlas_assets.model.scores import display_scale, observation_draws
from atlas_assets.model.simulate import simulate_panel, simulated_references
from atlas_assets.model.stan_data import build_stan_data, load_model_config, state_labels
from atlas_assets.outputs.draws import PosteriorDraws


def synthetic_fit(seed: int = 3, chains: int = 2, draws: int = 150, n_models: int = 40, n_families: int = 9,
                  target_obs: int = 330, noise: float = 0.1):
    """(StanInput, idata with posterior + per-observation groups, PosteriorDraws, model config)."""
    cfg = load_model_config()
    df, truth = simulate_panel(n_models=n_models, n_families=n_families, target_obs=target_obs, seed=seed, config=cfg)
    cfg["display"]["reference"] = simulated_references(df, truth)
    si = build_stan_data(df, cfg)
    rng = np.random.default_rng(seed)
    fam = si.families
    shape = (chains, draws)

    def around(values, sd, positive=False):
        values = np.asarray(values, dtype=float)
        z = rng.standard_normal(shape + values.shape)
        return values * np.exp(sd * z) if positive else values + sd * z

    bounded = fam.sort_values("bounded_pos").query("bounded_pos >= 0")["family"]
    rating = fam.sort_values("rating_pos").query("rating_pos >= 0")["family"]
    post = {
        "phi": around(truth.phi[state_labels(si.states)].to_numpy(), noise),
        "b": around(truth.b[fam["family"]].to_numpy(), noise),
        "beta": around(truth.beta[fam["family"]].to_numpy(), noise, positive=True),
        "kappa": around(truth.kappa[bounded].to_numpy(), noise, positive=True),
        "rating_sd": around(truth.rating_sd[rating].to_numpy(), noise, positive=True),
        "hurdle_a": around(truth.hurdle_a, noise),
        "hurdle_b": around(truth.hurdle_b, noise, positive=True),
    }
    idata = az.from_dict(posterior=post)
    od = observation_draws(idata, si, seed=seed)
    flat = lambda a: a.reshape((chains * draws,) + a.shape[2:])  # noqa: E731
    lo, hi = _reference_positions(si, cfg)
    phi = flat(post["phi"])
    sc = display_scale(phi, lo, hi, cfg["display"]["reference"]["low"]["value"], cfg["display"]["reference"]["high"]["value"])
    J = len(fam)
    kappa = np.full((chains * draws, J), np.nan)
    rsd = np.full((chains * draws, J), np.nan)
    bp, rp = fam["bounded_pos"].to_numpy(), fam["rating_pos"].to_numpy()
    kappa[:, bp >= 0] = flat(post["kappa"])[:, bp[bp >= 0]]
    rsd[:, rp >= 0] = flat(post["rating_sd"])[:, rp[rp >= 0]]
    pd_ = PosteriorDraws(phi=phi, b=flat(post["b"]), beta=flat(post["beta"]), kappa=kappa, rating_sd=rsd,
                         hurdle_a=flat(post["hurdle_a"]), hurdle_b=flat(post["hurdle_b"]), scale=sc.scale,
                         offset=sc.offset, one_eps=float(si.data["one_eps"]),
                         mu_obs=flat(od["mu_obs"]), u_rep=flat(od["u_rep"]))
    return si, idata, pd_, cfg


def _reference_positions(si, cfg):
    from atlas_assets.model.scores import resolve_reference_states

    return resolve_reference_states(si, cfg)
