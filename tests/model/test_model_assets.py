"""The model stage as users run it: the Dagster CLI fits in a Pipes subprocess, gates publication, reuses fits."""

import json
import os
import subprocess
from pathlib import Path

import duckdb
import pytest
import yaml

from atlas_assets.model.simulate import SMALL_SIZE, simulate_panel, simulated_references
from atlas_assets.model.fit_process import load_fit
from atlas_assets.model.stan_data import load_model_config

PROJECT_ROOT = Path(__file__).resolve().parents[2]
MODEL_ASSETS = "stan_data,capability_fit,fit_diagnostics,capability_scores"

pytestmark = pytest.mark.slow


def materialize(env: dict, run_config: dict, tmp_path: Path, select: str = MODEL_ASSETS) -> subprocess.CompletedProcess:
    config_path = tmp_path / f"run_config_{len(list(tmp_path.glob('run_config_*')))}.yaml"
    config_path.write_text(yaml.safe_dump(run_config))
    return subprocess.run(
        [str(PROJECT_ROOT / ".venv" / "bin" / "dagster"), "asset", "materialize", "-m", "atlas_assets.definitions",
         "--select", select, "-c", str(config_path)],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=1200,
    )


def fit_config(**sampler) -> dict:
    return {"ops": {"capability_fit": {"config": sampler}}}


@pytest.fixture
def project(tmp_path):
    """A project state whose modeled_observations is a small simulated panel (known truth)."""
    home = tmp_path / "atlas_home"
    home.mkdir()
    observations, truth = simulate_panel(seed=7, config=load_model_config(), **SMALL_SIZE)
    # the packaged config names real reference states; a simulated panel needs its own
    model_config = load_model_config()
    model_config["display"]["reference"] = simulated_references(observations, truth)
    (tmp_path / "model.yaml").write_text(yaml.safe_dump(model_config))
    with duckdb.connect(str(home / "atlas.duckdb")) as conn:
        conn.register("panel", observations)
        conn.execute("CREATE TABLE modeled_observations AS SELECT * FROM panel")
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text((PROJECT_ROOT / "dagster.yaml").read_text())
    env = {**os.environ, "ATLAS_HOME": str(home), "DAGSTER_HOME": str(dagster_home), "ATLAS_STAN_ENGINE": "pystan",
           "ATLAS_MODEL_CONFIG": str(tmp_path / "model.yaml")}
    env.pop("ATLAS_DUCKDB", None)
    return env, home


def query(home: Path, sql: str):
    with duckdb.connect(str(home / "atlas.duckdb"), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def published_bytes(home: Path) -> dict[str, bytes]:
    """Every published score table, rendered in a fixed row order: compared byte for byte."""
    with duckdb.connect(str(home / "atlas.duckdb"), read_only=True) as conn:
        return {table: conn.execute(f"SELECT * FROM {table} ORDER BY ALL").df().to_csv(index=False).encode()
                for table in SCORE_TABLES}


SCORE_TABLES = ("capability_state_scores", "capability_model_scores", "reasoning_effects", "family_parameters")


def test_cli_fit_publishes_scores_then_reuses_the_fit_and_a_failing_fit_publishes_nothing(project, tmp_path):
    env, home = project
    # 1. A converged fit through the CLI with the production sampler settings (4 x 1000 + 1000):
    #    the Pipes subprocess exits, the gates pass, scores are published.
    good = materialize(env, fit_config(seed=5), tmp_path)
    output = good.stdout + good.stderr
    assert good.returncode == 0, output[-4000:]
    assert "pystan" in output  # the run log says which engine ran
    assert "fit start: cold: no earlier fit" in output and "pilot fit:" in output
    diagnostics = dict(query(home, "SELECT metric, passes FROM fit_diagnostics"))
    assert all(diagnostics.values()), diagnostics
    published = query(home, "SELECT model, display_mean FROM capability_model_scores ORDER BY model")
    assert len(published) > 20
    fits = sorted((home / "model" / "fits").iterdir())
    assert len(fits) == 1 and (fits[0] / "posterior.nc").exists()
    assert json.loads((fits[0] / "fit_summary.json").read_text())["engine"] == "pystan"
    # a fit folder is self-contained: its posterior, inputs and display scale read back
    loaded = load_fit(fits[0])
    assert len(loaded.stan_input.states) == len(query(home, "SELECT * FROM capability_state_scores"))
    assert loaded.idata.posterior.sizes["chain"] == 4

    # 2. Same data, same specification, same settings: the fit is reused, not sampled again, and the run says why.
    again = materialize(env, fit_config(seed=5), tmp_path)
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    assert f"are those of fit {fits[0].name}, which stays current" in again.stdout + again.stderr
    assert "in a subprocess" not in again.stdout + again.stderr
    assert len(list((home / "model" / "fits").iterdir())) == 1

    # 3. A fit too short to converge fails its gates: nothing downstream is replaced, and the failed fit is
    #    kept beside the good one under a name that is never reused.
    before = published_bytes(home)
    bad = materialize(env, fit_config(chains=2, warmup=15, draws=15, seed=5), tmp_path)
    bad_output = bad.stdout + bad.stderr
    assert bad.returncode != 0
    assert "gate_min_ess_bulk" in bad_output
    # a refit of the same model starts from the last good fit (warm_start: previous_fit), not from a pilot
    assert f"fit start: warm from {fits[0].name}" in bad_output and "pilot fit:" not in bad_output
    assert not dict(query(home, "SELECT metric, passes FROM fit_diagnostics"))["min_ess_bulk"]
    assert published_bytes(home) == before
    failed = [p.name for p in (home / "model" / "fits").iterdir() if p.name.endswith(".failed")]
    assert len(failed) == 1, failed

    # 4. Materializing the publishing asset on its own (as from the UI, where the blocking checks of
    #    another run do not guard it) refuses the failed fit, names the gate, and changes nothing.
    alone = materialize(env, {}, tmp_path, select="capability_scores")
    alone_output = alone.stdout + alone.stderr
    assert alone.returncode != 0
    assert "failed its convergence gates" in alone_output and "gate_min_ess_bulk failed" in alone_output
    assert published_bytes(home) == before
