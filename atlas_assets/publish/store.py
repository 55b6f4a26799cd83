"""Publications on disk: versioned folders written atomically, one pointer switched last, never deleted.

    ATLAS_HOME/publications/
        CURRENT                              the name of the current version (one line), replaced atomically
        20261201T103000Z-03061bc7-519debe8/  one version: <UTC time>-<data[:8]>-<spec[:8]>
            manifest.json                    sha256, bytes and rows of every file; stamps; created_at
            methodology.json
            state_scores.csv, state_scores.parquet, ... (every artifact in both formats)
            report -> report-<sha12>/        the report built from this version (symlink, switched atomically)
        .staging-<uuid>/                     a version being written (removed on failure, never pointed to)
        .lock                                one publisher at a time (flock)

Publishing writes every file into a staging folder, fsyncs files and folder, renames the folder to
its version name, and only then replaces CURRENT (write a temporary file, fsync, `os.replace`,
fsync the folder). A failure at any point before that replace leaves CURRENT and every earlier
version exactly as they were (the staging or not-yet-pointed-to folder is removed). Versions are
never deleted or changed; the report beside a version's files is derived from them and may be
rebuilt (it is outside the manifest).

Publishing content identical to an existing version (the same CSV and JSON files byte for byte:
`content_sha256` in the manifest) creates no new version: CURRENT is pointed at that version (it
usually already is). Parquet files are renderings of the same frames and left out of that digest.
Only a version that still verifies against its manifest is reused; one changed on disk since is left
as it is (the checks report it) and the content is published again as a new version.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import duckdb
import numpy as np
import pandas as pd

from atlas_assets import settings
from atlas_assets.publish.artifacts import METHODOLOGY, STAMP_COLUMNS, Publication

MANIFEST = "manifest.json"
POINTER = "CURRENT"
LOCK = ".lock"
STAGING_PREFIX = ".staging-"
REPORT_LINK = "report"
REPORT_PREFIX = "report-"
MANIFEST_FORMAT = 1


class NoPublication(RuntimeError):
    pass


def publications_root() -> Path:
    return settings.atlas_home() / "publications"


@dataclass(frozen=True)
class PublishOutcome:
    name: str
    folder: Path
    created: bool           # False: identical content already published as `name`
    pointer_moved: bool     # False: CURRENT already named it
    previous: str | None
    manifest: dict[str, Any]


# ------------------------------------------------------------------------------------------ file helpers


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fsync_file(path: Path) -> None:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _record(path: Path, artifact: str, fmt: str, rows: int | None) -> dict[str, Any]:
    fsync_file(path)
    return {"artifact": artifact, "format": fmt, "rows": rows, "bytes": path.stat().st_size, "sha256": sha256_file(path)}


def _parquet_ready(frame: pd.DataFrame) -> pd.DataFrame:
    """Object columns mixing Python types (None beside str, a date beside NaN) as text, which DuckDB
    can type; every other column as it is."""
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype == object:
            kinds = {type(v) for v in frame[column] if v is not None and not (isinstance(v, float) and np.isnan(v))}
            if len(kinds) > 1 or (kinds and not kinds <= {str, bool, int, float}):
                frame[column] = frame[column].map(
                    lambda v: None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v))
    return frame


def write_table_files(frame: pd.DataFrame, folder: Path, name: str,
                      conn: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """`name`.csv (pandas) and `name`.parquet (DuckDB COPY through `conn`, an in-memory connection;
    pyarrow is not a dependency), fsync'd; file name -> its manifest record."""
    csv_path, parquet_path = folder / f"{name}.csv", folder / f"{name}.parquet"
    frame.to_csv(csv_path, index=False)
    conn.register("artifact_frame", _parquet_ready(frame))
    try:
        conn.execute(f"COPY artifact_frame TO '{parquet_path}' (FORMAT PARQUET)")
    finally:
        conn.unregister("artifact_frame")
    return {csv_path.name: _record(csv_path, name, "csv", len(frame)),
            parquet_path.name: _record(parquet_path, name, "parquet", len(frame))}


def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return None if np.isnan(value) else float(value)
    if isinstance(value, (np.ndarray,)):
        return value.tolist()
    if isinstance(value, (pd.Timestamp, datetime)):
        return value.isoformat()
    return str(value)


def write_json_file(document: dict[str, Any], folder: Path, name: str) -> dict[str, dict[str, Any]]:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(document, indent=1, sort_keys=True, default=_json_default, allow_nan=False) + "\n")
    return {path.name: _record(path, name, "json", None)}


