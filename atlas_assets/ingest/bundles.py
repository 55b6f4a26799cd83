"""Sources made of several documents (Aider's two YAML boards, tau2-bench's manifest and the submissions it
lists, ARC Prize's three JSON files): one snapshot per retrieval covering all of them.

Each document is downloaded (or read from the mirror) and stored under its own sha256 like any
single-document source, with its own fetch-log history (so conditional requests work per URL). The
retrieval then stores a small JSON *bundle manifest* naming every document (name relative to the
source's base URL, URL, sha256, bytes). The manifest is stored content-addressed too, and its sha256
is the source's snapshot hash: the `snapshot_sha256` of every row parsed from it, the `sha256` of its
`source_snapshots` row, and what a fallback re-reads. Identical documents give an identical manifest,
so "changed" means exactly "some document changed". A retrieval is all or nothing: when any document
cannot be had, the source falls back to its last good bundle (the failed URL is named in the WARN).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from atlas_assets.ingest.snapshots import SnapshotCorrupted, SnapshotStore

BUNDLE_FORMAT = "atlas-bundle/1"


class BundleError(ValueError):
    """A stored bundle cannot be read back (not a manifest, or a document missing or altered)."""


@dataclass(frozen=True)
class Document:
    name: str  # relative to the source's base URL, e.g. 'claude-opus-4-5_sierra_2026-02-26/submission.json'
    url: str
    sha256: str
    bytes: int


def manifest_bytes(source: str, base_url: str, documents: list[Document]) -> bytes:
    """The canonical manifest: sorted, compact, so equal document sets give equal bytes (and hash)."""
    body = {
        "format": BUNDLE_FORMAT,
        "source": source,
        "base_url": base_url,
        "documents": [{"name": d.name, "url": d.url, "sha256": d.sha256, "bytes": d.bytes}
                      for d in sorted(documents, key=lambda d: d.name)],
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")


def bundle_documents(store: SnapshotStore, sha256: str) -> list[Document]:
    """The documents a stored bundle names (BundleError when it is not a bundle manifest)."""
    try:
        body = json.loads(store.read(sha256).decode("utf-8"))
    except (OSError, SnapshotCorrupted, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BundleError(f"snapshot {sha256[:12]}: not a readable bundle manifest: {error}") from error
    if not isinstance(body, dict) or body.get("format") != BUNDLE_FORMAT or not isinstance(body.get("documents"), list):
        raise BundleError(f"snapshot {sha256[:12]}: not a {BUNDLE_FORMAT} manifest")
    return [Document(d["name"], d["url"], d["sha256"], int(d["bytes"])) for d in body["documents"]]


def read_bundle(store: SnapshotStore, sha256: str) -> dict[str, bytes]:
    """Every document of a stored bundle, by name, each checked against its own hash."""
    documents = {}
    for document in bundle_documents(store, sha256):
        path = store.path_for(document.sha256)
        if not path.exists():
            raise BundleError(f"bundle {sha256[:12]}: document {document.name} ({document.url}) is missing "
                              f"from the snapshot store ({document.sha256[:12]})")
        try:
            content = store.read(document.sha256)
        except SnapshotCorrupted as error:
            raise BundleError(f"bundle {sha256[:12]}: document {document.name}: {error}") from error
        documents[document.name] = content
    return documents


def sha256_of(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()
