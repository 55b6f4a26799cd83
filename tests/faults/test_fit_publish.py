"""Fit and publish faults with the real model stage (stan_data → capability_fit in a Pipes subprocess with
CmdStan → fit_diagnostics and its blocking gates → capability_scores) on a tiny simulated panel (~140
observations, 2 chains × (100 + 100)), and the real publication store.

A good fit (seed 11) and a publication are in place first. The faults: a refit killed with SIGKILL in the
middle of sampling, then re-run; a fit that fails its convergence gates; a publisher killed part-way through
writing a version. After each: the good fit folder, the published score tables and the publication are
byte for byte as they were, and the re-run completes. Same inputs and seed give byte-identical fit tables,
score tables (the killed refit's re-run) and published files (two homes).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import duckdb
import pytest
import yaml
from dagster_duckdb import DuckDBResource

from atlas_assets.defs import model as model_stage
from atlas_assets.model.simulate import simulate_panel, simulated_references
from atlas_assets.model.stan_data import load_model_config
from atlas_assets.publish import store
from atlas_assets.settings import PROJECT_ROOT
from tests.faults.harness import files_with_bytes, small_publication

MODEL_ASSETS = dg.load_assets_from_package_module(model_stage)
MODEL_CHECKS = dg.load_asset_checks_from_package_module(model_stage)
SCORE_TABLES = ("capability_state_scores", "capability_model_scores", "reasoning_effects", "family_parameters")
# gates a 2 × (100 + 100) fit of a tiny panel passes; the shipped gates (strict.yaml) it fails
LOOSE_GATES = {"rhat_max": 2.0, "ess_bulk_min": 3, "ess_tail_min": 3, "divergences_max": 100, "ebfmi_min": 0.01}
GOOD_SEED = 11


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.fits = self.home / "model" / "fits"
        self.instance = dg.DagsterInstance.ephemeral()

    @property
    def database(self) -> Path:
        return self.home / "atlas.duckdb"

    def resources(self) -> dict:
        return {"duckdb": DuckDBResource(database=str(self.database)), "pipes_subprocess_client": dg.PipesSubprocessClient()}

    def run(self, seed: int, **sampler) -> dg.ExecuteInProcessResult:
        config = {"ops": {"capability_fit": {"config": {"seed": seed, **sampler}}}}
        return dg.materialize([*MODEL_ASSETS, *MODEL_CHECKS], resources=self.resources(), instance=self.instance,
                              run_config=config, raise_on_error=False)

    def score_bytes(self) -> dict[str, bytes]:
        with duckdb.connect(str(self.database), read_only=True) as conn:
            return {t: conn.execute(f"SELECT * FROM {t} ORDER BY ALL").df().to_csv(index=False).encode()
                    for t in SCORE_TABLES}

    def fit_folder(self, seed: int, suffix: str = "") -> Path:
        (folder,) = [p for p in self.fits.iterdir() if p.name.endswith(f"s{seed}{suffix}")]
        return folder

    def state(self) -> dict[str, object]:
        """What a fault must leave as it was: every finished fit folder, the score tables, the publications."""
        return {"fits": {p.name: files_with_bytes(p) for p in sorted(self.fits.iterdir())
                         if not p.name.endswith((".partial", ".failed"))},
                "scores": self.score_bytes(), "publications": files_with_bytes(self.home / "publications")}


def write_model_config(path: Path, observations, truth, gates: dict) -> None:
    config = load_model_config()
    config["display"]["reference"] = simulated_references(observations, truth)
    config["sampler"].update(chains=2, warmup=100, draws=100)
    config["sampler"]["precondition"]["mode"] = "none"
    config["diagnostics"].update(gates)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    project = Project(tmp_path_factory.mktemp("fault_fit"))
    project.home.mkdir()
    observations, truth = simulate_panel(seed=7, config=load_model_config(), n_models=20, n_families=5, target_obs=140)
    write_model_config(project.root / "model.yaml", observations, truth, LOOSE_GATES)
    write_model_config(project.root / "strict.yaml", observations, truth, {})  # the shipped gates
    with duckdb.connect(str(project.database)) as conn:
        conn.register("panel", observations)
        conn.execute("CREATE TABLE modeled_observations AS SELECT * FROM panel")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATLAS_HOME", str(project.home))
        patch.delenv("ATLAS_DUCKDB", raising=False)
        patch.setenv("ATLAS_MODEL_CONFIG", str(project.root / "model.yaml"))
        good = project.run(GOOD_SEED)
        assert good.success, [str(e.event_specific_data) for e in good.get_step_failure_events()]
        store.publish(small_publication(fit=project.fit_folder(GOOD_SEED).name), project.home / "publications")
        project.good = project.state()
        yield project
    project.instance.dispose()


KILLED_RUN = """
import dagster as dg, sys
from dagster_duckdb import DuckDBResource
from atlas_assets.defs import model as model_stage
assets = dg.load_assets_from_package_module(model_stage)
resources = {"duckdb": DuckDBResource(database=sys.argv[1]), "pipes_subprocess_client": dg.PipesSubprocessClient()}
config = {"seed": int(sys.argv[2]), "force_refit": True}
dg.materialize(assets, resources=resources, run_config={"ops": {"capability_fit": {"config": config}}})
"""


@pytest.mark.slow
def test_a_run_killed_during_a_refit_keeps_the_good_fit_and_the_rerun_is_byte_identical(project):
    """The nightly refit of unchanged data with the same seed, killed (SIGKILL to the run and its fit process)
    while sampling; then run again. The good fit folder it was replacing, the published scores and the
    publication are untouched by the kill, the interrupted fit is only a `.partial` folder, and the re-run
    reproduces the good fit's tables byte for byte (same inputs, same seed)."""
    before = project.state()
    good_fit = project.fit_folder(GOOD_SEED)
    run = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(project.database), str(GOOD_SEED)], cwd=PROJECT_ROOT,
                           start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    partial = good_fit.with_name(good_fit.name + ".partial")
    deadline = time.monotonic() + 180
    while not (partial / "index_observations.csv").exists():
        assert run.poll() is None and time.monotonic() < deadline, run.stderr.read().decode()[-3000:]
        time.sleep(0.1)
    time.sleep(1.0)  # into the sampling
    os.killpg(run.pid, signal.SIGKILL)  # the run and its fit process, as a crash or an OOM kill would
    run.wait(timeout=30)

    assert partial.exists() and not (partial / "fit_summary.json").exists()
    assert project.state() == before  # the good fit, the score tables and the publication as they were

    rerun = project.run(GOOD_SEED, force_refit=True)
    assert rerun.success, [str(e.event_specific_data) for e in rerun.get_step_failure_events()]
    metadata = rerun.asset_materializations_for_node("capability_fit")[0].metadata
    assert metadata["reused"].value is False and metadata["passes"].value is True
    assert not partial.exists()
    fresh = files_with_bytes(good_fit)
    for stem in ("state_scores", "model_scores", "reasoning_effects", "family_parameters"):
        for suffix in (".csv", ".parquet"):
            assert fresh[stem + suffix] == before["fits"][good_fit.name][stem + suffix], stem + suffix
    assert fresh["index_observations.csv"] == before["fits"][good_fit.name]["index_observations.csv"]
    assert project.score_bytes() == before["scores"]  # capability_scores republished the same bytes
    assert files_with_bytes(project.home / "publications") == before["publications"]


