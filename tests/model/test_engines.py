"""Engines: PyStan path end to end, caching, selection; CmdStanPy for real where
`make setup` built (or found) CmdStan -- same-seed reproducibility, the same
posterior format as PyStan, auto-selection of the project-local CmdStan; the
setup script's fallbacks; the fit_process CLI exits cleanly (PyStan workers
shut down)."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from atlas_assets.model import cmdstan_setup
from atlas_assets.model.engines import (
    cmdstan_available,
    cmdstan_location,
    fit_model,
    log_density_gradients,
    pystan_is_cached,
    select_engine,
    shutdown_pystan_workers,
)

ROOT = Path(__file__).resolve().parents[2]
SETUP_STAMP = ROOT / ".cmdstan" / "setup.json"


def require_cmdstan():
    """Skip only where setup found and built no CmdStan; where it did, a missing one is a failure."""
    if cmdstan_available():
        return
    stamp = json.loads(SETUP_STAMP.read_text()) if SETUP_STAMP.exists() else {}
    if stamp.get("engine") == "cmdstanpy" or os.environ.get("ATLAS_REQUIRE_CMDSTAN") == "1":
        pytest.fail(f"make setup provided CmdStan ({stamp.get('cmdstan')}) but the engine cannot find it: "
                    f"{cmdstan_location()[1]}")
    pytest.skip(f"no CmdStan on this machine (make setup: {stamp.get('tried') or 'not run'})")

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
    require_cmdstan()
    path, data = tiny
    lines = []
    res = fit_model(path, data, chains=2, warmup=200, draws=150, seed=3, engine="cmdstanpy", log=lines.append)
    assert res.engine == "cmdstanpy"
    assert res.idata.posterior["y_rep"].shape == (2, 150, 12)
    assert SAMPLE_STATS <= set(res.idata.sample_stats.data_vars)
    assert res.n_gradient_evals == int(res.idata.sample_stats["n_steps"].sum())
    assert abs(float(res.idata.posterior["mu"].mean()) - data["y"].mean()) < 1.0
    assert any("CmdStan" in line for line in lines)
    # each chain's progress as CmdStan prints it (every 350 // 20 iterations), named by its chain id, in order:
    # not only each chain's last line once it has ended
    progress = [tuple(map(int, m.groups()[:3])) + (m.group(4),)
                for m in map(re.compile(r"^chain (\d+): iteration (\d+)/(\d+) \((warmup|sampling)\)$").match, lines) if m]
    for chain in (1, 2):
        iterations = [(i, phase) for c, i, n, phase in progress if c == chain and n == 350]
        assert [i for i, _ in iterations] == sorted(i for i, _ in iterations), iterations
        assert (1, "warmup") in iterations and (350, "sampling") in iterations, iterations
        assert {phase for i, phase in iterations if i <= 200} == {"warmup"}, iterations
        assert len(iterations) >= 20, iterations
    assert {c for c, *_ in progress} == {1, 2}
    again = fit_model(path, data, chains=1, warmup=50, draws=50, seed=3, engine="cmdstanpy")
    assert again.compiled_from_cache
    assert again.compile_seconds < 10, again.compile_seconds


@pytest.mark.cmdstan
def test_log_density_gradients_are_the_programs_own(tiny):
    # the gradient the stiffness correction reads (precondition.stiffness_correction), against the tiny program's
    # gradient written out by hand on its unconstrained coordinates (mu, u = log sigma), Jacobian included
    require_cmdstan()
    path, data = tiny
    y, n = np.asarray(data["y"]), len(data["y"])
    points = np.array([[0.3, 0.1], [1.5, 0.9], [-1.0, -0.4]])
    lp, grad = log_density_gradients(path, data, points, engine="cmdstanpy")
    mu, sigma = points[:, 0], np.exp(points[:, 1])
    ss = ((y[None, :] - mu[:, None]) ** 2).sum(1)
    d_mu = -mu / 25 + (y.sum() - n * mu) / sigma ** 2
    d_u = -sigma ** 2 / 4 - n + ss / sigma ** 2 + 1
    assert grad.shape == (3, 2)
    assert np.allclose(grad[:, 0], d_mu, rtol=1e-8) and np.allclose(grad[:, 1], d_u, rtol=1e-8)
    # and lp differs from the same expression by one constant (the dropped normalisers)
    lp_hand = -mu ** 2 / 50 - sigma ** 2 / 8 - n * np.log(sigma) - ss / (2 * sigma ** 2) + points[:, 1]
    assert np.ptp(lp - lp_hand) < 1e-8


@pytest.mark.cmdstan
def test_a_unit_metric_fit_adapts_the_step_size_only(tiny):
    require_cmdstan()
    path, data = tiny
    res = fit_model(path, data, chains=2, warmup=150, draws=150, seed=3, engine="cmdstanpy", metric="unit_e",
                    adapt={"step_size": 0.3})
    assert res.settings["metric"] == "unit_e" and res.settings["adapt"] == {"step_size": 0.3}
    assert abs(float(res.idata.posterior["mu"].mean()) - data["y"].mean()) < 1.0
    # the identity metric stays: sigma's unconstrained scale (~0.2) is far from 1, so the adapted step is small,
    # where a diagonal metric would have rescaled it away
    with pytest.raises(ValueError, match="unknown metric"):
        fit_model(path, data, chains=1, warmup=10, draws=10, engine="cmdstanpy", metric="dense_e")


@pytest.mark.cmdstan
def test_a_fit_without_adaptation_samples_at_the_step_size_it_was_given(tiny):
    # the nightly warm refit keeps last night's step size (fit_process.kept_step_size): no dual averaging moves it,
    # in the burn-in or after it, on every chain
    require_cmdstan()
    path, data = tiny
    kept = fit_model(path, data, chains=2, warmup=20, draws=100, seed=3, engine="cmdstanpy", metric="unit_e",
                     adapt={"step_size": 0.137, "engaged": False}, save_warmup=True)
    assert set(np.unique(kept.idata.sample_stats["step_size"].values)) == {0.137}
    assert set(np.unique(kept.idata.warmup_sample_stats["step_size"].values)) == {0.137}
    assert abs(float(kept.idata.posterior["mu"].mean()) - data["y"].mean()) < 1.0
    adapted = fit_model(path, data, chains=2, warmup=20, draws=100, seed=3, engine="cmdstanpy", metric="unit_e",
                        adapt={"step_size": 0.137})
    assert 0.137 not in set(np.unique(adapted.idata.sample_stats["step_size"].values))
    # a fixed step needs a step size, and PyStan's route adapts a diagonal metric, so it is refused there
    with pytest.raises(ValueError, match="needs a step_size"):
        fit_model(path, data, chains=1, warmup=10, draws=10, engine="cmdstanpy", adapt={"engaged": False})


@pytest.mark.cmdstan
def test_cmdstanpy_same_seed_identical_draws(tiny):
    """Same program, data, seed and build: bit-identical draws and sampler stats; another seed differs."""
    require_cmdstan()
    path, data = tiny
    kw = dict(chains=2, warmup=150, draws=100, engine="cmdstanpy", save_warmup=True)
    a = fit_model(path, data, seed=11, **kw)
    b = fit_model(path, data, seed=11, **kw)
    assert b.compiled_from_cache and a.stan_sha256 == b.stan_sha256
    for group in ("posterior", "sample_stats", "warmup_sample_stats"):
        ga, gb = a.idata[group], b.idata[group]
        assert set(ga.data_vars) == set(gb.data_vars)
        for name in ga.data_vars:
            np.testing.assert_array_equal(ga[name].values, gb[name].values, err_msg=f"{group}.{name}")
    c = fit_model(path, data, seed=12, **kw)
    assert not np.array_equal(a.idata.posterior["mu"].values, c.idata.posterior["mu"].values)


@pytest.mark.cmdstan
@pytest.mark.slow
def test_cmdstanpy_and_pystan_give_the_same_format(tiny):
    """One posterior format: variables, dims, coords, shapes and sample_stats names and dtypes match."""
    require_cmdstan()
    path, data = tiny
    kw = dict(chains=2, warmup=100, draws=80, seed=5, save_warmup=True,
              dims={"y_rep": ["obs"]}, coords={"obs": list(range(12))})
    try:
        ps = fit_model(path, data, engine="pystan", **kw)
    finally:
        shutdown_pystan_workers()
    cs = fit_model(path, data, engine="cmdstanpy", **kw)
    assert (ps.engine, cs.engine) == ("pystan", "cmdstanpy")
    assert set(ps.idata.groups()) == set(cs.idata.groups())
    for group in ps.idata.groups():
        gp, gc = ps.idata[group], cs.idata[group]
        assert set(gp.data_vars) == set(gc.data_vars), group
        assert dict(gp.sizes) == dict(gc.sizes), group
        for name in gp.data_vars:
            assert gp[name].dims == gc[name].dims, (group, name)
            assert gp[name].dtype == gc[name].dtype, (group, name, gp[name].dtype, gc[name].dtype)
        for coord in gp.coords:
            np.testing.assert_array_equal(gp[coord].values, gc[coord].values)
    assert set(cs.idata.sample_stats.data_vars) == SAMPLE_STATS
    # the same posterior, up to Monte Carlo error
    assert abs(float(ps.idata.posterior["mu"].mean()) - float(cs.idata.posterior["mu"].mean())) < 1.0
    import cmdstanpy

    if cmdstanpy.cmdstan_version() == (2, 35):
        # CmdStan 2.35 is PyStan 3.10's Stan: the same seed gives the same trajectories, and at
        # sig_figs=18 the same draws bit for bit
        for group in ("posterior", "sample_stats"):
            for name in ps.idata[group].data_vars:
                np.testing.assert_array_equal(ps.idata[group][name].values, cs.idata[group][name].values,
                                              err_msg=f"{group}.{name}")


def fake_cmdstan(folder: Path, *, ready: bool = True) -> Path:
    """A stand-in CmdStan tree: makefile, a bin/stanc that answers --version, the setup's marker."""
    folder.mkdir(parents=True)
    (folder / "makefile").write_text("CMDSTAN_VERSION := 2.35.0\n")
    (folder / "bin").mkdir()
    stanc = folder / "bin" / "stanc"
    stanc.write_text("#!/bin/sh\necho 'stanc3 v2.35.0 (Unix)'\n")
    stanc.chmod(0o755)
    if ready:
        (folder / cmdstan_setup.READY).write_text("{}\n")
    return folder