def content_digest(files: dict[str, dict[str, Any]]) -> str:
    """sha256 over the CSV and JSON files' hashes: what 'the same publication' means."""
    canonical = {name: record["sha256"] for name, record in files.items() if record["format"] in ("csv", "json")}
    return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()


# ------------------------------------------------------------------------------------------ reading


def read_manifest(folder: Path) -> dict[str, Any]:
    return json.loads((Path(folder) / MANIFEST).read_text())


def current_name(root: Path | None = None) -> str | None:
    path = Path(root or publications_root()) / POINTER
    if not path.exists():
        return None
    name = path.read_text().strip()
    return name or None


def current_folder(root: Path | None = None) -> Path:
    root = Path(root or publications_root())
    name = current_name(root)
    if name is None:
        raise NoPublication(f"nothing published yet: {root / POINTER} does not exist")
    folder = root / name
    if not (folder / MANIFEST).exists():
        raise NoPublication(f"{root / POINTER} names {name}, which has no {MANIFEST}")
    return folder


def list_versions(root: Path | None = None) -> list[str]:
    root = Path(root or publications_root())
    if not root.exists():
        return []
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and (p / MANIFEST).exists())


def _is_beside_manifest(name: str) -> bool:
    """Entries of a version folder outside its manifest by design: the manifest itself and the report."""
    return name == MANIFEST or name == REPORT_LINK or name.startswith(REPORT_PREFIX) or name.startswith(".report-")


def verify_publication(folder: Path, *, hashes: bool = True) -> list[str]:
    """Problems with one version ([] when none): every manifest file present with its bytes and sha256,
    nothing unlisted, and every table and the methodology stamped with the manifest's stamps and rows.
    With hashes=False only presence and sizes (cheap, for every earlier version)."""
    folder = Path(folder)
    try:
        manifest = read_manifest(folder)
    except (OSError, ValueError) as error:
        return [f"{folder.name}: {MANIFEST} unreadable ({error})"]
    problems = []
    if manifest.get("name") != folder.name:
        problems.append(f"{folder.name}: manifest names {manifest.get('name')!r}")
    files = manifest.get("files", {})
    for name, record in sorted(files.items()):
        path = folder / name
        if not path.is_file():
            problems.append(f"{folder.name}/{name}: missing")
        elif path.stat().st_size != record["bytes"]:
            problems.append(f"{folder.name}/{name}: {path.stat().st_size} bytes, the manifest says {record['bytes']}")
        elif hashes and sha256_file(path) != record["sha256"]:
            problems.append(f"{folder.name}/{name}: sha256 differs from the manifest (changed after publication)")
    unlisted = sorted(p.name for p in folder.iterdir() if p.name not in files and not _is_beside_manifest(p.name))
    if unlisted:
        problems.append(f"{folder.name}: files not in the manifest: {unlisted}")
    if hashes and not problems:
        problems += _stamp_problems(folder, manifest)
    return problems


def _stamp_problems(folder: Path, manifest: dict[str, Any]) -> list[str]:
    stamps = manifest.get("stamps") or {}
    expected = tuple(stamps.get(c) for c in STAMP_COLUMNS)
    problems = []
    conn = duckdb.connect()
    try:
        for name, record in sorted(manifest["files"].items()):
            path = str(folder / name)
            if record["format"] == "json":
                document = json.loads(Path(path).read_text())
                if document.get("stamps") != stamps:
                    problems.append(f"{folder.name}/{name}: stamps {document.get('stamps')} differ from the manifest's")
                continue
            source = (f"read_csv('{path}', header = true, all_varchar = true)" if record["format"] == "csv"
                      else f"read_parquet('{path}')")
            columns = [row[0] for row in conn.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()]
            if not set(STAMP_COLUMNS) <= set(columns):
                problems.append(f"{folder.name}/{name}: lacks the stamp columns {list(STAMP_COLUMNS)}")
                continue
            rows = conn.execute(f"SELECT count(*) FROM {source}").fetchone()[0]
            if rows != record["rows"]:
                problems.append(f"{folder.name}/{name}: {rows} rows, the manifest says {record['rows']}")
            found = conn.execute(f"SELECT DISTINCT fit, data_sha256, spec_sha256 FROM {source}").fetchall()
            wrong = [tuple(row) for row in found if tuple(row) != expected]
            if wrong:
                problems.append(f"{folder.name}/{name}: rows stamped {wrong[:3]}, the manifest says {expected}")
    finally:
        conn.close()
    return problems


# ------------------------------------------------------------------------------------------ writing


