"""An affine preconditioner for stan/atlas.stan from an earlier posterior, carried to new data by name.

The program's unconstrained blocks (BLOCKS, stacked in this order) can be sampled as
x = pc_loc + A pc_z. With pc_loc and A the mean and a square root of an earlier posterior's
covariance of x (a Cholesky factor, or the diagonal-plus-low-rank form the program applies
in time linear in the number of coordinates), the sampler sees a near-isotropic posterior: the
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

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from atlas_assets.model.stan_data import StanInput, state_labels

# (name in the Stan program, length in terms of the data sizes): the stacking order of the program
BLOCKS = (
    "theta_ref_raw", "pin_free", "b_raw", "lambda_raw", "logkappa_raw", "shared_effect",
    "b_mu", "lambda_mu", "logkappa_mu", "hurdle_a", "log_scale", "amp_z", "curv_z", "dev_z",
)
# the block "log_scale": the logs of every positive scale, in the program's SCALE_ORDER (these seven, then
# offdev_sd per off-ladder setting, then rating_sd per rating family)
SCALARS = ("b_sd", "lambda_sd", "logkappa_sd", "hurdle_b", "shared_sd", "amp_sd", "curv_sd")


def block_sizes(data: dict) -> dict[str, int]:
    M, M_ref, J = data["M"], data["M_ref"], data["J"]
    return {
        "theta_ref_raw": M_ref - 1, "pin_free": M - M_ref, "b_raw": J, "lambda_raw": J,
        "logkappa_raw": data["J_b"], "shared_effect": data["L"] + data["K_off"],
        "b_mu": 1, "lambda_mu": 1, "logkappa_mu": 1, "hurdle_a": 1,
        "log_scale": len(SCALARS) + data["K_off"] + data["J_r"],
        "amp_z": data["A"], "curv_z": data["A"], "dev_z": data["D"],
    }


@dataclass
class Preconditioner:
    """The map x = loc + A z, in one of two forms (the program's `P_dense` switch):
    dense, A = chol (P x P); or diagonal plus low rank, A = diag(scale) (I + left @ right.T) with left and right
    P x K, which the program applies in O(P K) per gradient instead of O(P^2)."""

    loc: np.ndarray             # (P,)
    matched: np.ndarray         # (P,) bool: coordinate carried over from the earlier posterior
    draws: np.ndarray           # (n, P) the transported draws (unmatched coordinates at loc)
    chol: np.ndarray | None = None    # dense form: (P, P), lower triangular until stiffness_correction shapes it
    scale: np.ndarray | None = None   # low-rank form: (P,)
    left: np.ndarray | None = None    # low-rank form: (P, K)
    right: np.ndarray | None = None   # low-rank form: (P, K)
    # the program's conditional-centring data ({amp,curv,dev}_{hat,prec}); None: plain non-centred
    centring: dict | None = None

    @property
    def dense(self) -> bool:
        return self.chol is not None

    @property
    def rank(self) -> int:
        return 0 if self.dense else int(self.left.shape[1])

    def data(self) -> dict:
        P = int(len(self.loc))
        centring = {k: np.asarray(v).tolist() for k, v in (self.centring or {}).items()}
        if self.dense:
            return {"P_pc": P, "pc_loc": self.loc.tolist(), "P_dense": P, "pc_chol": self.chol.tolist(),
                    "pc_scale": [], "K_pc": 0, "pc_left": np.zeros((0, 0)), "pc_right_t": np.zeros((0, 0)),
                    **centring}
        return {"P_pc": P, "pc_loc": self.loc.tolist(), "P_dense": 0, "pc_chol": np.zeros((0, 0)),
                "pc_scale": self.scale.tolist(), "K_pc": self.rank, "pc_left": self.left.tolist(),
                "pc_right_t": self.right.T.tolist(), **centring}

    def x(self, z: np.ndarray) -> np.ndarray:
        """Points x (rows) of sampled coordinates z (rows): x = loc + A z."""
        z = np.atleast_2d(z)
        if self.dense:
            return self.loc + z @ self.chol.T
        return self.loc + self.scale * (z + (z @ self.right) @ self.left.T)

    def z(self, rows: np.ndarray) -> np.ndarray:
        """The sampled coordinates pc_z of points x (rows): x = loc + A z."""
        y = np.atleast_2d(rows) - self.loc
        if self.dense:
            return np.linalg.solve(self.chol, y.T).T
        # Woodbury: (I + L R')^-1 = I - L (I_K + R' L)^-1 R'
        y = y / self.scale
        core = np.eye(self.rank) + self.right.T @ self.left
        return y - np.linalg.solve(core, (y @ self.right).T).T @ self.left.T

    def matrix(self) -> np.ndarray:
        """A as a dense P x P matrix (for summaries and tests; the program never forms it in the low-rank form)."""
        if self.dense:
            return self.chol
        return self.scale[:, None] * (np.eye(len(self.loc)) + self.left @ self.right.T)

    def scaled_along(self, directions: np.ndarray, factors: np.ndarray) -> "Preconditioner":
        """The map A S with S = I + V diag(factors - 1) V' (V: orthonormal `directions`, P x k): A scaled by
        `factors` along those directions of z. In the low-rank form the rank grows by k:
        (I + L R')(I + V T V') = I + [L, (I + L R') V T] [R, V]'."""
        t = np.asarray(factors, dtype=float) - 1.0
        if self.dense:
            s = np.eye(len(self.loc)) + (directions * t) @ directions.T
            return replace(self, chol=self.chol @ s)
        vt = directions * t
        left = np.hstack([self.left, vt + self.left @ (self.right.T @ vt)])
        right = np.hstack([self.right, directions])
        return replace(self, left=left, right=right)

    def inits(self, chains: int, rng: np.random.Generator | None = None) -> list[dict]:
        """Per chain: an earlier draw (evenly spaced over the draws) as pc_z."""
        picks = np.linspace(0, len(self.draws) - 1, chains).round().astype(int)
        return [{"pc_z": row.tolist()} for row in self.z(self.draws[picks])]


def _flat(posterior, name: str) -> np.ndarray | None:
    if name not in posterior:
        return None
    values = posterior[name].values
    return values.reshape((values.shape[0] * values.shape[1],) + values.shape[2:])


def _taken(n_all: int, max_draws: int) -> np.ndarray:
    """Which of n_all pooled (chain-major) draws are transported: at most max_draws, evenly spaced."""
    return np.linspace(0, n_all - 1, min(max_draws, n_all)).round().astype(int)


def draw_chains(previous_posterior, max_draws: int = 1000) -> np.ndarray:
    """The chain of each row of transported_draws(previous_posterior, ..., max_draws)."""
    chains, draws = previous_posterior["phi"].shape[:2]
    return _taken(chains * draws, max_draws) // draws


def helmert_coordinates(x: np.ndarray) -> np.ndarray:
    """Inverse of the program's helmert_sum_zero: w = H' x for rows of x (each summing to zero)."""
    n = x.shape[1]
    k = np.arange(1, n, dtype=float)
    prefix = np.cumsum(x, axis=1)[:, :-1]
    return (prefix - k * x[:, 1:]) / np.sqrt(k * (k + 1))


def transported_draws(previous_posterior, previous: StanInput, current: StanInput,
                      max_draws: int = 1000, extra_phi: dict | None = None,
                      restandardise: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Draws of the current program's stacked blocks computed from an earlier posterior by name.

    `extra_phi`: {state label: (n,) capability per taken draw} for states the earlier posterior lacks, read as if it
    had them (model/placement.py places a new reference model's pinned state so). `restandardise`: where the reference
    set differs from the earlier one, carry every draw to the new set's capability scale first (rescaled_draws).
    Returns (draws (n, P) with NaN where nothing matches, matched (P,))."""
    phi_prev = _flat(previous_posterior, "phi")
    take = _taken(phi_prev.shape[0], max_draws)
    phi_prev = phi_prev[take]
    if extra_phi:
        phi_prev = np.concatenate([phi_prev, np.column_stack([np.asarray(v, float) for v in extra_phi.values()])], axis=1)
        previous = replace(previous, states=pd.concat(
            [previous.states, pd.DataFrame({"model": [k.split("|", 1)[0] for k in extra_phi],
                                            "reasoning_state": [k.split("|", 1)[1] for k in extra_phi]})],
            ignore_index=True))
    get = {name: (_flat(previous_posterior, name)[take] if name in previous_posterior else None)
           for name in ("theta", "b", "beta", "kappa", "shared_effect", "b_mu", "lambda_mu", "logkappa_mu",
                        "hurdle_a", "amp_z", "curv_z", "dev_z", *SCALARS, "rating_sd", "offdev_sd")}
    n = len(take)
    data = current.data
    sizes = block_sizes(data)
    blocks: dict[str, np.ndarray] = {name: np.full((n, size), np.nan) for name, size in sizes.items()}

    prev_states = {label: i for i, label in enumerate(state_labels(previous.states))}
    prev_models = {m: i for i, m in enumerate(previous.models["model"])}
    prev_families = {f: i for i, f in enumerate(previous.families["family"])}
    cur_labels = state_labels(current.states).to_numpy()

    # capability of the reference models, standardised per draw, in Helmert coordinates (radius at its centre); a
    # reference model the earlier posterior lacks enters by its pinned state's capability in `extra_phi`
    ref_models = [current.models["model"].iat[i - 1] for i in data["ref_model"]]
    pinned_labels = dict(zip(current.states.loc[current.states.pinned, "model"],
                             state_labels(current.states.loc[current.states.pinned])))
    if get["theta"] is not None and all(m in prev_models or pinned_labels.get(m) in prev_states for m in ref_models):
        x = np.column_stack([get["theta"][:, prev_models[m]] if m in prev_models
                             else phi_prev[:, prev_states[pinned_labels[m]]] for m in ref_models])
        centre, spread = x.mean(axis=1), x.std(axis=1, ddof=1)
        earlier_refs = set(previous.models.loc[previous.models["is_reference"], "model"])
        if restandardise and set(ref_models) != earlier_refs:
            phi_prev, get = rescaled_draws(phi_prev, get, centre, spread)
        x = (x - centre[:, None]) / spread[:, None]
        blocks["theta_ref_raw"] = helmert_coordinates(x)
    # capability of each free model's pinned state
    free_models = [current.models["model"].iat[i - 1] for i in data["free_model"]]
    for col, model in enumerate(free_models):
        label = pinned_labels[model]
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
            log_kappa = logkappa_coordinate(get["kappa"][:, prev_bpos], data.get("log_kappa_max", 0.0))
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
    blocks["log_scale"] = _log_scales(get, previous, current, n)

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
    return draws, matched


def rescaled_draws(phi: np.ndarray, get: dict, centre: np.ndarray, spread: np.ndarray) -> tuple[np.ndarray, dict]:
    """Earlier draws carried to a capability scale whose reference set has, per draw, mean `centre` and sd `spread`
    in the earlier scale's units (a reference model added or gone). Capabilities, difficulties and their hyper-mean
    become (v - centre) / spread; the capability-scale sds (b_sd, shared, ladder and off-ladder sds) and the shared
    effects are divided by spread; discriminations are multiplied by it (their log and log hyper-mean shifted), so
    every linear predictor beta (phi - b), and with it the likelihood, is the draw's own. Measured: without this, a
    refit onto three new frontier reference models left the earlier draws untypical (docs/model.md, stop 27)."""
    c, s = centre[:, None], spread[:, None]
    out = dict(get)
    for name in ("theta", "b"):
        if out.get(name) is not None:
            out[name] = (out[name] - c) / s
    if out.get("b_mu") is not None:
        out["b_mu"] = (out["b_mu"] - centre) / spread
    if out.get("beta") is not None:
        out["beta"] = out["beta"] * s
    if out.get("lambda_mu") is not None:
        out["lambda_mu"] = out["lambda_mu"] + np.log(spread)
    for name in ("b_sd", "shared_sd", "amp_sd", "curv_sd"):
        if out.get(name) is not None:
            out[name] = out[name] / spread
    for name in ("shared_effect", "offdev_sd"):
        if out.get(name) is not None:
            out[name] = out[name] / s
    return (phi - c) / s, out


def _amp_models(si: StanInput) -> list[str]:
    st = si.states
    return list(st.loc[st.amp_index > 0].sort_values("amp_index").drop_duplicates("model")["model"])


def _dev_labels(si: StanInput) -> list[str]:
    st = si.states
    return list(state_labels(st.loc[st.dev_index > 0].sort_values("dev_index")))


def _off_ladder_settings(si: StanInput) -> list[str]:
    return si.settings.loc[si.settings.setting_kind == "off_ladder", "setting"].tolist()


def _rating_families(si: StanInput) -> list[str]:
    fam = si.families
    return fam.loc[fam.rating_pos >= 0].sort_values("rating_pos")["family"].tolist()


def coordinate_names(si: StanInput, centred: bool = False) -> list[str]:
    """A name per stacked coordinate (BLOCKS order), by model, state, family and setting where the block has one;
    the scales by name (`offdev_sd[enabled]`, `rating_sd[family]`). `centred`: the per-model and per-state terms are
    the conditionally centred u (a map with `centring`), not z."""
    data, sizes = si.data, block_sizes(si.data)
    families = list(si.families["family"])
    bounded = si.families.loc[si.families.bounded_pos >= 0].sort_values("bounded_pos")["family"].tolist()
    models = list(si.models["model"])
    term = "u" if centred else "z"
    labels = {
        "theta_ref_raw": [f"theta_ref_raw[{k + 1}]" for k in range(sizes["theta_ref_raw"])],
        "pin_free": [f"pin_free[{models[i - 1]}]" for i in data["free_model"]],
        "b_raw": [f"b_raw[{f}]" for f in families],
        "lambda_raw": [f"lambda_raw[{f}]" for f in families],
        "logkappa_raw": [f"logkappa_raw[{f}]" for f in bounded],
        "shared_effect": [f"shared_effect[{s}]" for s in si.settings["setting"]],
        "log_scale": [*SCALARS, *(f"offdev_sd[{s}]" for s in _off_ladder_settings(si)),
                      *(f"rating_sd[{f}]" for f in _rating_families(si))],
        "amp_z": [f"amp_{term}[{m}]" for m in _amp_models(si)],
        "curv_z": [f"curv_{term}[{m}]" for m in _amp_models(si)],
        "dev_z": [f"dev_{term}[{label}]" for label in _dev_labels(si)],
    }
    names = []
    for block in BLOCKS:
        block_names = labels.get(block, [block] * sizes[block])
        if len(block_names) != sizes[block]:
            raise ValueError(f"{block}: {len(block_names)} names for {sizes[block]} coordinates")
        names += block_names
    return names


def scale_coordinate(scale, softplus: bool):
    """The sampled coordinate of a positive scale: log, or the inverse of softplus, log(expm1(scale))."""
    scale = np.asarray(scale, dtype=float)
    return np.log(np.expm1(scale)) if softplus else np.log(scale)


def logkappa_coordinate(kappa, log_kappa_max: float):
    """The log dispersion whose saturated value is `kappa` (the inverse of the program's 1 / kappa = exp(-log kappa) +
    exp(-log_kappa_max)); plain log without a cap (log_kappa_max 0)."""
    kappa = np.asarray(kappa, dtype=float)
    return np.log(kappa) - np.log1p(-kappa * np.exp(-log_kappa_max)) if log_kappa_max > 0 else np.log(kappa)


def scale_from_coordinate(coordinate, softplus: bool):
    """The positive scale of a sampled coordinate (the inverse of scale_coordinate): exp, or softplus."""
    coordinate = np.asarray(coordinate, dtype=float)
    return np.logaddexp(0.0, coordinate) if softplus else np.exp(coordinate)


def _log_scales(get: dict, previous: StanInput, current: StanInput, n: int) -> np.ndarray:
    """The log_scale block by name: the seven scalars, offdev_sd per off-ladder setting, rating_sd per rating
    family (NaN where the earlier fit has no such scale), each on the program's link (`scale_softplus`)."""
    softplus = bool(current.data.get("scale_softplus", 0))
    log = lambda v: scale_coordinate(v, softplus)  # noqa: E731
    names = list(SCALARS)
    out = np.full((n, len(SCALARS) + current.data["K_off"] + current.data["J_r"]), np.nan)
    for col, name in enumerate(names):
        if get.get(name) is not None:
            out[:, col] = log(get[name])
    at = len(SCALARS)
    prev_off = _off_ladder_settings(previous)
    for k, setting in enumerate(_off_ladder_settings(current)):
        if get.get("offdev_sd") is not None and setting in prev_off:
            out[:, at + k] = log(get["offdev_sd"][:, prev_off.index(setting)])
    at += current.data["K_off"]
    prev_r = _rating_families(previous)
    for k, family in enumerate(_rating_families(current)):
        if get.get("rating_sd") is not None and family in prev_r:
            out[:, at + k] = log(get["rating_sd"][:, prev_r.index(family)])
    return out


# blocks whose prior is std_normal (the non-centred per-model and per-state terms): a coordinate no earlier draw
# informs enters the map at its prior exactly (loc 0, scale 1), which the identity metric samples as well as the rest
STANDARD_NORMAL_BLOCKS = ("amp_z", "curv_z", "dev_z")


def standard_normal_mask(data: dict) -> np.ndarray:
    """(P,) bool: the stacked coordinates in STANDARD_NORMAL_BLOCKS."""
    sizes = block_sizes(data)
    return np.concatenate([np.full(sizes[name], name in STANDARD_NORMAL_BLOCKS) for name in BLOCKS])


# the conditionally centred terms: (name in the program's data, block of its coordinates, its sd's name)
CENTRED_TERMS = (("amp", "amp_z", "amp_sd"), ("curv", "curv_z", "curv_sd"), ("dev", "dev_z", "offdev_sd"))


def _block_slices(data: dict) -> dict[str, slice]:
    sizes, at, out = block_sizes(data), 0, {}
    for name in BLOCKS:
        out[name] = slice(at, at + sizes[name])
        at += sizes[name]
    return out


def term_scales(draws: np.ndarray, data: dict) -> dict:
    """Per centred term (CENTRED_TERMS), the sd of each of the program's terms in every transported draw, (n, units):
    amp_sd and curv_sd for every model's ladder terms, offdev_sd of its off-ladder setting for each deviation. Read
    from the draws' own log_scale block (already carried over by name; NaN where the earlier fit had no such sd)."""
    sizes = block_sizes(data)
    scales = scale_from_coordinate(draws[:, _block_slices(data)["log_scale"]], bool(data.get("scale_softplus", 0)))
    column = lambda name: scales[:, [SCALARS.index(name)] * sizes["amp_z"]]  # noqa: E731
    return {"amp_sd": column("amp_sd"), "curv_sd": column("curv_sd"),
            "offdev_sd": scales[:, [len(SCALARS) + int(k) - 1 for k in data["dev_setting"]]]}


def centring_fit(m: np.ndarray, sd: np.ndarray) -> tuple[float, float]:
    """(hat, prec) of one per-unit term from an earlier posterior's draws of the term m = sd z and its sd: the
    Gaussian likelihood N(hat | m, 1 / prec) under which m given sd is N(v prec hat, v), v = sd^2 / (1 + sd^2 prec),
    fitted to the draws by maximum likelihood (hat in closed form for each prec, prec by a bounded search on its
    log). (0, 0), plain non-centring, when the draws fit that no worse."""
    from scipy.optimize import minimize_scalar

    s2 = np.square(sd)

    def fitted(prec: float) -> tuple[float, float]:
        v = s2 / (1.0 + s2 * prec)
        hat = float(np.sum(m) / (prec * np.sum(v))) if prec > 0 else 0.0
        resid = m - v * prec * hat
        return -0.5 * float(np.sum(np.log(v) + resid * resid / v)), hat

    res = minimize_scalar(lambda log_prec: -fitted(np.exp(log_prec))[0], bounds=(-8.0, 16.0), method="bounded")
    prec = float(np.exp(res.x))
    loglik, hat = fitted(prec)
    if loglik <= fitted(0.0)[0]:
        return 0.0, 0.0
    return hat, prec


def conditional_centring(draws: np.ndarray, term_sds: dict, data: dict) -> dict:
    """The program's conditional-centring data ({amp,curv,dev}_{hat,prec}, see stan/atlas.stan) fitted to
    transported draws (z coordinates) and their sds (term_scales); a term without draws stays plainly non-centred."""
    blocks = _block_slices(data)
    out = {}
    for name, block, sd_name in CENTRED_TERMS:
        z, sd = draws[:, blocks[block]], term_sds[sd_name]
        hat, prec = np.zeros(z.shape[1]), np.zeros(z.shape[1])
        for col in range(z.shape[1]):
            if np.all(np.isfinite(z[:, col])) and np.all(np.isfinite(sd[:, col])):
                hat[col], prec[col] = centring_fit(sd[:, col] * z[:, col], sd[:, col])
        out[f"{name}_hat"], out[f"{name}_prec"] = hat, prec
    return out


def centred_coordinates(draws: np.ndarray, term_sds: dict, centring: dict, data: dict) -> np.ndarray:
    """Transported draws with each centred term's z replaced by the program's sampled coordinate
    u = (z - sd r prec hat) / sqrt(r), r = 1 / (1 + sd^2 prec) (NaN stays NaN: an unmatched coordinate)."""
    out = draws.copy()
    blocks = _block_slices(data)
    for name, block, sd_name in CENTRED_TERMS:
        z, sd = draws[:, blocks[block]], term_sds[sd_name]
        hat, prec = centring[f"{name}_hat"], centring[f"{name}_prec"]
        r = 1.0 / (1.0 + np.square(sd) * prec)
        u = (z - sd * r * prec * hat) / np.sqrt(r)
        out[:, blocks[block]] = np.where(prec > 0, u, z)
    return out


def unmatched_scales(current: StanInput, config: dict) -> np.ndarray:
    """Prior-like scale of each stacked coordinate, for coordinates no earlier draw informs."""
    pre = config.get("parametrization", {}).get("preconditioning", {}) or {}
    per_block = {
        "theta_ref_raw": pre.get("capability", 0.15), "pin_free": 1.0, "b_raw": pre.get("b", 0.2),
        "lambda_raw": pre.get("lambda", 0.1) * 3, "logkappa_raw": pre.get("logkappa", 0.25) * 2,
        "shared_effect": pre.get("shared_effect", 0.1), "b_mu": 0.5, "lambda_mu": 0.2, "logkappa_mu": 0.3,
        "hurdle_a": 0.8, "log_scale": 0.5, "amp_z": 1.0, "curv_z": 1.0, "dev_z": 1.0,
    }
    sizes = block_sizes(current.data)
    return np.concatenate([np.full(sizes[name], float(per_block[name])) for name in BLOCKS])


def unmatched_locs(current: StanInput, config: dict) -> np.ndarray:
    """Where an unmatched coordinate starts: 0, except a log scale, which starts at the log of its prior mean
    (HalfNormal(s): 0.8 s; a rating sd's gamma(2, 2/s): s)."""
    priors = config.get("priors", {})
    half_normal = {"b_sd": "b_sd", "lambda_sd": "lambda_sd", "logkappa_sd": "logkappa_sd", "hurdle_b": "hurdle_b",
                   "shared_sd": "shared_effect_sd", "amp_sd": "amplitude_sd", "curv_sd": "curvature_sd"}
    means = [0.8 * float(priors.get(half_normal[name], {}).get("scale", 0.5)) for name in SCALARS]
    means += [0.8 * float(priors.get("off_ladder_sd", {}).get("scale", 0.5))] * current.data["K_off"]
    means += [float(priors.get("rating_sd", {}).get("scale", 0.3))] * current.data["J_r"]
    sizes = block_sizes(current.data)
    softplus = bool(current.data.get("scale_softplus", 0))
    return np.concatenate([scale_coordinate(means, softplus) if name == "log_scale" else np.zeros(sizes[name])
                           for name in BLOCKS])


def top_eigenpairs(diagonal: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k largest eigenpairs (descending) of diag(diagonal) + rows' rows (rows: n x P), without forming the
    P x P matrix when P is large (Lanczos, scipy.sparse.linalg.eigsh, O(n P) per product): the cost of the map's
    construction then grows linearly in P, as its use in the program does."""
    P = rows.shape[1]
    k = min(k, P)
    if P <= max(4 * k, 200):
        lam, vec = np.linalg.eigh(np.diag(diagonal) + rows.T @ rows)
        return lam[::-1][:k], vec[:, ::-1][:, :k]
    from scipy.sparse.linalg import LinearOperator, eigsh

    op = LinearOperator((P, P), matvec=lambda v: diagonal * v.ravel() + rows.T @ (rows @ v.ravel()), dtype=float)
    lam, vec = eigsh(op, k=k, which="LA", v0=np.ones(P) / np.sqrt(P))
    order = np.argsort(lam)[::-1]
    return lam[order], vec[:, order]


def build_preconditioner(previous_posterior, previous: StanInput, current: StanInput, config: dict,
                         shrinkage: float = 0.1, max_draws: int = 1000, form: str = "dense",
                         max_rank: int = 50, min_eigenvalue: float = 2.0,
                         extra_phi: dict | None = None, restandardise: bool = False) -> Preconditioner:
    """Mean and shrunk covariance of the transported draws: (1 - a) S + a diag(S) on matched coordinates,
    unmatched ones uncorrelated at their prior-like scale, centred at 0 (or, for a new pinned state, at the
    mean capability).

    `form` "dense": A is the Cholesky factor of that covariance. "low_rank": A = diag(sd) (I + U (sqrt(lam) - 1) U')
    over the at most `max_rank` eigenpairs (lam, U) of its correlation with lam > `min_eigenvalue`, the slow
    directions the draws see; every other direction keeps its marginal sd (a diagonal metric). Directions stiffer
    than that are found from gradients instead (stiffness_correction)."""
    draws, matched = transported_draws(previous_posterior, previous, current, max_draws, extra_phi, restandardise)
    centring = None
    if config.get("parametrization", {}).get("conditional_centring", False):
        term_sds = term_scales(draws, current.data)
        centring = conditional_centring(draws, term_sds, current.data)
        draws = centred_coordinates(draws, term_sds, centring, current.data)
    return preconditioner_from_draws(draws, matched, centring, current, config, shrinkage=shrinkage, form=form,
                                     max_rank=max_rank, min_eigenvalue=min_eigenvalue)


def preconditioner_from_draws(draws: np.ndarray, matched: np.ndarray, centring: dict | None, current: StanInput,
                              config: dict, shrinkage: float = 0.1, form: str = "dense", max_rank: int = 50,
                              min_eigenvalue: float = 2.0) -> Preconditioner:
    """The map of draws already in the program's stacked (and, with `centring`, centred) coordinates: the second half
    of build_preconditioner, also used after new coordinates are placed (model/placement.py)."""
    scales = unmatched_scales(current, config)
    loc = np.where(matched, np.nanmean(np.where(matched, draws, 0.0), axis=0), unmatched_locs(current, config))
    P = draws.shape[1]
    # The radius of theta_ref_raw never reaches the likelihood (only its direction does) and transported
    # draws all sit on the sphere of radius sqrt(M_ref - 1): give the radial direction (the mean direction,
    # up to the small angular spread) the radial prior's variance, which the posterior has there.
    n_ref = block_sizes(current.data)["theta_ref_raw"]
    radial = np.zeros(P)
    if n_ref and matched[:n_ref].all():
        radial_sd = float(config.get("parametrization", {}).get("radial_sd", 0.15)) or 1.0
        radial[:n_ref] = radial_sd * loc[:n_ref] / np.linalg.norm(loc[:n_ref])
    filled = np.where(matched, draws, loc)
    diag_part, rows = shrunk_covariance_parts(draws, matched, scales, radial, shrinkage)
    if form == "dense":
        chol = np.linalg.cholesky(np.diag(diag_part) + rows.T @ rows)
        return Preconditioner(loc=loc, matched=matched, draws=filled, chol=chol, centring=centring)
    if form != "low_rank":
        raise ValueError(f"precondition map form must be dense or low_rank, not {form!r}")
    sd, left, right = low_rank_root(diag_part, rows, max_rank, min_eigenvalue)
    return Preconditioner(loc=loc, matched=matched, draws=filled, scale=sd, left=left, right=right,
                          centring=centring)


def shrunk_covariance_parts(draws: np.ndarray, matched: np.ndarray, unmatched_scale: np.ndarray,
                            radial: np.ndarray, shrinkage: float) -> tuple[np.ndarray, np.ndarray]:
    """The map's covariance as diag(diagonal) + rows' rows, never formed: (1 - a) S + a diag(S) over the matched
    coordinates (S the draws' sample covariance, a = `shrinkage`), the radial direction's variance radial radial',
    unmatched coordinates uncorrelated at `unmatched_scale` (plus 1e-8 on the diagonal)."""
    centred = np.zeros((len(draws), len(matched)))
    if matched.any():
        centred[:, matched] = draws[:, matched] - draws[:, matched].mean(axis=0)
    centred /= np.sqrt(max(len(draws) - 1, 1))
    sample_var = (centred ** 2).sum(axis=0)
    diagonal = np.where(matched, shrinkage * sample_var, unmatched_scale ** 2) + 1e-8
    return diagonal, np.vstack([np.sqrt(1 - shrinkage) * centred, radial[None, :]])


def low_rank_root(diagonal: np.ndarray, rows: np.ndarray, max_rank: int,
                  min_eigenvalue: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sd, left, right) with diag(sd) (I + left right') a square root of the covariance diag(diagonal) + rows' rows
    along its slow directions: sd the marginal sds, and (lam, U) the at most `max_rank` eigenpairs of the correlation
    with lam > `min_eigenvalue`, left = U (sqrt(lam) - 1), right = U (every other direction of the correlation
    is taken as 1: a diagonal metric there)."""
    sd = np.sqrt(diagonal + (rows ** 2).sum(axis=0))
    lam, vec = top_eigenpairs(diagonal / sd ** 2, rows / sd, max_rank)
    keep = lam > min_eigenvalue
    return sd, vec[:, keep] * (np.sqrt(lam[keep]) - 1), vec[:, keep]


def stiffness_correction(pc: Preconditioner, gradients: np.ndarray, max_rank: int = 50,
                         margin: float = 1.25, max_shrink: float = 2.0,
                         clip_quantile: float = 0.95, max_mean_share: float = 0.05) -> tuple[Preconditioner, dict]:
    """Shrink the preconditioner along the directions where the posterior is stiffer than its covariance says.

    `gradients` (n, P): the log density's gradient with respect to pc_z at n posterior draws (`Preconditioner.z`).
    For a posterior the map whitens exactly they are standard normal, E[g g'] = I. Where E[g g'] has an eigenvalue
    lam > 1 the log density curves more sharply than the draws' covariance suggests (a funnel's neck, a heavy-tailed
    marginal), and that direction caps the step size of every leapfrog step. Along each such eigenvector the map is
    scaled by lam^(-1/4): the metric Cg^(-1/2) that balances the draws' spread against the gradients' (Seyboldt et
    al., the Fisher-divergence criterion that nutpie adapts its mass matrix by), here only for eigenvalues above
    the noise edge of a sample of n (Marchenko-Pastur, (1 + sqrt(P / n))^2, times `margin`) and at most `max_rank`
    of them, and by no more than 1 / `max_shrink`: a few draws at a steep wall (a scale whose upper tail makes some
    prediction extreme) have gradients hundreds of times the typical one, and squeezing their direction by their
    eigenvalue starves every parameter that loads on it; so gradients are also clipped, each row to the
    `clip_quantile` of the rows' norms, before E[g g'] is formed. Nothing is changed when the gradients' mean
    carries more than `max_mean_share` of their second moment (the draws are then not typical of this posterior).
    The map stays affine, so the posterior is unchanged."""
    n, P = gradients.shape
    norms = np.linalg.norm(gradients, axis=1)
    # over draws of this posterior the gradient averages to 0 (its mean carries ~1/n_eff of its second moment);
    # a large mean says the earlier draws are off-centre here (a model or family new since, left at a prior-like
    # place, or a pilot stopped short of the typical set): their gradients then measure a location error, not
    # stiffness, and shrinking along them would only slow the chains. Measured: typical draws 0.3-0.8% (real panel,
    # pilot and warm; 2x simulated panel, second round); a 4x simulated panel's pilot at 19.8%, whose map left the
    # main fit at step size 0.018 and tree depth 8-9 (hence not the 25% of stop 22); warm refits after a data change
    # 1.2-7.8%, whose identity-metric main fits were as good as any (model.yaml's 10%: docs/model.md, stop 27)
    off_centre = float(np.sum(gradients.mean(axis=0) ** 2) / np.mean(norms ** 2))
    if off_centre > max_mean_share:
        return pc, {"gradient_draws": int(n), "directions_shrunk": 0, "mean_share": round(off_centre, 3),
                    "typical": False,
                    "skipped": f"the gradient's mean is {off_centre:.0%} of its second moment (> "
                               f"{max_mean_share:.0%}): the earlier draws are not typical of this posterior"}
    cap = np.quantile(norms, clip_quantile)
    clipped = gradients * np.minimum(1.0, cap / np.maximum(norms, 1e-300))[:, None]
    # eigenpairs of E[g g'] = clipped' clipped / n
    lam, vec = top_eigenpairs(np.zeros(P), clipped / np.sqrt(n), max_rank)
    edge = margin * (1 + np.sqrt(P / n)) ** 2
    keep = np.flatnonzero(lam > edge)
    scale = np.maximum(lam[keep] ** -0.25, 1.0 / max_shrink)
    corrected = pc.scaled_along(vec[:, keep], scale)
    info = {"gradient_draws": int(n), "typical": True, "mean_share": round(off_centre, 4), "noise_edge": round(float(edge), 2),
            "directions_shrunk": int(len(keep)),
            "largest_stiffness": round(float(lam[0]), 2),
            "gradient_norm_clip": round(float(cap), 1), "smallest_scale": round(float(scale.min()), 3) if len(keep) else 1.0}
    return corrected, info


def lagging_chains(gradients: np.ndarray, chain_of_row: np.ndarray, max_mean_share: float) -> list[int]:
    """Chains whose draws are not typical of this posterior on their own: the mean of a chain's gradients (rows of
    `gradients`, chain ids in `chain_of_row`) carries more than `max_mean_share` of that chain's second moment. Over
    draws of the posterior a chain's gradients average to ~0 (their mean carries ~1/n_eff of the second moment);
    a chain still climbing toward the typical set has a mean in the direction it is climbing. Measured on the real
    panel's pilot (4 x 100 draws, docs/model.md, stop 24): chains in the typical set 0.7-3.2%, a lagging chain
    16-76%; one such chain among four stretched the pooled map along its lag (correlation eigenvalue 67-125
    against 14-20)."""
    chain_of_row = np.asarray(chain_of_row)
    lagging = []
    for chain in np.unique(chain_of_row):
        rows = gradients[chain_of_row == chain]
        share = float(np.sum(rows.mean(axis=0) ** 2) / np.mean(np.sum(rows ** 2, axis=1)))
        if share > max_mean_share:
            lagging.append(int(chain))
    return lagging


def summary(pc: Preconditioner) -> dict:
    """What the preconditioner carries: sizes, its form and rank, and the largest eigenvalue of the posterior
    correlation it removes (of A A' scaled to unit diagonal; in the low-rank form without forming it)."""
    if pc.dense:
        cov = pc.chol @ pc.chol.T
        sd = np.sqrt(np.diag(cov))
        largest = float(np.linalg.eigvalsh(cov / np.outer(sd, sd))[-1])
    else:
        from scipy.sparse.linalg import LinearOperator, eigsh

        # A A' = diag(s) (I + L R')(I + R L') diag(s); its diagonal from the rows of (I + L R')
        gram = pc.right.T @ pc.right
        sd = pc.scale * np.sqrt(1 + 2 * np.sum(pc.left * pc.right, axis=1) + np.sum((pc.left @ gram) * pc.left, axis=1))
        w = pc.scale / sd

        def corr_times(v):
            u = w * v.ravel()
            u = u + pc.right @ (pc.left.T @ u)     # (I + R L') u
            return w * (u + pc.left @ (pc.right.T @ u))

        P = len(pc.loc)
        op = LinearOperator((P, P), matvec=corr_times, dtype=float)
        largest = float(eigsh(op, k=1, which="LA", v0=np.ones(P) / np.sqrt(P))[0][0]) if P > 2 else float(
            np.linalg.eigvalsh(np.column_stack([corr_times(e) for e in np.eye(P)]))[-1])
    return {"P": int(len(pc.loc)), "matched": int(pc.matched.sum()), "form": "dense" if pc.dense else "low_rank",
            "rank": pc.rank, "largest_correlation_eigenvalue": largest}
