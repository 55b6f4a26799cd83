"""The fault suite's shared harness: a local HTTP server, the real ingest assets pointed at it, and the
"nothing lost" ledger checked after every fault.

A case runs the real source asset (defs/ingest/assets.py, built by its own factory with the source URL
moved to the local server) in process with `dg.materialize` against a real DuckDB file and snapshot store
under a fresh ATLAS_HOME, which starts as a copy of a seeded home: one good retrieval of each source
already landed and one good publication already current. `Ledger.take` records what must survive a
fault (raw snapshots with their bytes, the fetch log and the attempts table, the staged rows, the
publications tree); `Ledger.assert_kept` compares after the fault.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import io
import json
import shutil
import socket
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import dagster as dg
import duckdb
import pandas as pd
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.ingest.assets import SOURCES, build_source_asset
from atlas_assets.defs.ingest.checks import build_source_checks
from atlas_assets.ingest.fetch import SourceFetcher
from atlas_assets.publish import store
from atlas_assets.publish.artifacts import Collected, Publication, Stamps

FIXTURES = Path(__file__).resolve().parent.parent / "ingest" / "fixtures"
REGISTRY = FIXTURES / "registry.yaml"

MC_HEADER = "Model version,mean_score,Best score (across scorers),Release date,Organization,stderr,Started at\n"
MC_ROW = "model-{i},0.5,0.{i},2025-01-01,Org,0.01,2026-01-01\n"
AGENT_HEADER = "Model version,Name,Agent,Shots,Release date,Source,Score (%),Long tasks (%)\n"
AGENT_ROW = "agent-model-{i},Agent Model {i},Forge,0,2025-11-18,Toy Leaderboard,0.{i},0.1\n"
HEADLINE = "Best score (across scorers)"


def mc(n: int, first: int = 1) -> str:
    return MC_HEADER + "".join(MC_ROW.format(i=i) for i in range(first, first + n))


def agent(n: int) -> str:
    return AGENT_HEADER + "".join(AGENT_ROW.format(i=i) for i in range(1, n + 1))


def zip_of(members: dict[str, str | bytes]) -> bytes:
    """Deterministic bytes (fixed member times), so a case can name a snapshot by its hash."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as handle:
        for name, data in members.items():
            handle.writestr(zipfile.ZipInfo(name, date_time=(2026, 4, 1, 0, 0, 0)), data)
    return buffer.getvalue()


def swe(n: int) -> bytes:
    results = [{"name": f"Agent + M{i}", "resolved": str(40 + i), "date": "2025-11-20",
                "tags": [f"Model: model-{i}", "System: Attempts - 1"]} for i in range(1, n + 1)]
    return json.dumps({"leaderboards": [{"name": "Toy", "results": results}]}).encode()


GOOD_EPOCH = {"toy_mc.csv": mc(6), "toy_agent_external.csv": agent(3)}
GOOD_EPOCH_ZIP = zip_of(GOOD_EPOCH)
GOOD_SWE = swe(4)


