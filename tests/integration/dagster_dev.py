"""Start and stop a real `dagster dev` (webserver + daemon) for tests, and talk GraphQL to it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class DagsterDev:
    """`dagster dev` on 127.0.0.1, a free port and a temporary instance, serving `workspace` (default: the
    project's workspace.yaml). Subclasses say when the server is ready (`ready`)."""

    def __init__(self, work_dir: Path, env_overrides: dict[str, str], workspace: Path | str = "workspace.yaml") -> None:
        self.home = work_dir / "dagster_home"
        self.home.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROJECT_ROOT / "dagster.yaml", self.home / "dagster.yaml")
        self.workspace = workspace
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = work_dir / "dagster_dev.log"
        self.env = {**os.environ, **env_overrides, "DAGSTER_HOME": str(self.home)}
        self.process: subprocess.Popen | None = None

    def ready(self) -> bool:
        """Whether the answering server is ready for the test (here: as soon as it answers)."""
        return True

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def start(self, timeout: float = 180.0) -> "DagsterDev":
        log = self.log_path.open("wb")
        # dagster dev started from a non-interactive shell ignores SIGINT unless it is reset to default.
        self.process = subprocess.Popen(
            [str(PROJECT_ROOT / ".venv" / "bin" / "dagster"), "dev", "-w", str(self.workspace), "-h", "127.0.0.1",
             "-p", str(self.port)],
            cwd=PROJECT_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dagster dev exited early:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/server_info", timeout=2).status_code == 200 and self.ready():
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(1)
        self.stop()
        raise RuntimeError(f"dagster dev was not ready within {timeout}s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        response = httpx.post(f"{self.url}/graphql", json={"query": query, "variables": variables or {}}, timeout=60)
        response.raise_for_status()
        body = response.json()
        if body.get("errors"):
            raise RuntimeError(f"GraphQL errors: {body['errors']}")
        return body["data"]

    def launch_assets(self, asset_names: list[str], run_config: dict | None = None) -> str:
        data = self.graphql(
            """mutation Launch($params: ExecutionParams!) {
                 launchRun(executionParams: $params) {
                   __typename
                   ... on LaunchRunSuccess { run { runId } }
                   ... on PythonError { message }
                   ... on InvalidSubsetError { message }
                   ... on RunConfigValidationInvalid { errors { message } }
                 }
               }""",
            {"params": {
                "selector": {
                    "repositoryLocationName": "atlas_assets", "repositoryName": "__repository__",
                    "jobName": "__ASSET_JOB", "assetSelection": [{"path": [name]} for name in asset_names],
                },
                "mode": "default",
                "runConfigData": run_config or {},
            }},
        )["launchRun"]
        if data["__typename"] != "LaunchRunSuccess":
            raise RuntimeError(f"launch failed: {data}")
        return data["run"]["runId"]

    def wait_for_run(self, run_id: str, timeout: float = 600.0) -> str:
        deadline = time.monotonic() + timeout
        status = "UNKNOWN"
        while time.monotonic() < deadline:
            status = self.graphql(
                "query Run($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }", {"id": run_id}
            )["runOrError"]["status"]
            if status in {"SUCCESS", "FAILURE", "CANCELED"}:
                return status
            time.sleep(2)
        raise TimeoutError(f"run {run_id} still {status} after {timeout}s")