@pytest.fixture
def no_cmdstan_env(tmp_path, monkeypatch):
    """CMDSTAN unset (restored afterwards), an empty HOME and project-local folder."""
    monkeypatch.setenv("CMDSTAN", "")  # records the original, so teardown restores it
    monkeypatch.delenv("CMDSTAN")
    monkeypatch.delenv("ATLAS_STAN_ENGINE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ATLAS_CMDSTAN_HOME", str(tmp_path / "project_cmdstan"))
    return tmp_path


def test_auto_selection_finds_the_project_local_cmdstan(no_cmdstan_env, monkeypatch):
    home = no_cmdstan_env / "project_cmdstan"
    assert select_engine("auto") == "pystan"
    assert "make setup" in cmdstan_location()[1]
    fake_cmdstan(home / "cmdstan-2.35.0", ready=False)  # an interrupted build is never used
    assert cmdstan_location()[0] is None and select_engine("auto") == "pystan"
    (home / "cmdstan-2.35.0" / cmdstan_setup.READY).write_text("{}\n")
    assert select_engine("auto") == "cmdstanpy"
    path, how = cmdstan_location()
    assert path == str(home / "cmdstan-2.35.0") and how.startswith("project-local")
    assert os.environ["CMDSTAN"] == path  # set for CmdStanPy and the fit subprocess
    monkeypatch.setenv("ATLAS_STAN_ENGINE", "pystan")  # the override still wins
    assert select_engine("auto") == "pystan"


