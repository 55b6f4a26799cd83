"""Immutable, content-addressed storage of every raw download.

A download is stored once under snapshots/sha256/<first two hex>/<hash>, written to a
temporary file and renamed into place, then made read-only; storing the same bytes again
is a no-op. `fetch_log.jsonl` is the append-only history of every retrieval attempt (URL, time,
hash, size, validators; the error of a failed one), from which the fetcher learns what it had
last time.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path


class SnapshotCorrupted(RuntimeError):
    """A stored snapshot no longer matches its hash."""


@dataclass(frozen=True)
class FetchRecord:
    url: str
    retrieved_at: str
    sha256: str
    bytes: int
    origin: str  # 'live' | 'mirror'
    status: int | None = None
    etag: str | None = None
    last_modified: str | None = None
    not_modified: bool = False
    error: str | None = None  # set on a failed attempt (sha256 '' then): nothing was stored


class SnapshotStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.log_path = self.root / "fetch_log.jsonl"

    def path_for(self, sha256: str) -> Path:
        return self.root / "sha256" / sha256[:2] / sha256

    def put(self, content: bytes) -> tuple[str, Path]:
        """Store bytes under their hash; never overwrite what is already there."""
        digest = hashlib.sha256(content).hexdigest()
        target = self.path_for(digest)
        if target.exists():
            return digest, target
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(content)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temp_name, 0o444)
            # link() fails if another writer got there first: the existing file wins, untouched.
            try:
                os.link(temp_name, target)
            except FileExistsError:
                pass
        finally:
            os.unlink(temp_name)
        return digest, target

    def read(self, sha256: str) -> bytes:
        content = self.path_for(sha256).read_bytes()
        if hashlib.sha256(content).hexdigest() != sha256:
            raise SnapshotCorrupted(f"snapshot {self.path_for(sha256)} does not match its sha256 {sha256}")
        return content

    def record(self, entry: FetchRecord) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        line = json.dumps(asdict(entry), sort_keys=True) + "\n"
        with self.log_path.open("a+b") as log:
            # A writer killed (or a disk filled) mid-append leaves a torn last line: start on a fresh line so
            # the fragment never swallows this record. The fragment itself stays, as evidence.
            if log.seek(0, os.SEEK_END) > 0:
                log.seek(-1, os.SEEK_END)
                if log.read(1) != b"\n":
                    line = "\n" + line
            log.write(line.encode("utf-8"))

    def history(self, url: str) -> list[FetchRecord]:
        if not self.log_path.exists():
            return []
        records = []
        with self.log_path.open(encoding="utf-8") as log:
            for line in log:
                line = line.strip()
                if not line:
                    continue
                try:
                    data = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn record of a write that failed (see record): it recorded nothing
                if data.get("url") == url:
                    records.append(FetchRecord(**data))
        return records

    def last_good(self, url: str) -> FetchRecord | None:
        """The newest successful retrieval of `url` whose snapshot is still stored."""
        for entry in reversed(self.history(url)):
            if entry.error is None and entry.sha256 and self.path_for(entry.sha256).exists():
                return entry
        return None