@pytest.mark.slow
def test_a_fit_that_fails_its_gates_publishes_nothing(project, monkeypatch):
    before = project.state()
    monkeypatch.setenv("ATLAS_MODEL_CONFIG", str(project.root / "strict.yaml"))
    failed = project.run(GOOD_SEED)
    assert not failed.success
    gates = {e.check_name: e for e in failed.get_asset_check_evaluations() if e.check_name.startswith("gate_")}
    assert not gates["gate_min_ess_bulk"].passed and gates["gate_min_ess_bulk"].severity == dg.AssetCheckSeverity.ERROR
    assert "capability_scores" not in {e.asset_key.to_user_string() for e in failed.get_asset_materialization_events()}
    kept = project.fit_folder(GOOD_SEED, ".failed")
    summary = json.loads((kept / "fit_summary.json").read_text())
    assert summary["passes"] is False and summary["min_ess_bulk"] < 400
    assert json.loads((kept / "diagnostics.json").read_text())["checks"]["ess_bulk"] is False
    with duckdb.connect(str(project.database), read_only=True) as conn:
        recorded = dict(conn.execute("SELECT metric, passes FROM fit_diagnostics").fetchall())
    assert recorded["min_ess_bulk"] is False  # the failure is on record for the UI ...
    assert project.state() == before  # ... and nothing it would publish changed

    # materializing the publishing asset alone (as from the UI) refuses the failed fit, naming the gate
    scores = next(a for a in MODEL_ASSETS if a.key.to_user_string() == "capability_scores")
    alone = dg.materialize([scores], resources=project.resources(), instance=project.instance, raise_on_error=False)
    text = " ".join(str(e.event_specific_data) for e in alone.get_step_failure_events())
    assert not alone.success and "failed its convergence gates" in text and "gate_min_ess_bulk failed" in text
    assert project.state() == before

    monkeypatch.setenv("ATLAS_MODEL_CONFIG", str(project.root / "model.yaml"))
    again = project.run(GOOD_SEED)
    assert again.success
    assert again.asset_materializations_for_node("capability_fit")[0].metadata["reused"].value is True
    assert project.score_bytes() == before["scores"]


