"""`skill_scores` and `headline_gates` with their checks through a real Dagster instance (in process) and a DuckDB
file: from a synthetic fit folder announced as the latest capability_fit and a registry giving the families
categories; then without the registry both refuse, naming it, and the earlier tables stay."""

from __future__ import annotations

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.outputs import gates as gate_defs
from atlas_assets.defs.outputs import skill_scores as skill_defs
from tests.outputs.fixtures import synthetic_fit
from tests.outputs.test_outputs_assets import write_fit_folder

pytestmark = pytest.mark.slow  # two in-process runs: ~15 s idle

SPEC = "7" * 64
CATEGORIES = ["coding", "reasoning", "math", "coding", "math", "reasoning"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    from atlas_assets.model import scores
    from atlas_assets.model.fit_process import write_table
    from atlas_assets.outputs import config as outputs_config

    si, idata, _, cfg = synthetic_fit(chains=2, draws=30, n_models=16, n_families=6, target_obs=90)
    fit_dir = write_fit_folder(tmp_path / "model" / "fits" / "synthetic", si, idata, cfg, SPEC)
    scale = scores.make_display_scale(idata, si, cfg)
    write_table(scores.state_scores(idata, si, cfg, scale), fit_dir / "state_scores")
    write_table(scores.model_scores(idata, si, cfg, scale), fit_dir / "model_scores")
    monkeypatch.setattr("atlas_assets.defs.outputs.assets.specification_fingerprint", lambda: SPEC)
    original = outputs_config.load_outputs_config
    monkeypatch.setattr(outputs_config, "load_outputs_config", lambda path=None, overrides=None: original(
        path, {"skill_scores": {"max_draws": 30, "deviation_sd": {"draws": 30, "grid": [0.1, 0.3, 0.6]}}}))
    registry = pd.DataFrame({"benchmark": si.families["family"], "family": si.families["family"], "role": "primary",
                             "category": CATEGORIES[:len(si.families)]})
    with duckdb.connect(str(tmp_path / "atlas.duckdb")) as conn:
        for name, frame in {"registry_benchmarks": registry, "model_index_states": si.states[["model", "reasoning_state"]]
                            }.items():
            conn.register("frame", frame)
            conn.execute(f"CREATE TABLE {name} AS SELECT * FROM frame")
            conn.unregister("frame")
    return tmp_path, fit_dir, si


def run(instance, home):
    defs = [skill_defs.skill_scores, gate_defs.headline_gates,
            *dg.load_asset_checks_from_modules([skill_defs, gate_defs])]
    return dg.materialize(defs, instance=instance, raise_on_error=False,
                          resources={"duckdb": DuckDBResource(database=str(home / "atlas.duckdb"))})


def test_skill_scores_and_gates_materialize_with_passing_checks_and_refuse_without_a_registry(home):
    root, fit_dir, si = home
    with dg.DagsterInstance.ephemeral() as instance:
        instance.report_runless_asset_event(dg.AssetMaterialization(
            "capability_fit", metadata={"fit_dir": dg.MetadataValue.path(str(fit_dir))}))
        result = run(instance, root)
        assert result.success
        checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
        assert checks["skill_scores_valid"] and checks["headline_gates_valid"], checks
        assert checks["headline_gate_lineages_known"] is False  # publish.yaml names real families, not these
        with duckdb.connect(str(root / "atlas.duckdb"), read_only=True) as conn:
            skills = conn.execute("SELECT * FROM skill_scores").df()
            gates = conn.execute("SELECT * FROM headline_gates").df()
        assert len(skills) == len(si.states) * 3 and skills["fit"].eq(fit_dir.name).all()
        published = skills["status"] == "published"
        assert published.any() and (skills.loc[published, "n_families"] >= 2).all()
        assert skills.loc[~published, "display_mean"].isna().all()
        assert np.isfinite(skills.loc[published, "display_mean"]).all()
        assert len(gates) == len(si.states) and gates["gate_pass"].any()

        with duckdb.connect(str(root / "atlas.duckdb")) as conn:
            conn.execute("DROP TABLE registry_benchmarks")
        refused = run(instance, root)
        assert not refused.success
        text = " ".join(str(e.event_specific_data) for e in refused.get_step_failure_events())
        assert "registry_benchmarks is not readable" in text
        with duckdb.connect(str(root / "atlas.duckdb"), read_only=True) as conn:
            assert conn.execute("SELECT count(*) FROM skill_scores").fetchone()[0] == len(skills)
