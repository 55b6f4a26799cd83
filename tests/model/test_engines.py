"""Engines: PyStan path end to end, caching, selection; CmdStanPy when present;
the fit_process CLI exits cleanly (PyStan workers shut down)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from atlas_assets.model.engines import (
    cmdstan_available,
    fit_model,
    pystan_is_cached,
    select_engine,
    shutdown_pystan_workers,
)

ROOT = Path(__file__).resolve().parents[2]

# fixed text: httpstan caches the build by a hash of exactly this program
TINY = """// atlas engine test program
data { int<lower=1> N; vector[N] y; }
parameters { real mu; real<lower=0> sigma; }
model {
  mu ~ normal(0, 5);
  sigma ~ normal(0, 2);
  y ~ normal(mu, sigma);
}
generated quantities {
  vector[N] y_rep;
  for (n in 1:N) y_rep[n] = normal_rng(mu, sigma);
}
"""
SAMPLE_STATS = {"lp", "acceptance_rate", "step_size", "tree_depth", "n_steps", "diverging", "energy"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("stan") / "tiny.stan"
    path.write_text(TINY)
    rng = np.random.default_rng(1)
    return path, {"N": 12, "y": rng.normal(1.0, 2.0, 12)}


def test_select_engine(monkeypatch):
    monkeypatch.setenv("ATLAS_STAN_ENGINE", "pystan")
    assert select_engine("auto") == "pystan"
    monkeypatch.delenv("ATLAS_STAN_ENGINE")
    assert select_engine("auto") == ("cmdstanpy" if cmdstan_available() else "pystan")
    with pytest.raises(ValueError):
        select_engine("nutpie")
    if not cmdstan_available():
        with pytest.raises(RuntimeError):
            select_engine("cmdstanpy")


@pytest.mark.slow
def test_pystan_fit_and_cache(tiny):
    path, data = tiny
    lines = []
    try:
        first = fit_model(path, data, chains=2, warmup=200, draws=150, seed=3, engine="pystan",
                          log=lines.append, dims={"y_rep": ["obs"]}, coords={"obs": list(range(12))})
        assert first.engine == "pystan"
        post = first.idata.posterior
        assert post["mu"].shape == (2, 150)
        assert post["y_rep"].shape == (2, 150, 12)
        assert list(post["y_rep"].dims) == ["chain", "draw", "obs"]
        assert SAMPLE_STATS <= set(first.idata.sample_stats.data_vars)
        ss = first.idata.sample_stats
        assert ss["diverging"].dtype == bool and ss["tree_depth"].values.min() >= 1
        assert first.n_gradient_evals == int(ss["n_steps"].sum())
        assert abs(float(post["mu"].mean()) - data["y"].mean()) < 1.0
        assert any(line.startswith("chain 1: iteration") for line in lines)

        # second run: the compiled model comes from httpstan's cache
        assert pystan_is_cached(TINY)
        t0 = time.perf_counter()
        second = fit_model(path, data, chains=2, warmup=100, draws=100, seed=4, engine="pystan",
                           save_warmup=True)
        assert second.compiled_from_cache
        assert second.compile_seconds < 10, second.compile_seconds
        assert "n_steps" in second.idata.warmup_sample_stats
        assert second.n_gradient_evals > int(second.idata.sample_stats["n_steps"].sum())
        assert time.perf_counter() - t0 < 120
    finally:
        shutdown_pystan_workers()


@pytest.mark.cmdstan
def test_cmdstanpy_fit(tiny):
    if not cmdstan_available():
        pytest.skip("CmdStan is not installed on this machine")
    path, data = tiny
    res = fit_model(path, data, chains=2, warmup=200, draws=150, seed=3, engine="cmdstanpy")
    assert res.engine == "cmdstanpy"
    assert res.idata.posterior["y_rep"].shape == (2, 150, 12)
    assert SAMPLE_STATS <= set(res.idata.sample_stats.data_vars)
    again = fit_model(path, data, chains=1, warmup=50, draws=50, seed=3, engine="cmdstanpy")
    assert again.compiled_from_cache


def config_naming_references(observations, truth, folder: Path) -> Path:
    """The packaged model config with display references that exist in a simulated panel."""
    import yaml

    from atlas_assets.model.simulate import simulated_references
    from atlas_assets.model.stan_data import load_model_config

    config = load_model_config()
    config["display"]["reference"] = simulated_references(observations, truth)
    path = folder / "model.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.slow
def test_fit_process_cli_exits_cleanly(tmp_path):
    """The standalone entry point fits, writes its outputs and exits on its own."""
    from atlas_assets.model.fit_process import write_table
    from atlas_assets.model.simulate import simulate_panel

    df, truth = simulate_panel(n_models=25, n_families=6, target_obs=130, seed=11)
    obs_path = tmp_path / "obs"
    write_table(df, obs_path)
    out = tmp_path / "fit"
    env = dict(os.environ, ATLAS_STAN_ENGINE="pystan")
    proc = subprocess.run(
        [sys.executable, "-m", "atlas_assets.model.fit_process", "--observations", str(obs_path) + ".parquet",
         "--out", str(out), "--chains", "2", "--warmup", "150", "--draws", "100", "--seed", "5",
         "--config", str(config_naming_references(df, truth, tmp_path))],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("posterior.nc", "diagnostics.json", "model_scores.parquet", "model_scores.csv",
                 "state_scores.parquet", "reasoning_effects.csv", "family_parameters.parquet",
                 "index_states.csv", "fit_summary.json"):
        assert (out / name).exists(), name
    diag = json.loads((out / "diagnostics.json").read_text())
    assert diag["engine"] == "pystan" and "max_rhat" in diag and "ebfmi_per_chain" in diag
    import arviz as az

    idata = az.from_netcdf(str(out / "posterior.nc"))
    assert "phi" in idata.posterior and "log_lik" in idata.log_likelihood
    assert idata.posterior_predictive["u_rep"].shape[-1] == len(df)


@pytest.mark.slow
def test_fit_process_under_dagster_pipes(tmp_path):
    """Launched by PipesSubprocessClient: logs and final metadata reach Dagster."""
    import dagster as dg

    from atlas_assets.model.fit_process import write_table
    from atlas_assets.model.simulate import simulate_panel

    df, truth = simulate_panel(n_models=25, n_families=6, target_obs=130, seed=12)
    write_table(df, tmp_path / "obs")
    out = tmp_path / "fit"
    cmd = [sys.executable, "-m", "atlas_assets.model.fit_process", "--observations", str(tmp_path / "obs.parquet"),
           "--out", str(out), "--chains", "2", "--warmup", "120", "--draws", "80", "--seed", "2",
           "--config", str(config_naming_references(df, truth, tmp_path))]

    @dg.asset
    def capability_fit(context: dg.AssetExecutionContext, pipes: dg.PipesSubprocessClient):
        return pipes.run(command=cmd, context=context, env={"ATLAS_STAN_ENGINE": "pystan"}).get_materialize_result()

    result = dg.materialize([capability_fit], resources={"pipes": dg.PipesSubprocessClient(cwd=str(ROOT))})
    assert result.success
    mats = result.asset_materializations_for_node("capability_fit")
    md = mats[-1].metadata
    for key in ("passes", "max_rhat", "min_ess_bulk", "divergences", "engine", "out_dir"):
        assert key in md, sorted(md)
    assert (out / "posterior.nc").exists()
