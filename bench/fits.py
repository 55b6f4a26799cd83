"""Which fit a bench reads when none is named: the newest passing fit folder under ATLAS_HOME."""

from __future__ import annotations

from pathlib import Path

from atlas_assets import settings


def latest_passing_fit() -> Path:
    fits = [p for p in (settings.atlas_home() / "model" / "fits").glob("*")
            if p.is_dir() and not p.name.endswith((".failed", ".partial")) and (p / "fit_summary.json").exists()]
    if not fits:
        raise SystemExit("no passing fit under ATLAS_HOME/model/fits: run `make run` first or pass --fit-dir")
    return max(fits, key=lambda p: (p / "fit_summary.json").stat().st_mtime)