def test_an_explicit_cmdstan_is_honoured_before_the_project_one(no_cmdstan_env, monkeypatch):
    fake_cmdstan(no_cmdstan_env / "project_cmdstan" / "cmdstan-2.35.0")
    other = fake_cmdstan(no_cmdstan_env / "elsewhere" / "cmdstan-2.36.0", ready=False)
    monkeypatch.setenv("CMDSTAN", str(other))
    assert cmdstan_location() == (str(other), "env CMDSTAN")
    monkeypatch.setenv("CMDSTAN", str(no_cmdstan_env / "missing"))
    assert cmdstan_location()[0] is None and select_engine("auto") == "pystan"
    with pytest.raises(RuntimeError, match="CMDSTAN="):
        select_engine("cmdstanpy")


def test_the_real_project_local_cmdstan_is_selected(monkeypatch):
    """Where make setup built CmdStan into the project, `engine: auto` resolves to it."""
    local = cmdstan_setup.project_local_cmdstan()
    if local is None:
        require_cmdstan()  # fails where setup said it built one; skips where it built none
        pytest.skip("CmdStan comes from outside the project here")
    monkeypatch.setenv("CMDSTAN", "")
    monkeypatch.delenv("CMDSTAN")
    monkeypatch.delenv("ATLAS_STAN_ENGINE", raising=False)
    assert select_engine("auto") == "cmdstanpy"
    import cmdstanpy

    assert os.path.realpath(cmdstanpy.cmdstan_path()) == os.path.realpath(local)


