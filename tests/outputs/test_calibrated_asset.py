"""End to end through the Dagster CLI: `calibrated_states` calibrates the models a synthetic fit lacks, and refuses an
unpublishable fit. The fit folder is the synthetic one of test_outputs_assets.py (no sampling)."""

import os
import subprocess

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml

from tests.outputs.fixtures import synthetic_fit
from tests.outputs.test_outputs_assets import PROJECT_ROOT, announce, write_fit_folder

pytestmark = pytest.mark.slow


def materialize(env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(PROJECT_ROOT / ".venv" / "bin" / "dagster"), "asset", "materialize", "-m", "atlas_assets.definitions",
         "--select", "calibrated_states"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)


def with_reasoning_draws(idata, n_settings: int, seed: int = 0):
    """The synthetic posterior carries no reasoning parameters: add the ones calibrate-in reads."""
    rng = np.random.default_rng(seed)
    shape = (idata.posterior.sizes["chain"], idata.posterior.sizes["draw"])
    dims = ("chain", "draw")
    idata.posterior["shared_effect"] = (dims + ("setting",), 0.1 * rng.standard_normal(shape + (n_settings,)))
    for name in ("shared_sd", "amp_sd", "curv_sd"):
        idata.posterior[name] = (dims, np.abs(0.2 + 0.02 * rng.standard_normal(shape)))
    idata.posterior["offdev_sd"] = (dims + ("offdev_sd_dim_0",), np.abs(0.2 + 0.02 * rng.standard_normal(shape + (2,))))
    return idata