def sha(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


# ------------------------------------------------------------------------------------------ HTTP server

Responder = Callable[[http.server.BaseHTTPRequestHandler], None]


def body(content: bytes, status: int = 200, content_type: str = "application/octet-stream",
         headers: dict[str, str] | None = None) -> Responder:
    def respond(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(content)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(content)
    return respond


def truncated(content: bytes, sent: int) -> Responder:
    """Declares the whole length, sends `sent` bytes, then drops the connection."""
    def respond(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(content)))
        handler.end_headers()
        handler.wfile.write(content[:sent])
        handler.wfile.flush()
        handler.close_connection = True
    return respond


def chunked(content: bytes, chunk: int = 16 * 1024) -> Responder:
    """No Content-Length: the size cap must hold while streaming."""
    def respond(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for start in range(0, len(content), chunk):
            part = content[start:start + chunk]
            handler.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        handler.wfile.write(b"0\r\n\r\n")
    return respond


def slow(content: bytes, seconds: float) -> Responder:
    def respond(handler: http.server.BaseHTTPRequestHandler) -> None:
        time.sleep(seconds)
        body(content)(handler)
    return respond


class LocalServer:
    """http.server in a thread; `routes[path]` says how each path answers and `hits[path]` counts requests."""

    def __init__(self) -> None:
        routes: dict[str, Responder] = {}
        hits: dict[str, int] = {}

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                hits[self.path] = hits.get(self.path, 0) + 1
                responder = routes.get(self.path)
                if responder is None:
                    body(b"no such route", status=404, content_type="text/plain")(self)
                    return
                try:
                    responder(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout case)

            def log_message(self, *args) -> None:
                pass

        self.routes, self.hits = routes, hits
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def closed_port() -> int:
    """A local port nothing listens on (a source that is down: connection refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


EPOCH_PATH, SWE_PATH = "/epoch/benchmark_data.zip", "/swe/leaderboards.json"


def good_routes(server: LocalServer) -> None:
    server.routes.clear()
    server.hits.clear()
    server.routes[EPOCH_PATH] = body(GOOD_EPOCH_ZIP, content_type="application/zip")
    server.routes[SWE_PATH] = body(GOOD_SWE, content_type="application/json")


# ------------------------------------------------------------------------------------------ the sources


@dataclass
class Source:
    """One real source asset with its checks, its URL moved to the local server."""

    name: str
    spec: object
    asset: dg.AssetsDefinition
    checks: list[dg.AssetChecksDefinition]

    @property
    def url(self) -> str:
        return self.spec.url


def local_source(name: str, url: str) -> Source:
    spec = dataclasses.replace(next(s for s in SOURCES if s.name == name), url=url)
    return Source(name, spec, build_source_asset(spec), build_source_checks(spec))


@dataclass
class Home:
    """A fresh ATLAS_HOME under test (the env points at it)."""

    root: Path

    @property
    def duckdb(self) -> Path:
        return self.root / "atlas.duckdb"

    @property
    def snapshots(self) -> Path:
        return self.root / "snapshots"

    @property
    def publications(self) -> Path:
        return self.root / "publications"

    def fetcher(self, **overrides) -> SourceFetcher:
        options = dict(snapshot_dir=str(self.snapshots), mirror=None, timeout_seconds=0.5, max_attempts=2,
                       backoff_seconds=0.01, max_bytes=4 * 1024 * 1024)
        options.update(overrides)
        return SourceFetcher(**options)

    def resources(self, **fetcher) -> dict[str, object]:
        return {"duckdb": DuckDBResource(database=str(self.duckdb)), "fetcher": self.fetcher(**fetcher)}

    def query(self, sql: str, params=None) -> list[tuple]:
        with duckdb.connect(str(self.duckdb), read_only=True) as conn:
            return conn.execute(sql, params or []).fetchall()

    def run(self, source: Source, *, checks: tuple[str, ...] = ("fresh_download_parsed", "scrape_succeeded"),
            config: dict | None = None, **fetcher) -> "Outcome":
        """Materialize the source asset with the named checks (each check is a step: only those a case reads)."""
        run_config = {"ops": {source.asset.key.to_user_string(): {"config": config}}} if config else None
        chosen = [c for c in source.checks if {k.name for k in c.check_keys} & set(checks)]
        result = dg.materialize([source.asset, *chosen], resources=self.resources(**fetcher),
                                run_config=run_config, raise_on_error=False)
        return Outcome(result, source, self)

    def rerun_good(self, source: Source) -> "Outcome":
        """The re-run on good input: the asset alone, then its latest attempt must be a fresh, parsed one."""
        outcome = self.run(source, checks=())
        attempt = outcome.latest_attempt()
        assert outcome.success and attempt["status"] == "parsed" and attempt["error"] is None, attempt
        return outcome


@dataclass
class Outcome:
    result: dg.ExecuteInProcessResult
    source: Source
    home: Home

    @property
    def success(self) -> bool:
        return self.result.success

    def check(self, name: str) -> dg.AssetCheckEvaluation:
        found = {e.check_name: e for e in self.result.get_asset_check_evaluations()}
        return found[name]

    def metadata(self) -> dict[str, object]:
        (event,) = self.result.asset_materializations_for_node(self.source.asset.op.name)
        return {k: v.value for k, v in event.metadata.items()}

    def latest_attempt(self) -> dict[str, object]:
        row = self.home.query(
            "SELECT sha256, status, parsed_ok, error FROM source_snapshots WHERE source = ? ORDER BY rowid DESC LIMIT 1",
            [self.source.name])[0]
        return dict(zip(("sha256", "status", "parsed_ok", "error"), row))

    def audit(self, reason: str | None = None) -> list[dict[str, object]]:
        table = f"audit_ingest__{self.source.name}"
        rows = self.home.query(f"SELECT file, row_number, field, reason, detail, value, snapshot_sha256 FROM {table} "
                               "WHERE ? IS NULL OR reason = ? ORDER BY rowid", [reason, reason])
        return [dict(zip(("file", "row_number", "field", "reason", "detail", "value", "snapshot_sha256"), r)) for r in rows]

    def staged(self) -> list[tuple]:
        return self.home.query(f"SELECT * FROM raw_scores__{self.source.name} ORDER BY row_key")


# ------------------------------------------------------------------------------------------ nothing lost


def files_with_bytes(root: Path, *, skip: tuple[str, ...] = (".lock",)) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in skip}


@dataclass
class Ledger:
    """What a fault must not take away, recorded before it."""

    snapshots: dict[str, bytes]
    fetch_log: list[str]
    attempts: list[tuple]
    staged: dict[str, list[tuple]]
    publications: dict[str, bytes]
    current: str | None

    @classmethod
    def take(cls, home: Home, sources: tuple[str, ...] = ("epoch_hub", "swe_bench")) -> "Ledger":
        log = home.snapshots / "fetch_log.jsonl"
        staged = {}
        with duckdb.connect(str(home.duckdb), read_only=True) as conn:
            attempts = conn.execute("SELECT * FROM source_snapshots ORDER BY rowid").fetchall()
            for name in sources:
                staged[name] = conn.execute(f"SELECT * FROM raw_scores__{name} ORDER BY row_key").fetchall()
        return cls(files_with_bytes(home.snapshots / "sha256"), log.read_text().splitlines() if log.exists() else [],
                   attempts, staged, files_with_bytes(home.publications), store.current_name(home.publications))

    def assert_kept(self, home: Home, *, staged_unchanged: tuple[str, ...] = ("epoch_hub", "swe_bench")) -> "Ledger":
        """Raw snapshots intact (every earlier one still there, byte for byte, and every stored file still
        matching the hash it is named by), the fetch log and the attempts table only appended to, the last good
        rows of `staged_unchanged` still staged, and the publications exactly as they were."""
        after = Ledger.take(home, tuple(self.staged))
        for name, content in self.snapshots.items():
            assert after.snapshots.get(name) == content, f"raw snapshot {name} changed or vanished"
        for name, content in after.snapshots.items():
            assert Path(name).name == sha(content), f"stored snapshot {name} does not match its hash"
        assert after.fetch_log[:len(self.fetch_log)] == self.fetch_log, "the fetch log was rewritten, not appended"
        assert after.attempts[:len(self.attempts)] == self.attempts, "recorded retrieval attempts changed"
        for name in staged_unchanged:
            assert after.staged[name] == self.staged[name], f"the last good rows of {name} were not kept"
        assert after.publications == self.publications, "the last good publication changed"
        assert after.current == self.current and after.current is not None
        assert store.verify_publication(home.publications / after.current) == []
        return after


# ------------------------------------------------------------------------------------------ a publication


def small_publication(fit: str = "0" * 16 + "-" + "5" * 16 + "-c2w10d10s1", value: float = 130.0) -> Publication:
    """A publication of the store's own format, small enough to publish in a few milliseconds."""
    stamps = Stamps(fit=fit, data_sha256="d" * 64, spec_sha256="5" * 64)
    stamp = stamps.as_dict()
    scores = pd.DataFrame({"model": ["m1", "m2", "m3"], "display_mean": [value, value + 10.5, value + 20.25],
                           "display_lower": [value - 3, value + 7, value + 17], **{k: v for k, v in stamp.items()}})
    cells = pd.DataFrame({"model": ["m1", "m2"], "family": ["f1", "f1"], "pred_mean": [0.25, 0.75], **stamp})
    return Publication(stamps=stamps, tables={"model_scores": Collected(scores), "cell_predictions": Collected(cells)},
                       methodology={"stamps": stamp, "what": "fault-suite publication"})


def seed_home(root: Path, server: LocalServer, registry_patch: Callable[[], None]) -> Home:
    """One good retrieval of epoch_hub and swe_bench from the server, and one good publication."""
    home = Home(root)
    registry_patch()
    good_routes(server)
    for name, path in (("epoch_hub", EPOCH_PATH), ("swe_bench", SWE_PATH)):
        outcome = home.run(local_source(name, server.url(path)))
        assert outcome.success and outcome.check("fresh_download_parsed").passed
    store.publish(small_publication(), home.publications)
    return home


def copy_home(template: Home, root: Path) -> Home:
    shutil.copytree(template.root, root, symlinks=True)
    return Home(root)
