"""An affine preconditioner for stan/atlas.stan from an earlier posterior, carried to new data by name.

The program's unconstrained blocks (BLOCKS, stacked in this order) can be sampled as
x = pc_loc + pc_chol @ pc_z. With pc_loc and pc_chol the mean and a Cholesky factor of
an earlier posterior's covariance of x, the sampler sees a near-isotropic posterior: the
slow direction of the real panel (the top tail of capability stretching against the
discriminations of the families that measure it, docs/model.md) becomes one unit-scale
coordinate that a diagonal metric handles, under PyStan as well as CmdStan. The map has a
constant Jacobian, so the posterior is unchanged.

The earlier posterior may come from other data (a validation fold, last night's fit, a
short pilot run on the same data): `transported_draws` rewrites each of its draws in the
coordinates of the new Stan input, matching models, states, families and settings by
name; a coordinate with nothing to match (a new model, a new family) gets no draws and is
left uncorrelated at a configured scale. The same draws give per-chain inits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from atlas_assets.model.stan_data import StanInput, state_labels

# (name in the Stan program, length in terms of the data sizes): the stacking order of the program
BLOCKS = (
    "theta_ref_raw", "pin_free", "b_raw", "lambda_raw", "logkappa_raw", "shared_effect",
    "b_mu", "lambda_mu", "logkappa_mu", "hurdle_a", "amp_z", "curv_z", "dev_z",
)
# positive parameters: not in the affine block, but carried over as inits
POSITIVE = ("b_sd", "lambda_sd", "logkappa_sd", "hurdle_b", "shared_sd", "amp_sd", "curv_sd")


def block_sizes(data: dict) -> dict[str, int]:
    M, M_ref, J = data["M"], data["M_ref"], data["J"]
    return {
        "theta_ref_raw": M_ref - 1, "pin_free": M - M_ref, "b_raw": J, "lambda_raw": J,
        "logkappa_raw": data["J_b"], "shared_effect": data["L"] + data["K_off"],
        "b_mu": 1, "lambda_mu": 1, "logkappa_mu": 1, "hurdle_a": 1,
        "amp_z": data["A"], "curv_z": data["A"], "dev_z": data["D"],
    }


@dataclass
class Preconditioner:
    loc: np.ndarray             # (P,)
    chol: np.ndarray            # (P, P) lower triangular
    matched: np.ndarray         # (P,) bool: coordinate carried over from the earlier posterior
    draws: np.ndarray           # (n, P) the transported draws (unmatched coordinates at loc)
    positive_inits: list[dict]  # per transported draw: positive parameters by Stan name

    def data(self) -> dict:
        return {"P_pc": int(len(self.loc)), "pc_loc": self.loc.tolist(), "pc_chol": self.chol.tolist()}

    def inits(self, chains: int, rng: np.random.Generator | None = None) -> list[dict]:
        """Per chain: an earlier draw (evenly spaced over the draws) as pc_z plus its positive parameters."""
        picks = np.linspace(0, len(self.draws) - 1, chains).round().astype(int)
        out = []
        for pick in picks:
            z = np.linalg.solve(self.chol, self.draws[pick] - self.loc)
            out.append({"pc_z": z.tolist(), **self.positive_inits[pick]})
        return out


def _flat(posterior, name: str) -> np.ndarray | None:
    if name not in posterior:
        return None
    values = posterior[name].values
    return values.reshape((values.shape[0] * values.shape[1],) + values.shape[2:])


def helmert_coordinates(x: np.ndarray) -> np.ndarray:
    """Inverse of the program's helmert_sum_zero: w = H' x for rows of x (each summing to zero)."""
    n = x.shape[1]
    k = np.arange(1, n, dtype=float)
    prefix = np.cumsum(x, axis=1)[:, :-1]
    return (prefix - k * x[:, 1:]) / np.sqrt(k * (k + 1))


def transported_draws(previous_posterior, previous: StanInput, current: StanInput,
                      max_draws: int = 1000) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """Draws of the current program's stacked blocks computed from an earlier posterior by name.

    Returns (draws (n, P) with NaN where nothing matches, matched (P,), positive inits per draw)."""
    phi_prev = _flat(previous_posterior, "phi")
    n_all = phi_prev.shape[0]
    take = np.linspace(0, n_all - 1, min(max_draws, n_all)).round().astype(int)
    phi_prev = phi_prev[take]
    get = {name: (_flat(previous_posterior, name)[take] if name in previous_posterior else None)
           for name in ("theta", "b", "beta", "kappa", "shared_effect", "b_mu", "lambda_mu", "logkappa_mu",
                        "hurdle_a", "amp_z", "curv_z", "dev_z", *POSITIVE, "rating_sd", "offdev_sd")}
    n = len(take)
    data = current.data
    sizes = block_sizes(data)
    blocks: dict[str, np.ndarray] = {name: np.full((n, size), np.nan) for name, size in sizes.items()}

    prev_states = {label: i for i, label in enumerate(state_labels(previous.states))}
    prev_models = {m: i for i, m in enumerate(previous.models["model"])}
    prev_families = {f: i for i, f in enumerate(previous.families["family"])}
    cur_labels = state_labels(current.states).to_numpy()

    # capability of the reference models, standardised per draw, in Helmert coordinates (radius at its centre)
    ref_models = [current.models["model"].iat[i - 1] for i in data["ref_model"]]
    if all(m in prev_models for m in ref_models) and get["theta"] is not None:
        x = get["theta"][:, [prev_models[m] for m in ref_models]]
        x = (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, ddof=1, keepdims=True)
        blocks["theta_ref_raw"] = helmert_coordinates(x)
    # capability of each free model's pinned state
    pinned = current.states.loc[current.states.pinned].set_index("model")
    free_models = [current.models["model"].iat[i - 1] for i in data["free_model"]]
    for col, model in enumerate(free_models):
        label = f"{model}|{pinned.loc[model, 'reasoning_state']}"
        if label in prev_states:
            blocks["pin_free"][:, col] = phi_prev[:, prev_states[label]]

    # family blocks (shifted difficulty needs the phi of every state the new centre averages)
    fam = current.families
    beta_prev, b_prev = get["beta"], get["b"]
    avg_u, avg_v, avg_w = data["avg_u"], data["avg_v"], data["avg_w"]
    for j, family in enumerate(fam["family"]):
        if family not in prev_families or beta_prev is None:
            continue
        pj = prev_families[family]
        log_beta = np.log(beta_prev[:, pj])
        if data["nc_lambda"]:
            blocks["lambda_raw"][:, j] = (log_beta - get["lambda_mu"]) / get["lambda_sd"]
        else:
            blocks["lambda_raw"][:, j] = log_beta
        if data["shift_b"]:
            members = [avg_v[i] - 1 for i in range(avg_u[j] - 1, avg_u[j + 1] - 1)]
            weights = np.asarray(avg_w[avg_u[j] - 1:avg_u[j + 1] - 1])
            if all(cur_labels[s] in prev_states for s in members):
                pbar = phi_prev[:, [prev_states[cur_labels[s]] for s in members]] @ weights
                blocks["b_raw"][:, j] = beta_prev[:, pj] * (pbar - b_prev[:, pj])
        elif data["nc_b"]:
            blocks["b_raw"][:, j] = (b_prev[:, pj] - get["b_mu"]) / get["b_sd"]
        else:
            blocks["b_raw"][:, j] = b_prev[:, pj]
        bpos = int(fam["bounded_pos"].iat[j])
        prev_bpos = int(previous.families["bounded_pos"].iat[pj])
        if bpos >= 0 and prev_bpos >= 0 and get["kappa"] is not None:
            log_kappa = np.log(get["kappa"][:, prev_bpos])
            blocks["logkappa_raw"][:, bpos] = (
                (log_kappa - get["logkappa_mu"]) / get["logkappa_sd"] if data["nc_logkappa"] else log_kappa)

    # shared settings and hyper-means by name
    prev_settings = list(previous.settings["setting"])
    if get["shared_effect"] is not None:
        for k, setting in enumerate(current.settings["setting"]):
            if setting in prev_settings:
                blocks["shared_effect"][:, k] = get["shared_effect"][:, prev_settings.index(setting)]
    for name in ("b_mu", "lambda_mu", "logkappa_mu", "hurdle_a"):
        if get[name] is not None:
            blocks[name][:, 0] = get[name]

    # per-model ladder terms and per-state off-ladder deviations
    prev_amp = {m: i for i, m in enumerate(_amp_models(previous))}
    for col, model in enumerate(_amp_models(current)):
        if model in prev_amp and get["amp_z"] is not None:
            blocks["amp_z"][:, col] = get["amp_z"][:, prev_amp[model]]
            blocks["curv_z"][:, col] = get["curv_z"][:, prev_amp[model]]
    prev_dev = _dev_labels(previous)
    for col, label in enumerate(_dev_labels(current)):
        if label in prev_dev and get["dev_z"] is not None:
            blocks["dev_z"][:, col] = get["dev_z"][:, prev_dev.index(label)]

    draws = np.concatenate([blocks[name] for name in BLOCKS], axis=1)
    matched = ~np.isnan(draws).any(axis=0)
    positive = _positive_inits(get, previous, current, n)
    return draws, matched, positive


def _amp_models(si: StanInput) -> list[str]:
    st = si.states
    return list(st.loc[st.amp_index > 0].sort_values("amp_index").drop_duplicates("model")["model"])


def _dev_labels(si: StanInput) -> list[str]:
    st = si.states
    return list(state_labels(st.loc[st.dev_index > 0].sort_values("dev_index")))


def _positive_inits(get: dict, previous: StanInput, current: StanInput, n: int) -> list[dict]:
    out = [dict() for _ in range(n)]
    for name in POSITIVE:
        if get.get(name) is not None:
            for i in range(n):
                out[i][name] = float(get[name][i])
    # per-family rating sd and per-setting deviation scale, by name, where every one is matched
    cur_r = current.families.loc[current.families.rating_pos >= 0].sort_values("rating_pos")["family"].tolist()
    prev_r = previous.families.loc[previous.families.rating_pos >= 0].sort_values("rating_pos")["family"].tolist()
    if get.get("rating_sd") is not None and cur_r and all(f in prev_r for f in cur_r):
        idx = [prev_r.index(f) for f in cur_r]
        for i in range(n):
            out[i]["rating_sd"] = get["rating_sd"][i, idx].tolist()
    if get.get("offdev_sd") is not None and current.data["K_off"] == previous.data["K_off"]:
        for i in range(n):
            out[i]["offdev_sd"] = get["offdev_sd"][i].tolist()
    return out


def unmatched_scales(current: StanInput, config: dict) -> np.ndarray:
    """Prior-like scale of each stacked coordinate, for coordinates no earlier draw informs."""
    pre = config.get("parametrization", {}).get("preconditioning", {}) or {}
    per_block = {
        "theta_ref_raw": pre.get("capability", 0.15), "pin_free": 1.0, "b_raw": pre.get("b", 0.2),
        "lambda_raw": pre.get("lambda", 0.1) * 3, "logkappa_raw": pre.get("logkappa", 0.25) * 2,
        "shared_effect": pre.get("shared_effect", 0.1), "b_mu": 0.5, "lambda_mu": 0.2, "logkappa_mu": 0.3,
        "hurdle_a": 0.8, "amp_z": 1.0, "curv_z": 1.0, "dev_z": 1.0,
    }
    sizes = block_sizes(current.data)
    return np.concatenate([np.full(sizes[name], float(per_block[name])) for name in BLOCKS])


def build_preconditioner(previous_posterior, previous: StanInput, current: StanInput, config: dict,
                         shrinkage: float = 0.1, max_draws: int = 1000) -> Preconditioner:
    """Mean and shrunk covariance of the transported draws: (1 - a) S + a diag(S) on matched coordinates,
    unmatched ones uncorrelated at their prior-like scale, centred at 0 (or, for a new pinned state, at the
    mean capability)."""
    draws, matched, positive = transported_draws(previous_posterior, previous, current, max_draws)
    scales = unmatched_scales(current, config)
    loc = np.where(matched, np.nanmean(np.where(matched, draws, 0.0), axis=0), 0.0)
    P = draws.shape[1]
    cov = np.diag(scales ** 2)
    if matched.any():
        known = draws[:, matched]
        sample = np.cov(known, rowvar=False)
        sample = np.atleast_2d(sample)
        shrunk = (1 - shrinkage) * sample + shrinkage * np.diag(np.diag(sample))
        cov[np.ix_(matched, matched)] = shrunk
    # The radius of theta_ref_raw never reaches the likelihood (only its direction does) and transported
    # draws all sit on the sphere of radius sqrt(M_ref - 1): give the radial direction (the mean direction,
    # up to the small angular spread) the radial prior's variance, which the posterior has there.
    n_ref = block_sizes(current.data)["theta_ref_raw"]
    if n_ref and matched[:n_ref].all():
        direction = loc[:n_ref] / np.linalg.norm(loc[:n_ref])
        radial_sd = float(config.get("parametrization", {}).get("radial_sd", 0.15)) or 1.0
        cov[:n_ref, :n_ref] += radial_sd ** 2 * np.outer(direction, direction)
    cov += 1e-8 * np.eye(P)
    chol = np.linalg.cholesky(cov)
    filled = np.where(matched, draws, loc)
    return Preconditioner(loc=loc, chol=chol, matched=matched, draws=filled, positive_inits=positive)


def summary(pc: Preconditioner) -> dict:
    """What the preconditioner carries: sizes and the largest posterior correlation eigenvalue it removes."""
    cov = pc.chol @ pc.chol.T
    sd = np.sqrt(np.diag(cov))
    corr = cov / np.outer(sd, sd)
    eig = np.linalg.eigvalsh(corr)
    return {"P": int(len(pc.loc)), "matched": int(pc.matched.sum()), "largest_correlation_eigenvalue": float(eig[-1]),
            "condition_number": float(eig[-1] / max(eig[0], 1e-12))}
