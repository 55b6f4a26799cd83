"""Read a downloaded zip archive safely, in memory.

Refuses what is not a zip (an HTML error page served with status 200 is the usual
case), members whose names would escape the archive (absolute paths, `..`), and archives
whose members or total uncompressed size exceed the caps (zip bombs). A single top-level
folder wrapping every member is stripped so both 'x.csv' and 'benchmark_data/x.csv' read
the same.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import PurePosixPath

MAX_MEMBERS = 2_000
MAX_MEMBER_BYTES = 256 * 1024 * 1024
MAX_TOTAL_BYTES = 1024 * 1024 * 1024


class ArchiveError(ValueError):
    """The archive is unusable; the message names it and says why."""


def _looks_like_html(head: bytes) -> bool:
    sample = head.lstrip()[:512].lower()
    return sample.startswith((b"<!doctype html", b"<html", b"<?xml", b"<head", b"<body"))


def read_zip_members(content: bytes, *, label: str) -> dict[str, bytes]:
    """Map each regular member's normalized name to its bytes."""
    if _looks_like_html(content[:1024]):
        raise ArchiveError(f"{label}: expected a zip archive but received an HTML page (an error or login page?)")
    if not zipfile.is_zipfile(io.BytesIO(content)):
        raise ArchiveError(f"{label}: not a zip archive (first bytes {content[:16]!r}, {len(content)} bytes)")
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
        infos = [info for info in archive.infolist() if not info.is_dir()]
    except (zipfile.BadZipFile, OSError) as error:
        raise ArchiveError(f"{label}: corrupt zip archive: {error}") from error

    if len(infos) > MAX_MEMBERS:
        raise ArchiveError(f"{label}: {len(infos)} members, over the cap of {MAX_MEMBERS}")
    total = sum(info.file_size for info in infos)
    if total > MAX_TOTAL_BYTES:
        raise ArchiveError(f"{label}: {total} bytes uncompressed, over the cap of {MAX_TOTAL_BYTES}")

    names = {}
    for info in infos:
        path = PurePosixPath(info.filename.replace("\\", "/"))
        if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
            raise ArchiveError(f"{label}: member {info.filename!r} would escape the archive")
        if info.file_size > MAX_MEMBER_BYTES:
            raise ArchiveError(f"{label}: member {info.filename!r} is {info.file_size} bytes uncompressed, over the cap")
        if path.parts and path.parts[0] == "__MACOSX":
            continue
        names[info.filename] = path

    # Strip one wrapping folder shared by every member.
    roots = {path.parts[0] for path in names.values() if len(path.parts) > 1}
    if len(roots) == 1 and all(len(path.parts) > 1 for path in names.values()):
        names = {raw: PurePosixPath(*path.parts[1:]) for raw, path in names.items()}

    members: dict[str, bytes] = {}
    for raw_name, path in names.items():
        try:
            with archive.open(raw_name) as handle:
                # Read one byte past the declared size: a lying header cannot inflate us past the cap.
                data = handle.read(MAX_MEMBER_BYTES + 1)
        except (zipfile.BadZipFile, OSError, EOFError) as error:
            raise ArchiveError(f"{label}: member {raw_name!r} is corrupt: {error}") from error
        if len(data) > MAX_MEMBER_BYTES:
            raise ArchiveError(f"{label}: member {raw_name!r} inflates past the cap")
        members[str(path)] = data
    return members
