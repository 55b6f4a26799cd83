"""The anchored coordinates of the model bases (stan/cost.stan, atlas_assets/cost/data.py `_anchors`) are a change of
variables, not a change of model: at one point of the posterior, the log density in anchored coordinates equals the
log density with every base sampled as it is (`parametrization.base: centered`) plus the log Jacobian of the change,
sum over anchored models of log(sigma[e] / lambda_rel[j]) of their anchor run. It fails when the base an anchor run
implies is computed wrong (e.g. an anchor on a state with a deviation of its own whose deviation is not taken off),
or when the Jacobian is: either would make the sampled posterior a different model from the one documented."""

from __future__ import annotations

import numpy as np
import pytest

from atlas_assets.cost.config import cost_stan_file, load_cost_config
from atlas_assets.cost.data import build_cost_data
from atlas_assets.model.engines import cmdstan_available, cmdstan_executable
from tests.cost.simulate import REFERENCE, simulate

PARAMETERS = ("ref_mu", "ref_suite_sd", "ref_within_sd", "ref_suite_z", "bench_ref_raw", "loglambda_raw",
              "loglambda_suite_sd", "loglambda_within_sd", "loglambda_member_mean", "loglambda_contrast_z",
              "loglambda_suite_z", "base_mu", "base_sd", "base_u", "ladder_rel", "off_rel", "dev_sd", "dev_z",
              "harness_sd", "harness_z", "sigma")


def _cfg(base: str) -> dict:
    return load_cost_config(overrides={"reference": {"model": REFERENCE[0], "reasoning_state": REFERENCE[1]},
                                       "parametrization": {"base": base}})


@pytest.mark.skipif(not cmdstan_available(), reason="log densities at given points need CmdStan's log_prob method")
def test_anchored_bases_are_the_centred_model_in_other_coordinates():
    obs = simulate().observations
    centred, anchored = build_cost_data(obs, _cfg("centered")), build_cost_data(obs, _cfg("anchored"))
    a = anchored.data
    assert a["anchored"].sum() >= 20 and not centred.data["anchored"].any()
    states = anchored.states
    # some anchors sit on a state that is not its model's pinned one (a deviation of its own): the case that matters
    assert (~states.pinned.to_numpy()[a["anchor_state"][a["anchored"] > 0.5] - 1]).sum() >= 3
    path = cost_stan_file(_cfg("anchored"))
    model, _, _ = cmdstan_executable(path, path.read_text())
    fit = model.sample(data=centred.data, chains=1, iter_warmup=40, iter_sampling=3, seed=5, show_progress=False,
                       sig_figs=18)
    for k in range(3):
        draw = {name: np.asarray(values[k]) for name, values in fit.stan_variables().items()}
        point = {name: draw[name] for name in PARAMETERS}
        shifted = dict(point, base_u=draw["base_u"].copy())   # the same bases, in anchored coordinates
        jacobian = 0.0
        for i, m in enumerate(a["free_model"] - 1):
            if a["anchored"][i] < 0.5:
                continue
            j, e, s = a["anchor_bench"][i] - 1, a["anchor_eval"][i] - 1, a["anchor_state"][i] - 1
            lam, sigma = draw["lambda_rel"][j], draw["sigma"][e]
            implied = ((a["anchor_y"][i] - draw["bench_ref"][j]) / lam - draw["setting_rel"][s] - draw["deviation_rel"][s]
                       - draw["harness_rel"][a["anchor_harness"][i]])
            shifted["base_u"][i] = (draw["model_base_rel"][m] - implied) * lam / sigma
            jacobian += np.log(sigma) - np.log(lam)
        lp_centred = float(model.log_prob(point, data=centred.data, sig_figs=18).lp__.iloc[0])
        lp_anchored = float(model.log_prob(shifted, data=a, sig_figs=18).lp__.iloc[0])
        assert lp_anchored - lp_centred == pytest.approx(jacobian, abs=1e-7)
