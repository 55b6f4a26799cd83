"""A real `dagster dev` (webserver + daemon) for the browser test, on 127.0.0.1, a free port and a temporary instance.

Serves the project's code location `atlas_assets` and the test location `broken_input`
(tests/ui/broken_location.py) from one temporary workspace file; ready once both locations are loaded.
`small_fit_state` gives its instance a small simulated `modeled_observations` and the model configuration it needs,
so the real capability fit can run from it in seconds.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import yaml

from tests.integration.dagster_dev import DagsterDev

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BROKEN_LOCATION = Path(__file__).resolve().parent / "broken_location.py"
# The smallest fit the model tests run (a too-short fit, tests/model/test_model_assets.py): what the log shows
# is the point here, not convergence.
SMALL_FIT_RUN_CONFIG = {"ops": {"capability_fit": {"config": {"chains": 2, "warmup": 15, "draws": 15, "seed": 5}}}}
# pilot 40 iterations; the main fit's tuning run 15 + 5, its draws 15 (a main fit fitted again after failing: 30)
SMALL_PILOT = {"pilot_chains": 2, "pilot_warmup": 20, "pilot_draws": 20, "main_warmup": 15,
               "main_adapt": {"cold_fixed_step": {"tuning_draws": 5}}}


def small_fit_state(work_dir: Path, atlas_home: Path) -> Path:
    """Write a small simulated panel as `modeled_observations` into ATLAS_HOME's DuckDB file, and a model
    configuration naming its display references with a short pilot; returns that configuration's path
    (for ATLAS_MODEL_CONFIG)."""
    from atlas_assets.model.simulate import SMALL_SIZE, simulate_panel, simulated_references
    from atlas_assets.model.stan_data import load_model_config

    config = load_model_config(overrides={"sampler": {"precondition": SMALL_PILOT}})
    observations, truth = simulate_panel(seed=7, config=config, **SMALL_SIZE)
    config["display"]["reference"] = simulated_references(observations, truth)
    model_yaml = work_dir / "model.yaml"
    model_yaml.write_text(yaml.safe_dump(config))
    atlas_home.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(atlas_home / "atlas.duckdb")) as conn:
        conn.register("panel", observations)
        conn.execute("CREATE TABLE modeled_observations AS SELECT * FROM panel")
    return model_yaml


class UIServer(DagsterDev):
    def __init__(self, work_dir: Path, env_overrides: dict[str, str]) -> None:
        workspace = work_dir / "workspace.yaml"
        workspace.write_text(
            "load_from:\n"
            "  - python_module:\n      module_name: atlas_assets.definitions\n      location_name: atlas_assets\n"
            f"      working_directory: {PROJECT_ROOT}\n"
            f"  - python_file:\n      relative_path: {BROKEN_LOCATION}\n      location_name: broken_input\n"
            f"      working_directory: {PROJECT_ROOT}\n"
        )
        super().__init__(work_dir, env_overrides, workspace)
        # The session's daemon ticks the project's default-RUNNING schedules: intraday_calibrate at 09:00, 15:00 and
        # 21:00 UTC re-ingested and re-cleaned the real mirror over the small simulated panel, and a browser test's
        # fit then failed its display-reference check. Scheduled runs stay queued here; the UI's runs go ahead.
        import yaml

        instance_yaml = self.home / "dagster.yaml"
        instance = yaml.safe_load(instance_yaml.read_text())
        instance.setdefault("concurrency", {}).setdefault("runs", {})["tag_concurrency_limits"] = [
            {"key": "dagster/schedule_name", "limit": 0}]
        instance_yaml.write_text(yaml.safe_dump(instance, sort_keys=False))

    def ready(self) -> bool:
        """Both code locations loaded (a location that fails to load is an error, not a wait)."""
        entries = self.graphql(
            "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
            "locationOrLoadError { __typename ... on PythonError { message } } } } } }"
        )["workspaceOrError"]["locationEntries"]
        errors = [e for e in entries if e["locationOrLoadError"] and e["locationOrLoadError"]["__typename"] == "PythonError"]
        if errors:
            raise RuntimeError(f"code location failed to load: {errors}")
        return len(entries) == 2 and all(e["loadStatus"] == "LOADED" and e["locationOrLoadError"] for e in entries)