def test_calibrated_states_from_a_fit_and_refused_from_an_out_of_date_one(tmp_path, monkeypatch):
    si, idata, _, cfg = synthetic_fit(chains=2, draws=100, n_models=30, n_families=9, target_obs=250)
    with_reasoning_draws(idata, len(si.settings))
    model_yaml = tmp_path / "model.yaml"
    model_yaml.write_text(yaml.safe_dump(cfg))
    monkeypatch.setenv("ATLAS_MODEL_CONFIG", str(model_yaml))
    from atlas_assets.spec import specification_fingerprint

    home, dagster_home = tmp_path / "atlas_home", tmp_path / "dagster_home"
    home.mkdir()
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text((PROJECT_ROOT / "dagster.yaml").read_text())
    columns = ["model", "reasoning_state", "family", "kind", "u", "correct", "items", "floor"]
    fitted = si.observations[columns]
    fam = si.families.set_index("family")
    bounded = fam[fam["kind"] == "bounded"].index
    new = pd.DataFrame([
        ("newcomer-a", "default", bounded[0], "bounded", 0.4, None, None, float(fam.loc[bounded[0], "floor"])),
        ("newcomer-b", "high", bounded[1], "bounded", 0.7, None, None, float(fam.loc[bounded[1], "floor"])),
        ("newcomer-b", "high", bounded[2], "bounded", 0.6, None, None, float(fam.loc[bounded[2], "floor"])),
        ("newcomer-c", "default", "a_family_the_fit_dropped", "bounded", 0.5, None, None, 0.0),
    ], columns=columns)
    family_observations = pd.concat([fitted, new], ignore_index=True)
    with duckdb.connect(str(home / "atlas.duckdb")) as conn:
        conn.register("fo", family_observations)
        conn.execute("CREATE TABLE family_observations AS SELECT * FROM fo")
        conn.register("st", si.states[["model", "reasoning_state"]])
        conn.execute("CREATE TABLE capability_state_scores AS SELECT * FROM st")
        conn.execute("CREATE TABLE audit_exclusions AS SELECT 'modeled_observations' AS stage, "
                     "'model_too_few_families' AS reason, 'newcomer-a' AS model, NULL AS family")
        # what skill_scores leaves behind for this fit: the families' categories and the learned deviations, which
        # the calibrated states' skills read
        # (newcomer-b's two results, on bounded[1] and bounded[2], are both coding)
        coding = {bounded[1], bounded[2]}
        registry = pd.DataFrame({"family": si.families["family"], "role": "primary",
                                 "category": [("coding" if f in coding else ("math", "reasoning")[j % 2])
                                              for j, f in enumerate(si.families["family"])]})
        conn.register("reg", registry)
        conn.execute("CREATE TABLE registry_benchmarks AS SELECT * FROM reg")
        conn.execute("CREATE TABLE skill_deviations AS SELECT * FROM (VALUES ('coding', 0.3, 'good'), "
                     "('math', 0.3, 'good'), ('reasoning', 0.3, 'good')) AS t(category, deviation_sd, fit)")
    env = {**os.environ, "ATLAS_HOME": str(home), "DAGSTER_HOME": str(dagster_home),
           "ATLAS_MODEL_CONFIG": str(model_yaml)}
    env.pop("ATLAS_DUCKDB", None)

    good = write_fit_folder(home / "model" / "fits" / "good", si, idata, cfg, specification_fingerprint())
    announce(dagster_home, good)
    run = materialize(env)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-5000:]
    for check in ("calibrated_states_valid", "calibrated_cell_predictions_complete", "calibrated_skill_scores_valid"):
        assert f"Asset check '{check}' on 'calibrated_states' passed" in output, check
    with duckdb.connect(str(home / "atlas.duckdb"), read_only=True) as conn:
        states = conn.execute("SELECT * FROM calibrated_states").df()
        cells = conn.execute("SELECT * FROM calibrated_cell_predictions").df()
        excluded = conn.execute("SELECT * FROM calibrated_exclusions").df()
        skills = conn.execute("SELECT * FROM calibrated_skill_scores").df()
    assert set(states["model"]) == {"newcomer-a", "newcomer-b"}
    assert states["status"].str.startswith("calibrated (thin evidence)").all() and (states["fit"] == "good").all()
    measured = states[states["observed"]].set_index("model")
    assert measured.loc["newcomer-a", "outside_reason"].startswith("model_too_few_families")
    assert measured.loc["newcomer-b", "outside_reason"].startswith("new since the fit")
    # newcomer-b was measured at high only; its default setting (every API model has one) is placed through the
    # reasoning structure, without results, never eligible
    unmeasured = states[~states["observed"]]
    assert list(zip(unmeasured["model"], unmeasured["reasoning_state"])) == [("newcomer-b", "default")]
    assert (unmeasured["n_obs"] == 0).all() and unmeasured["status"].str.contains("predicted setting").all()
    assert np.isfinite(states["display_mean"]).all() and not states["eligible"].any()
    assert len(cells) == len(states) * len(si.families) and int(cells["observed"].sum()) == 3
    assert excluded.set_index("model").loc["newcomer-c", "reason"].startswith("no observation on a family in the fit")
    # every calibrated state x category has a skill row, flagged calibrated: newcomer-b's two coding results at high
    # give it a coding skill; one family (newcomer-a) or none (newcomer-b's default, no results) is not enough data
    assert len(skills) == len(states) * 3 and set(skills["path"]) == {"calibrated"} and (skills["fit"] == "good").all()
    published = skills[skills["status"] == "published"]
    assert list(zip(published["model"], published["reasoning_state"], published["category"])) == [
        ("newcomer-b", "high", "coding")]
    assert np.isfinite(published[["display_mean", "display_lower", "display_upper", "deviation_mean"]]).all().all()
    assert skills.loc[skills["status"] != "published", "display_mean"].isna().all()
    before = states.sort_values("model").reset_index(drop=True)

    # a fit made under another specification publishes nothing, and says why
    other, other_idata = synthetic_fit(chains=2, draws=100, n_models=30, n_families=9, target_obs=250)[:2]
    stale = write_fit_folder(home / "model" / "fits" / "stale", other, with_reasoning_draws(other_idata, 8), cfg,
                             "0" * 64)
    announce(dagster_home, stale)
    refused = materialize(env)
    assert refused.returncode != 0
    assert "was made under specification" in refused.stdout + refused.stderr
    with duckdb.connect(str(home / "atlas.duckdb"), read_only=True) as conn:
        after = conn.execute("SELECT * FROM calibrated_states").df().sort_values("model").reset_index(drop=True)
    pd.testing.assert_frame_equal(after, before)
