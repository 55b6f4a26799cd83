"""Download a source URL (or read it from the offline mirror) into the snapshot store.

HTTP goes through httpx with a per-request timeout, a streaming size cap, and a check
that the body is as long as the server said. Transient failures (timeouts, connection
errors, 5xx, 429, truncated bodies) are retried a bounded number of times with
exponential backoff (tenacity); 4xx answers are final. When the last retrieval of a URL
left an ETag or Last-Modified, the request is conditional and a 304 reuses that snapshot.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

import dagster as dg
import httpx
import tenacity

from atlas_assets import settings
from atlas_assets.ingest.bundles import Document, manifest_bytes
from atlas_assets.ingest.snapshots import FetchRecord, SnapshotStore

USER_AGENT = "benchmark-atlas/0.1 (+https://github.com/benchmark-atlas)"


class FetchError(RuntimeError):
    """A source could not be retrieved; the message names the URL and why.

    `attempt` is the failed attempt as recorded in the fetch log (set by SourceFetcher.fetch).
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.attempt: FetchRecord | None = None


class _TransientFetchError(FetchError):
    """Worth another attempt."""


@dataclass(frozen=True)
class FetchResult:
    url: str
    retrieved_at: str
    sha256: str
    bytes: int
    path: Path
    origin: str  # 'live' | 'mirror'
    changed: bool  # content differs from the previous retrieval of this URL (True on the first)
    not_modified: bool  # the server answered 304 and the previous snapshot was reused
    previous_sha256: str | None
    documents: tuple[Document, ...] = ()  # a multi-document source: the bundle's documents (sha256 = the bundle's)
    changed_documents: tuple[str, ...] = ()  # ... and those whose content differs from their previous retrieval

    def metadata(self) -> dict[str, object]:
        extra = {"documents": len(self.documents),
                 "documents_changed": sum(1 for d in self.documents if d.name in self.changed_documents)} if self.documents else {}
        return extra | {
            "url": self.url,
            "retrieved_at": self.retrieved_at,
            "sha256": self.sha256,
            "bytes": self.bytes,
            "origin": self.origin,
            "changed_since_last_run": self.changed,
            "http_not_modified": self.not_modified,
            "previous_sha256": self.previous_sha256 or "none",
            "snapshot_path": str(self.path),
        }


