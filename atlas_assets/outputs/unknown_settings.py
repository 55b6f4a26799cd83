"""Runs of a known model whose reasoning setting is not known: how they are placed (issues 13 and 14).

Cleaning keeps such runs (Epoch's `_unknown` ids, `-webapp` runs) in the state `unknown` of their
model (sql/04_pooled_states.sql) and leaves them out of the fit (sql/06: `unknown_reasoning_state`).
One decision, one implementation, for fitted and calibrated models alike:

    An unknown-setting run was made at one of the model's settings; which one is not known. Its
    capability is a mixture over the model's candidate settings (the states measured for it and the
    settings it plausibly has without results, the registry rule of `predicted_states`), equal prior
    weight, and per posterior draw d the weight of candidate c is its posterior given the run's own
    scores y:  P(c | y, d) ∝ p(y | phi_c,d).  phi_unknown,d = phi_c,d for c drawn with that weight.

The run says which setting it probably was; it does not move the model's capability (the mixture is
evaluated given the fit, or given the calibration from the model's labelled results), so an unknown
run can never lift a model. A model whose only results are unknown-labelled has nothing to mix over:
calibrate-in places it from them, its setting effect drawn from the spread of the shared effects
(outputs/calibrate.py). Validated in the masked_state study (validation/folds.py): half of a hidden
state's cells are relabelled unknown and the other half predicted through the mixture.

Pure functions; wired in atlas_assets/defs/outputs/predicted_states.py (fitted models) and
atlas_assets/defs/outputs/calibrated.py (calibrated models).
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from atlas_assets.outputs.draws import PosteriorDraws

STATE = "unknown"
STATUS = "unknown setting: mixture over the model's settings, weighted by the run's own scores"


@dataclass(frozen=True)
class UnknownPlacement:
    model: str
    settings: list[str]      # candidate settings, in the caller's order
    phi: np.ndarray          # (D,) capability draws of the unknown-setting run
    picked: np.ndarray       # (D,) index into `settings` of each draw's setting
    weights: np.ndarray      # (D, C) per-draw probability of each candidate

    def setting_probabilities(self) -> dict[str, float]:
        return dict(zip(self.settings, self.weights.mean(axis=0).round(6).tolist()))


def run_log_likelihood(candidate_phi: np.ndarray, rows: pd.DataFrame, draws: PosteriorDraws,
                       families: pd.DataFrame) -> np.ndarray:
    """(D, C): log-likelihood of the run's rows (`calibrate.likelihood_pieces` rows on fitted families) at each
    candidate's capability draws (D, C), under the fit's family likelihoods."""
    from atlas_assets.outputs.calibrate import log_likelihood_at

    rows = rows.assign(layout_pos=0)
    out = np.zeros(candidate_phi.shape)
    for c in range(candidate_phi.shape[1]):
        out[:, c] = log_likelihood_at(lambda _s, c=c: candidate_phi[:, c], rows, draws, families, slice(None))
    return out


def mixture(model: str, settings: Sequence[str], candidate_phi: np.ndarray, log_lik: np.ndarray | None = None,
            seed: int = 0) -> UnknownPlacement:
    """The placement of one model's unknown-setting run: per draw one candidate, with probability proportional to
    exp(log_lik) (equal weights without scores)."""
    settings = list(settings)
    D, C = candidate_phi.shape
    if C == 0 or C != len(settings):
        raise ValueError(f"{model}: {C} candidate capability columns for settings {settings}")
    lw = np.zeros((D, C)) if log_lik is None else np.asarray(log_lik, dtype=float).reshape(D, C)
    w = np.exp(lw - lw.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    rng = np.random.default_rng([int(seed), zlib.crc32(model.encode()), 15])
    picked = np.minimum((np.cumsum(w, axis=1) < rng.random(D)[:, None]).sum(axis=1), C - 1)
    return UnknownPlacement(model, settings, candidate_phi[np.arange(D), picked], picked, w)


def place(model: str, settings: Sequence[str], candidate_phi: np.ndarray, rows: pd.DataFrame, draws: PosteriorDraws,
          families: pd.DataFrame, seed: int = 0) -> UnknownPlacement:
    """`mixture` weighted by the run's own rows."""
    return mixture(model, settings, candidate_phi, run_log_likelihood(candidate_phi, rows, draws, families), seed)


def placement_table(placements: Sequence[UnknownPlacement], rows: pd.DataFrame, draws: PosteriorDraws,
                    interval: float, path: str) -> pd.DataFrame:
    """One row per placed run: evidence, display and latent summaries, the setting probabilities."""
    from atlas_assets.model.scores import _summ

    if not placements:
        return pd.DataFrame(columns=["model", "reasoning_state", "path", "status", "n_obs", "families", "candidates",
                                     "most_probable_setting", "most_probable_share", "setting_probabilities"])
    phi = np.column_stack([p.phi for p in placements])
    disp = draws.display(phi)
    out = pd.DataFrame({"model": [p.model for p in placements]})
    out.insert(1, "reasoning_state", STATE)
    out["path"], out["status"] = path, STATUS
    per_model = rows.groupby("model")
    out["n_obs"] = out["model"].map(per_model.size()).fillna(0).astype(int)
    out["families"] = out["model"].map(per_model["family"].agg(lambda f: ", ".join(sorted(set(f)))))
    out["candidates"] = [", ".join(p.settings) for p in placements]
    probs = [p.setting_probabilities() for p in placements]
    out["most_probable_setting"] = [max(q, key=q.get) for q in probs]
    out["most_probable_share"] = [max(q.values()) for q in probs]
    out["setting_probabilities"] = [json.dumps(q) for q in probs]
    for prefix, arr in (("latent", phi), ("display", disp)):
        for k, v in _summ(arr, interval).items():
            out[f"{prefix}_{k}"] = v
    out["interval"] = interval
    out["eligible"] = False
    out["unknown_pos"] = np.arange(len(out))
    return out
