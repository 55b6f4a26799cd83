"""A real `dagster dev` (webserver + daemon) for the browser test, on 127.0.0.1, a free port and a temporary instance.

Serves the project's code location `atlas_assets` and the test location `broken_input`
(tests/ui/broken_location.py) from one temporary workspace file; ready once both locations are loaded.
"""

from __future__ import annotations

from pathlib import Path

from tests.integration.dagster_dev import DagsterDev

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BROKEN_LOCATION = Path(__file__).resolve().parent / "broken_location.py"


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