def run_setup(tmp_path, **env):
    stamp = tmp_path / "stamp.json"
    base = {k: v for k, v in os.environ.items() if k != "CMDSTAN"}
    base.update(HOME=str(tmp_path / "home"), ATLAS_CMDSTAN_HOME=str(tmp_path / "project_cmdstan"),
                ATLAS_CMDSTAN_SOURCES=str(tmp_path / "no_shared"), ATLAS_CMDSTAN_DOWNLOAD="0")
    base.update(env)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(ROOT / "atlas_assets/model/cmdstan_setup.py"), "--stamp", str(stamp)],
                          env=base, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(stamp.read_text()), proc.stdout, time.perf_counter() - t0


def test_setup_without_shared_sources_falls_back_to_pystan(tmp_path):
    result, out, seconds = run_setup(tmp_path)
    assert result["engine"] == "pystan" and result["cmdstan"] is None
    assert any("no_shared" in t for t in result["tried"]), result
    assert "engine auto -> pystan" in out
    assert seconds < 30
    assert not list((tmp_path / "project_cmdstan").glob("cmdstan-*"))


def test_setup_honours_an_existing_installation(tmp_path):
    existing = fake_cmdstan(tmp_path / "mine" / "cmdstan-2.35.0", ready=False)
    result, out, _ = run_setup(tmp_path, CMDSTAN=str(existing))
    assert result == {**result, "engine": "cmdstanpy", "cmdstan": str(existing), "source": "CMDSTAN"}
    default = fake_cmdstan(tmp_path / "home" / ".cmdstan" / "cmdstan-2.34.1", ready=False)
    result, _, _ = run_setup(tmp_path)
    assert result["cmdstan"] == str(default) and "~/.cmdstan" in result["source"]
    # a broken one (stanc does not run) is passed over
    (default / "bin" / "stanc").write_text("#!/bin/sh\nexit 3\n")
    result, out, _ = run_setup(tmp_path)
    assert result["engine"] == "pystan" and "not a working CmdStan" in out


def test_setup_offline_install_attempt_fails_fast(tmp_path, monkeypatch):
    """Where github.com is unreachable, install_cmdstan is not even started."""
    monkeypatch.setattr(cmdstan_setup, "NETWORK_PROBE", ("github.invalid", 443))
    monkeypatch.delenv("ATLAS_CMDSTAN_DOWNLOAD", raising=False)
    t0 = time.perf_counter()
    path, why = cmdstan_setup.try_install_cmdstan(tmp_path, print, 1)
    assert path is None and why.startswith("no network") and time.perf_counter() - t0 < 10


