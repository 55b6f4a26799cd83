"""A real `dagster dev` (webserver + daemon) for the browser test, on 127.0.0.1, a free port and a temporary instance.

Serves the project's code location `atlas_assets` and the test location `broken_input`
(tests/ui/broken_location.py) from one temporary workspace file.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx

from tests.integration.dagster_dev import free_port

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BROKEN_LOCATION = Path(__file__).resolve().parent / "broken_location.py"


class UIServer:
    def __init__(self, work_dir: Path, env_overrides: dict[str, str]) -> None:
        self.home = work_dir / "dagster_home"
        self.home.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROJECT_ROOT / "dagster.yaml", self.home / "dagster.yaml")
        self.workspace = work_dir / "workspace.yaml"
        self.workspace.write_text(
            "load_from:\n"
            "  - python_module:\n      module_name: atlas_assets.definitions\n      location_name: atlas_assets\n"
            f"      working_directory: {PROJECT_ROOT}\n"
            f"  - python_file:\n      relative_path: {BROKEN_LOCATION}\n      location_name: broken_input\n"
            f"      working_directory: {PROJECT_ROOT}\n"
        )
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = work_dir / "dagster_dev.log"
        self.env = {**os.environ, **env_overrides, "DAGSTER_HOME": str(self.home)}
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 180.0) -> "UIServer":
        log = self.log_path.open("wb")
        # dagster dev started from a non-interactive shell ignores SIGINT unless it is reset to the default.
        self.process = subprocess.Popen(
            [str(PROJECT_ROOT / ".venv" / "bin" / "dagster"), "dev", "-w", str(self.workspace),
             "-h", "127.0.0.1", "-p", str(self.port)],
            cwd=PROJECT_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dagster dev exited early:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/server_info", timeout=2).status_code == 200 and self.locations_loaded():
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(1)
        self.stop()
        raise RuntimeError(f"dagster dev did not serve both locations within {timeout}s:\n{self.log_tail()}")

    def locations_loaded(self) -> bool:
        entries = self.graphql(
            "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
            "locationOrLoadError { __typename ... on PythonError { message } } } } } }"
        )["workspaceOrError"]["locationEntries"]
        errors = [e for e in entries if e["locationOrLoadError"] and e["locationOrLoadError"]["__typename"] == "PythonError"]
        if errors:
            raise RuntimeError(f"code location failed to load: {errors}")
        return len(entries) == 2 and all(e["loadStatus"] == "LOADED" and e["locationOrLoadError"] for e in entries)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        response = httpx.post(f"{self.url}/graphql", json={"query": query, "variables": variables or {}}, timeout=60)
        response.raise_for_status()
        body = response.json()
        if body.get("errors"):
            raise RuntimeError(f"GraphQL errors: {body['errors']}")
        return body["data"]