def mirror_path(mirror_root: Path, url: str) -> Path:
    """https://HOST/PATH -> MIRROR/HOST/PATH, refusing anything that would leave the mirror."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise FetchError(f"{url}: not an http(s) URL")
    root = Path(os.path.abspath(mirror_root))
    # Lexical normalization: `..` in a URL must not climb out, but a mirror may hold symlinks.
    candidate = Path(os.path.normpath(root / parts.netloc / parts.path.lstrip("/")))
    if root not in candidate.parents:
        raise FetchError(f"{url}: maps outside the mirror {mirror_root}")
    return candidate


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")



class SourceFetcher(dg.ConfigurableResource):
    """Retrieves source files with provenance; configured from the environment by default."""

    snapshot_dir: str
    mirror: str | None = None
    timeout_seconds: float = 30.0
    max_attempts: int = 4
    backoff_seconds: float = 1.0
    max_bytes: int = 256 * 1024 * 1024

    @classmethod
    def from_environment(cls) -> "SourceFetcher":
        mirror = settings.mirror_root()
        return cls(snapshot_dir=str(settings.snapshot_dir()), mirror=str(mirror) if mirror else None)

    @property
    def store(self) -> SnapshotStore:
        return SnapshotStore(Path(self.snapshot_dir))

    def fetch(self, url: str) -> FetchResult:
        store = self.store
        previous = store.last_good(url)
        try:
            if self.mirror:
                content, record = self._read_mirror(url)
            else:
                content, record = self._download(url, previous)
        except FetchError as error:
            # A failed attempt is history too: without it the last success looks like the latest news.
            error.attempt = FetchRecord(url=url, retrieved_at=utc_now(), sha256="", bytes=0,
                                        origin="mirror" if self.mirror else "live", status=error.status, error=str(error))
            store.record(error.attempt)
            raise
        if record.not_modified and previous is not None:
            sha256, path = previous.sha256, store.path_for(previous.sha256)
            record = dataclasses.replace(record, sha256=sha256, bytes=previous.bytes)
        else:
            sha256, path = store.put(content)
            record = dataclasses.replace(record, sha256=sha256, bytes=len(content))
        store.record(record)
        return FetchResult(
            url=url,
            retrieved_at=record.retrieved_at,
            sha256=sha256,
            bytes=record.bytes,
            path=path,
            origin=record.origin,
            changed=previous is None or previous.sha256 != sha256,
            not_modified=record.not_modified,
            previous_sha256=previous.sha256 if previous else None,
        )

    def fetch_bundle(self, source: str, base_url: str, names: list[str],
                     discover: Callable[[dict[str, bytes]], list[str]] | None = None) -> FetchResult:
        """Fetch the documents `names` (relative to `base_url`), then those `discover` names from their
        contents (tau2-bench: the submissions its manifest lists), and store one bundle manifest over all
        of them (atlas_assets/ingest/bundles.py). Any document that cannot be had fails the whole
        retrieval (FetchError naming its URL), so the source falls back to its last good bundle."""
        store = self.store
        previous = store.last_good(base_url)
        fetched: dict[str, FetchResult] = {}

        def get(batch: list[str]) -> None:
            for name in batch:
                if name in fetched:
                    continue
                try:
                    fetched[name] = self.fetch(base_url + name)
                except FetchError as error:
                    wrapped = FetchError(f"{source}: document {name} of the bundle: {error}", status=error.status)
                    wrapped.attempt = FetchRecord(url=base_url, retrieved_at=utc_now(), sha256="", bytes=0,
                                                  origin="mirror" if self.mirror else "live", status=error.status,
                                                  error=str(wrapped))
                    store.record(wrapped.attempt)
                    raise wrapped from error

        get(list(names))
        if discover is not None:
            # discover is lenient (an unreadable listing names nothing more); the parser then says why
            get(list(discover({name: store.read(result.sha256) for name, result in fetched.items()})))
        documents = [Document(name, result.url, result.sha256, result.bytes) for name, result in fetched.items()]
        manifest = manifest_bytes(source, base_url, documents)
        sha256, path = store.put(manifest)
        origins = {result.origin for result in fetched.values()}
        record = FetchRecord(url=base_url, retrieved_at=utc_now(), sha256=sha256, bytes=len(manifest),
                             origin=origins.pop() if len(origins) == 1 else "mixed")
        store.record(record)
        result = FetchResult(
            url=base_url, retrieved_at=record.retrieved_at, sha256=sha256, bytes=len(manifest), path=path,
            origin=record.origin, changed=previous is None or previous.sha256 != sha256,
            not_modified=all(r.not_modified for r in fetched.values()),
            previous_sha256=previous.sha256 if previous else None,
            documents=tuple(sorted(documents, key=lambda d: d.name)),
            changed_documents=tuple(sorted(n for n, r in fetched.items() if r.changed)),
        )
        return result

    def _read_mirror(self, url: str) -> tuple[bytes, FetchRecord]:
        path = mirror_path(Path(self.mirror), url)
        if not path.is_file():
            raise FetchError(f"{url}: offline mirror has no file at {path}")
        size = path.stat().st_size
        if size > self.max_bytes:
            raise FetchError(f"{url}: mirror file {path} is {size} bytes, over the {self.max_bytes}-byte cap")
        content = path.read_bytes()
        return content, FetchRecord(url=url, retrieved_at=utc_now(), sha256="", bytes=0, origin="mirror")

    def _download(self, url: str, previous: FetchRecord | None) -> tuple[bytes, FetchRecord]:
        headers = {"User-Agent": USER_AGENT}
        if previous is not None:
            if previous.etag:
                headers["If-None-Match"] = previous.etag
            if previous.last_modified:
                headers["If-Modified-Since"] = previous.last_modified

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.max_attempts),
            wait=tenacity.wait_exponential(multiplier=self.backoff_seconds, max=30),
            retry=tenacity.retry_if_exception_type(_TransientFetchError),
            reraise=True,
        )
        try:
            return retrying(self._attempt, url, headers)
        except _TransientFetchError as error:
            raise FetchError(f"{error} (gave up after {self.max_attempts} attempts)", status=error.status) from error

    def _attempt(self, url: str, headers: dict[str, str]) -> tuple[bytes, FetchRecord]:
        timeout = httpx.Timeout(self.timeout_seconds)
        try:
            with httpx.Client(timeout=timeout, follow_redirects=True) as client:
                with client.stream("GET", url, headers=headers) as response:
                    return self._read_response(url, response)
        except httpx.TimeoutException as error:
            raise _TransientFetchError(f"{url}: timed out after {self.timeout_seconds}s ({type(error).__name__})") from error
        except (httpx.TransportError, httpx.RemoteProtocolError) as error:
            raise _TransientFetchError(f"{url}: transport error: {error}") from error

    def _read_response(self, url: str, response: httpx.Response) -> tuple[bytes, FetchRecord]:
        record = FetchRecord(
            url=url,
            retrieved_at=utc_now(),
            sha256="",
            bytes=0,
            origin="live",
            status=response.status_code,
            etag=response.headers.get("ETag"),
            last_modified=response.headers.get("Last-Modified"),
        )
        if response.status_code == 304:
            return b"", dataclasses.replace(record, not_modified=True)
        if response.status_code == 429 or response.status_code >= 500:
            raise _TransientFetchError(f"{url}: HTTP {response.status_code}", status=response.status_code)
        if response.status_code >= 400:
            raise FetchError(f"{url}: HTTP {response.status_code} {response.reason_phrase}", status=response.status_code)
        declared = response.headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            raise FetchError(f"{url}: Content-Length {declared} is over the {self.max_bytes}-byte cap")
        chunks, received = [], 0
        for chunk in response.iter_bytes():
            received += len(chunk)
            if received > self.max_bytes:
                raise FetchError(f"{url}: body exceeds the {self.max_bytes}-byte cap")
            chunks.append(chunk)
        # Content-Length counts the bytes on the wire, before any Content-Encoding is undone.
        if declared is not None and declared.isdigit() and response.num_bytes_downloaded != int(declared):
            raise _TransientFetchError(
                f"{url}: truncated body, {response.num_bytes_downloaded} of {declared} bytes"
            )
        return b"".join(chunks), record