PUBLISHER = """
import sys, time
from atlas_assets.publish import store
from tests.faults.harness import small_publication
real = store.write_table_files
def slow_writer(frame, folder, name, conn):
    records = real(frame, folder, name, conn)
    (folder.parent / "writing").write_text(name)
    time.sleep(30)  # killed here, with part of the version written
    return records
store.write_table_files = slow_writer
store.publish(small_publication(value=float(sys.argv[2])), __import__("pathlib").Path(sys.argv[1]))
"""


def test_a_publisher_killed_midway_leaves_the_last_publication_current(tmp_path):
    root = tmp_path / "publications"
    first = store.publish(small_publication(), root)
    before = files_with_bytes(root)
    writer = subprocess.Popen([sys.executable, "-c", PUBLISHER, str(root), "99.5"], cwd=PROJECT_ROOT,
                              start_new_session=True, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (root / "writing").exists() and time.monotonic() < deadline and writer.poll() is None:
        time.sleep(0.05)
    assert (root / "writing").exists(), writer.stderr.read().decode()[-2000:]
    staging = list(root.glob(".staging-*"))
    assert staging and any(p.name.endswith(".csv") for p in staging[0].iterdir())  # really part-way
    os.killpg(writer.pid, signal.SIGKILL)
    writer.wait(timeout=30)
    (root / "writing").unlink()

    # readers see the last good publication, whole; the half-written folder is not a version
    assert store.current_name(root) == first.name and store.list_versions(root) == [first.name]
    assert {k: v for k, v in files_with_bytes(root).items() if not k.startswith(".staging-")} == before
    assert store.verify_publication(first.folder) == []

    # the next publisher clears the leftover and publishes
    second = store.publish(small_publication(value=99.5), root)
    assert second.created and store.current_name(root) == second.name and not list(root.glob(".staging-*"))
    assert store.list_versions(root) == sorted([first.name, second.name])
    assert files_with_bytes(first.folder) == {k.split("/", 1)[1]: v for k, v in before.items() if k.startswith(first.name)}


def test_the_same_publication_gives_byte_identical_files_in_two_homes(tmp_path):
    one = store.publish(small_publication(), tmp_path / "one")
    two = store.publish(small_publication(), tmp_path / "two")
    first, second = files_with_bytes(one.folder), files_with_bytes(two.folder)
    assert set(first) == set(second) and len(first) >= 5
    for name in first:
        if name != store.MANIFEST:
            assert first[name] == second[name], name
    # the manifests differ only in the version's name and time; the content digest is the same
    manifests = [json.loads(first[store.MANIFEST]), json.loads(second[store.MANIFEST])]
    for manifest in manifests:
        manifest.pop("name"), manifest.pop("created_at")
    assert manifests[0] == manifests[1]