def config_naming_references(observations, truth, folder: Path) -> Path:
    """The packaged model config with display references that exist in a simulated panel, and the plain sampler:
    the fit is exactly the --chains/--warmup/--draws asked for on the command line. (With the packaged
    `precondition.mode: pilot` a 4 x (150 + 150) pilot ran first and --warmup gave way to `main_warmup` 300: ~330k
    leapfrog steps instead of ~30k. The pilot path is the model-stage CLI test's and test_precondition's.)"""
    import yaml

    from atlas_assets.model.simulate import simulated_references
    from atlas_assets.model.stan_data import load_model_config

    config = load_model_config(overrides={"sampler": {"precondition": {"mode": "none"}}})
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


@pytest.mark.cmdstan
@pytest.mark.slow
def test_fit_process_cli_auto_runs_cmdstanpy(tmp_path):
    """The fit subprocess that `make run` launches picks CmdStanPy by itself (engine: auto, no env)."""
    require_cmdstan()
    from atlas_assets.model.fit_process import write_table
    from atlas_assets.model.simulate import simulate_panel

    df, truth = simulate_panel(n_models=25, n_families=6, target_obs=130, seed=11)
    write_table(df, tmp_path / "obs")
    out = tmp_path / "fit"
    env = {k: v for k, v in os.environ.items() if k not in {"ATLAS_STAN_ENGINE"}}
    proc = subprocess.run(
        [sys.executable, "-m", "atlas_assets.model.fit_process", "--observations", str(tmp_path / "obs.parquet"),
         "--out", str(out), "--chains", "2", "--warmup", "150", "--draws", "100", "--seed", "5",
         "--config", str(config_naming_references(df, truth, tmp_path))],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((out / "diagnostics.json").read_text())["engine"] == "cmdstanpy"
    assert (out / "posterior.nc").exists()


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


def test_a_chain_that_ends_without_draws_is_named_with_cmdstans_reason(tmp_path):
    # measured (a 4x simulated panel, third pilot round): CmdStan 2.35 ends a chain whose step-size initialisation
    # throws with status 0 and a CSV without draws; CmdStanPy then only says "Error in reading csv file"
    from atlas_assets.model.engines import _chain_failures_named, cmdstan_chain_errors

    (tmp_path / "atlas-1_0-stdout.txt").write_text(
        "method = sample (Default)\nid = 1 (Default)\n\n"
        "Informational Message: The current Metropolis proposal is about to be rejected because of the following issue:\n"
        "Exception: beta_binomial_lpmf: First prior sample size parameter[474] is 0, but must be positive finite!\n\n"
        "Exception initializing step size.\n"
        "Exception: Error in function boost::math::hypergeometric_pFq<double>(double,double,double): numeric overflow "
        "(in 'atlas.stan', line 461, column 6 to column 75)\n")
    (tmp_path / "atlas-1_1-stdout.txt").write_text(
        "id = 2 (Default)\n\nInformational Message: The current Metropolis proposal is about to be rejected\n"
        "Iteration: 200 / 200 [100%]  (Sampling)\n")
    reasons = cmdstan_chain_errors(tmp_path)
    assert len(reasons) == 1
    assert reasons[0].startswith("chain 1: Exception initializing step size.") and "numeric overflow" in reasons[0]
    with pytest.raises(RuntimeError, match=r"CmdStan sampling failed: chain 1: Exception initializing step size"):
        with _chain_failures_named(tmp_path):
            raise ValueError("Error in reading csv file: atlas-1_1.csv")
    # a failure CmdStan's console does not explain passes through as it was
    with pytest.raises(ValueError, match="something else"):
        with _chain_failures_named(tmp_path / "empty"):
            raise ValueError("something else")


@pytest.mark.cmdstan
def test_the_log_density_has_no_spike_where_a_dispersion_is_huge():
    # Past ~1e7 a bounded family's beta-binomial is a binomial, so far out only the dispersion's prior still moves
    # the log density. Uncapped, the program's log-beta differences lost every digit there: on the real panel the
    # log density came out ~3,800 above the typical set at kappa ~1e18 and a chain stuck at step size 1e-17
    # (docs/model.md, stop 27). Checked here against the prior's own change, computed from its formula.
    from atlas_assets.model import precondition
    from atlas_assets.model.engines import log_density_gradients
    from atlas_assets.model.stan_data import stan_file
    from tests.model.test_precondition import identity_map, small_cmdstan_input

    config, stan_input = small_cmdstan_input("the log density is CmdStan's")
    data = stan_input.data
    assert config["parametrization"]["logkappa"] == "centered" and data["log_kappa_max"] > 0
    sizes = precondition.block_sizes(data)
    P = sum(sizes.values())
    blocks = precondition._block_slices(data)
    x = 0.3 * np.random.default_rng(5).standard_normal(P)
    # a family of counts only: a continuous score's beta density narrows around its mean as kappa grows, so there the
    # likelihood keeps falling; a count's beta-binomial levels off at the binomial
    pieces = stan_input.observations.groupby("family")["piece"].agg(set)
    counts = stan_input.families[stan_input.families["family"].map(pieces) <= {"bb", "bbz"}]
    at = blocks["logkappa_raw"].start + int(counts["bounded_pos"].iat[0])
    far = np.array([20.0, 25.0, 30.0, 35.0, 40.0, 43.0])
    points = np.repeat(x[None, :], len(far), axis=0)
    points[:, at] = far
    lp, _ = log_density_gradients(stan_file(config), {**data, **identity_map(P, "dense", points).data()}, points,
                                  engine="cmdstanpy")
    mu = x[blocks["logkappa_mu"].start]
    sd = np.log1p(np.exp(x[blocks["log_scale"].start + precondition.SCALARS.index("logkappa_sd")]))
    prior = -0.5 * ((far - mu) / sd) ** 2
    assert np.abs((lp - lp[0]) - (prior - prior[0])).max() < 0.5, (lp - lp[0]) - (prior - prior[0])


def test_the_bounded_likelihood_is_the_beta_binomial_and_the_beta_up_to_constants():
    # The program writes the beta-binomial as log-betas of one parameter and a count, with the kappa term once per
    # (item count, family) pair, and the beta through one log-beta (docs/model.md, stop 28). Checked against scipy's
    # own distributions: at points spread over the parameter space, the change of the program's log density when the
    # counts, their item counts and the continuous scores change equals scipy's change of the log-likelihood, up to
    # one constant of the data.
    from scipy import stats
    from scipy.special import expit

    from atlas_assets.model import precondition
    from atlas_assets.model.engines import cmdstan_executable
    from atlas_assets.model.stan_data import stan_file
    from tests.model.test_precondition import identity_map, small_cmdstan_input

    config, stan_input = small_cmdstan_input("the log density is CmdStan's")
    data = dict(stan_input.data)
    assert data["N_bb"] > 20 and data["N_bt"] > 20 and 0 < max(data["floor_c"]) < 1
    assert config["parametrization"]["logkappa"] == "centered"
    P = sum(precondition.block_sizes(data).values())
    with_map = {**data, **identity_map(P, "low_rank", np.zeros((1, P))).data()}
    rng = np.random.default_rng(11)
    points = rng.normal(0, 0.5, (8, P))
    # dispersions from ~3 to ~1,000, the range the real panel's posterior spans
    points[:, precondition._block_slices(data)["logkappa_raw"]] = rng.uniform(1, 7, (8, data["J_b"]))

    # the transformed parameters at each point: CmdStan's fixed_param sampler, one chain per point
    model, _, _ = cmdstan_executable(Path(stan_file(config)), Path(stan_file(config)).read_text())
    at_points = model.sample(data=with_map, fixed_param=True, chains=len(points), iter_sampling=1, seed=1,
                             inits=[{"pc_z": x.tolist()} for x in points], sig_figs=18, show_progress=False)
    beta, phi, b, kappa = (at_points.stan_variable(v) for v in ("beta", "phi", "b", "kappa"))
    assert np.allclose(at_points.stan_variable("pc_z"), points)

    # other counts out of other item counts (the kappa-only term depends on the item count), other scores
    n = np.asarray(data["bb_n"])
    n_other = n + rng.integers(0, 6, len(n))
    other = {**with_map,
             "bb_n": n_other.tolist(),
             "bb_k": rng.integers(0, n_other + 1).tolist(),
             "bt_u": rng.uniform(0.02, 0.98, data["N_bt"]).tolist()}
    lp, _ = log_density_gradients(stan_file(config), with_map, points, engine="cmdstanpy")
    lp_other, _ = log_density_gradients(stan_file(config), other, points, engine="cmdstanpy")

    family = np.asarray(data["obs_family"]) - 1
    state = np.asarray(data["obs_state"]) - 1
    bounded_pos = np.asarray(data["fam_bpos"]) - 1
    floor = np.asarray(data["floor_c"])
    bb, bt = np.asarray(data["bb_idx"]) - 1, np.asarray(data["bt_idx"]) - 1
    scipy_change = []
    for d in range(len(points)):
        eta = beta[d, family] * (phi[d, state] - b[d, family])
        # E[u] = c + (1 - c) inv_logit(eta); shapes kappa E[u] and kappa (1 - E[u])
        kap = kappa[d, bounded_pos[family]]
        shape_a = kap * (floor[family] + (1 - floor[family]) * expit(eta))
        shape_b = kap * (1 - floor[family]) * expit(-eta)
        change = (stats.betabinom.logpmf(data["bb_k"], n, shape_a[bb], shape_b[bb]).sum()
                  - stats.betabinom.logpmf(other["bb_k"], n_other, shape_a[bb], shape_b[bb]).sum()
                  + stats.beta.logpdf(data["bt_u"], shape_a[bt], shape_b[bt]).sum()
                  - stats.beta.logpdf(other["bt_u"], shape_a[bt], shape_b[bt]).sum())
        scipy_change.append(change)
    offset = (lp - lp_other) - np.asarray(scipy_change)
    # the points differ: the change moves by far more than the tolerance
    assert np.ptp(np.asarray(scipy_change)) > 10
    assert np.ptp(offset) < 1e-6 * np.abs(scipy_change).max(), offset


def test_a_pystan_build_holds_a_lock_that_another_process_waits_for(tmp_path, monkeypatch):
    """httpstan builds a program straight into its cache folder: two processes building one program at once (two
    test workers, two fold refits) would write the same files. `_pystan_build` holds a per-program file lock
    while it builds; another process asking for it waits."""
    import fcntl
    import types

    import atlas_assets.model.engines as engines
    import httpstan.cache

    monkeypatch.setattr(httpstan.cache, "cache_directory", lambda: tmp_path)
    source = "parameters { real x; } model { x ~ normal(0, 1); }"
    lock_path = engines.pystan_build_lock_path(source)
    seen = {}

    def build(program, data=None, **kwargs):
        with open(lock_path, "a") as other:  # another process's attempt, without waiting
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen["held"] = False
            except BlockingIOError:
                seen["held"] = True
        return "model"

    monkeypatch.setitem(sys.modules, "stan", types.SimpleNamespace(build=build))
    monkeypatch.setattr(engines, "_patient_stanc", lambda: None)
    monkeypatch.setattr(engines, "_patient_pystan_client", lambda: None)
    assert engines._pystan_build(source, {}, log=lambda m: None) == "model"
    assert seen == {"held": True}
    # a build under way in another process: this one waits for it to finish
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True);"
        " time.sleep(2)"), str(lock_path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    t0 = time.perf_counter()
    engines._pystan_build(source, {}, log=lambda m: None)
    waited = time.perf_counter() - t0
    holder.wait(timeout=10)
    assert waited > 1.0, waited
