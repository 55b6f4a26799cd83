"""End to end through the Dagster CLI: the outputs group materializes from a fit folder, and refuses an unpublishable one.

The fit folder is written in the format of `fit_process.run_fit` (posterior.nc with the
per-observation groups, model_config.json, modeled_observations.csv, diagnostics.json,
fingerprint.json) from a synthetic posterior around a simulated panel's truth, and announced
as the latest `capability_fit` materialization: a real PyStan fit costs minutes here (cold
compile while stan/atlas.stan is being edited), which the model stage's own CLI test covers.
"""

import json
import os
import subprocess
from pathlib import Path

import dagster as dg
import duckdb
import pytest
import yaml

from atlas_assets.model.scores import add_observation_draws
from tests.outputs.fixtures import synthetic_fit

PROJECT_ROOT = Path(__file__).resolve().parents[2]
OUTPUTS = "difficulty_bounds,reliability_grades,dimensionality_test,cell_predictions"

pytestmark = pytest.mark.slow


def write_fit_folder(folder: Path, si, idata, cfg, spec_sha256: str) -> Path:
    folder.mkdir(parents=True)
    add_observation_draws(idata, si, seed=1)
    idata.to_netcdf(str(folder / "posterior.nc"))
    si.observations.drop(columns=["state_pos", "family_pos", "obs_pos", "piece", "hurdle"]).to_csv(
        folder / "modeled_observations.csv", index=False)
    (folder / "model_config.json").write_text(json.dumps(cfg))
    gates = ("rhat", "ess_bulk", "ess_tail", "divergences", "ebfmi")
    (folder / "diagnostics.json").write_text(json.dumps({"passes": True, "checks": {g: True for g in gates},
                                                         "thresholds": cfg["diagnostics"]}))
    (folder / "fit_summary.json").write_text(json.dumps({"passes": True, "engine": "synthetic"}))
    (folder / "fingerprint.json").write_text(json.dumps({"spec_sha256": spec_sha256}))
    return folder


def announce(dagster_home: Path, fit_dir: Path) -> None:
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        instance.report_runless_asset_event(
            dg.AssetMaterialization("capability_fit", metadata={"fit_dir": dg.MetadataValue.path(str(fit_dir))}))


def materialize(env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(PROJECT_ROOT / ".venv" / "bin" / "dagster"), "asset", "materialize", "-m", "atlas_assets.definitions",
         "--select", OUTPUTS], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_outputs_group_publishes_from_a_fit_and_refuses_an_out_of_date_one(tmp_path, monkeypatch):
    si, idata, _, cfg = synthetic_fit(chains=2, draws=150, n_models=40, n_families=9, target_obs=330)
    model_yaml = tmp_path / "model.yaml"
    model_yaml.write_text(yaml.safe_dump(cfg))
    monkeypatch.setenv("ATLAS_MODEL_CONFIG", str(model_yaml))
    from atlas_assets.spec import specification_fingerprint

    home, dagster_home = tmp_path / "atlas_home", tmp_path / "dagster_home"
    home.mkdir()
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text((PROJECT_ROOT / "dagster.yaml").read_text())
    with duckdb.connect(str(home / "atlas.duckdb")) as conn:
        conn.register("families", si.families)
        conn.execute("CREATE TABLE model_index_families AS SELECT * FROM families")
    env = {**os.environ, "ATLAS_HOME": str(home), "DAGSTER_HOME": str(dagster_home),
           "ATLAS_MODEL_CONFIG": str(model_yaml)}
    env.pop("ATLAS_DUCKDB", None)

    good = write_fit_folder(home / "model" / "fits" / "good", si, idata, cfg, specification_fingerprint())
    announce(dagster_home, good)
    run = materialize(env)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-5000:]
    for check in ("difficulty_bounds_valid", "reliability_grades_valid", "dimensionality_test_valid",
                  "cell_predictions_complete"):
        assert check in output
    with duckdb.connect(str(home / "atlas.duckdb"), read_only=True) as conn:
        q = lambda sql: conn.execute(sql).fetchall()  # noqa: E731
        assert q("SELECT count(*) FROM difficulty_bounds")[0][0] == len(si.families)
        assert q("SELECT count(*) FROM reliability_grades WHERE grade IS NOT NULL")[0][0] > 0
        n_rep, n_pairs = q("SELECT n_replicates, n_pairs FROM dimensionality_test")[0]
        assert n_rep >= 200 and n_pairs > 0
        observed, predicted = q("SELECT sum(observed::INT), sum((NOT observed)::INT) FROM cell_predictions")[0]
        assert observed == len(si.observations) and predicted > 0
        assert q("SELECT count(DISTINCT fit) FROM (SELECT fit FROM cell_predictions UNION ALL SELECT fit FROM "
                 "difficulty_bounds UNION ALL SELECT fit FROM reliability_grades)")[0][0] == 1
        before = q("SELECT * FROM reliability_grades ORDER BY family")

    # a fit made under another specification publishes nothing, and says why
    stale = write_fit_folder(home / "model" / "fits" / "stale", *synthetic_fit(chains=2, draws=150, n_models=40,
                             n_families=9, target_obs=330)[:2], cfg, "0" * 64)
    announce(dagster_home, stale)
    refused = materialize(env)
    assert refused.returncode != 0
    assert "was made under specification" in refused.stdout + refused.stderr
    with duckdb.connect(str(home / "atlas.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT * FROM reliability_grades ORDER BY family").fetchall() == before