@contextlib.contextmanager
def publisher_lock(root: Path):
    """One publisher (or report installer) at a time; also makes leftovers of a crash safe to remove."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _switch_pointer(root: Path, name: str) -> None:
    """CURRENT := name, atomically: readers see the old name or the new one, never a mix."""
    temporary = root / f".{POINTER}.{uuid.uuid4().hex}"
    with open(temporary, "w") as handle:
        handle.write(name + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.replace(temporary, root / POINTER)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _version_name(root: Path, stamps: dict[str, str], created: datetime) -> str:
    base = f"{created:%Y%m%dT%H%M%SZ}-{stamps['data_sha256'][:8]}-{stamps['spec_sha256'][:8]}"
    name, n = base, 1
    while (root / name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def _version_with_content(root: Path, digest: str) -> str | None:
    """The newest intact version holding exactly this content, if any."""
    for name in reversed(list_versions(root)):
        try:
            same = read_manifest(root / name).get("content_sha256") == digest
        except (OSError, ValueError):
            continue
        if same and not verify_publication(root / name):
            return name
    return None


def publish(publication: Publication, root: Path | None = None) -> PublishOutcome:
    """Write `publication` as a new version and make it current (see the module docstring)."""
    root = Path(root or publications_root())
    with publisher_lock(root):
        for leftover in root.glob(f"{STAGING_PREFIX}*"):
            shutil.rmtree(leftover, ignore_errors=True)  # a crashed publisher's; we hold the lock
        previous = current_name(root)
        staging = root / f"{STAGING_PREFIX}{uuid.uuid4().hex}"
        staging.mkdir()
        final: Path | None = None
        switched = False
        try:
            files: dict[str, dict[str, Any]] = {}
            with duckdb.connect() as conn:  # one in-memory connection: opening one costs ~40 ms
                for name, item in publication.tables.items():
                    files.update(write_table_files(item.frame, staging, name, conn))
            files.update(write_json_file(publication.methodology, staging, METHODOLOGY))
            digest = content_digest(files)

            existing = _version_with_content(root, digest)
            if existing is not None:
                if existing != previous:
                    _switch_pointer(root, existing)
                    fsync_dir(root)
                return PublishOutcome(existing, root / existing, False, existing != previous, previous,
                                      read_manifest(root / existing))

            created = datetime.now(timezone.utc).replace(microsecond=0)
            name = _version_name(root, publication.stamps.as_dict(), created)
            manifest = {
                "format": MANIFEST_FORMAT,
                "name": name,
                "created_at": created.isoformat(),
                "stamps": publication.stamps.as_dict(),
                "content_sha256": digest,
                "previous": previous,
                "notes": publication.notes,
                "artifacts": {a: {"rows": item.frame.shape[0], "files": [f"{a}.csv", f"{a}.parquet"], "note": item.note}
                              for a, item in publication.tables.items()},
                "files": files,
            }
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
            fsync_file(staging / MANIFEST)
            for path in staging.iterdir():
                path.chmod(0o444)  # published files are never changed (the folder stays open for the report)
            fsync_dir(staging)
            final = root / name
            os.rename(staging, final)
            fsync_dir(root)
            _switch_pointer(root, name)
            switched = True
            fsync_dir(root)
            return PublishOutcome(name, final, True, True, previous, manifest)
        except BaseException:
            if final is not None and not switched:
                shutil.rmtree(final, ignore_errors=True)  # never pointed to: not a publication
            raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)


# ------------------------------------------------------------------------------------------ report


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + sha256_file(path).encode())
    return digest.hexdigest()


def install_report(version: Path, build: Callable[[Path], Any]) -> tuple[Path, Any]:
    """Build a report into a staging folder beside `version`'s files, then switch the `report` symlink to
    it atomically; earlier reports of the version are removed after the switch. Returns (the report
    folder as reached through the link, what `build` returned)."""
    version = Path(version)
    with publisher_lock(version.parent):
        for leftover in version.glob(".report-*"):  # a crashed build's staging folder or link
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
        staging = version / f".report-staging-{uuid.uuid4().hex}"
        staging.mkdir()
        try:
            result = build(staging)
            for path in staging.rglob("*"):
                if path.is_file():
                    fsync_file(path)
            fsync_dir(staging)
            target = version / f"{REPORT_PREFIX}{_tree_digest(staging)[:12]}"
            if target.exists():
                shutil.rmtree(staging)  # the same report is already built
            else:
                os.rename(staging, target)
            link = version / f".report-link-{uuid.uuid4().hex}"
            os.symlink(target.name, link)
            os.replace(link, version / REPORT_LINK)
            fsync_dir(version)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        for old in version.glob(f"{REPORT_PREFIX}*"):
            if old != target:
                shutil.rmtree(old, ignore_errors=True)
    return version / REPORT_LINK, result
