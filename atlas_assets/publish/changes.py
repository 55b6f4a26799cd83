"""The method change log, CHANGES.md at the project root: append-only, one entry per method version.

An entry starts with a heading `## <version> · <YYYY-MM-DD> · <title>` and holds what changed and its
measured effect on the real data (`python -m atlas_assets.publish.compare_publications OLD NEW` prints it).
Entries are appended in date order and never rewritten; the last one is the method version in force, and
the publication's methodology.json carries it (`artifacts.method_version_record`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from atlas_assets import settings

CHANGE_LOG = settings.PROJECT_ROOT / "CHANGES.md"
HEADING = re.compile(r"^## (?P<version>\S+) · (?P<date>\d{4}-\d{2}-\d{2}) · (?P<title>.+?)\s*$")


class ChangeLogError(ValueError):
    pass


@dataclass(frozen=True)
class Entry:
    version: str
    date: str
    title: str
    line: int
    body: str


def read_entries(path: Path | None = None) -> list[Entry]:
    """Every entry, oldest first; ChangeLogError (file and line) on a malformed, repeated or out-of-order entry."""
    path = Path(path or CHANGE_LOG)
    if not path.exists():
        raise ChangeLogError(f"{path}: the method change log does not exist")
    entries: list[Entry] = []
    lines = path.read_text().splitlines()
    starts = [i for i, text in enumerate(lines) if text.startswith("## ")]
    for n, i in enumerate(starts):
        match = HEADING.match(lines[i])
        if not match:
            raise ChangeLogError(f"{path}, line {i + 1}: an entry heading must read '## <version> · <YYYY-MM-DD> · <title>'")
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        entry = Entry(match["version"], match["date"], match["title"], i + 1, "\n".join(lines[i + 1:end]).strip())
        if any(e.version == entry.version for e in entries):
            raise ChangeLogError(f"{path}, line {i + 1}: version {entry.version} appears twice")
        if entries and entry.date < entries[-1].date:
            raise ChangeLogError(f"{path}, line {i + 1}: {entry.version} ({entry.date}) is dated before the entry above "
                                 f"it ({entries[-1].date}); entries are appended, newest last")
        if "Effect" not in entry.body:
            raise ChangeLogError(f"{path}, line {i + 1}: entry {entry.version} states no measured effect ('Effect')")
        entries.append(entry)
    if not entries:
        raise ChangeLogError(f"{path}: no entries")
    return entries


def newest_entry(path: Path | None = None) -> Entry:
    return read_entries(path)[-1]
