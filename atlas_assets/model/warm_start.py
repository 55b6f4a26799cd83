"""Which earlier fit, if any, a new capability fit starts from (issue 8: the nightly refit after a data change).

A warm start replaces the pilot fit: the earlier posterior, carried to the new data by name
(precondition.transported_draws), whitens the main fit and gives its chains their inits. The posterior is
the same either way (the affine map has a constant Jacobian), so the rule only decides when an earlier fit
is a good enough guide: it must have passed its gates, and the model itself (the Stan program and
model.yaml) must be the one it was fitted with; data, cleaning and registry changes are what it is for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from atlas_assets.spec import NO_EARLIER_MANIFEST

# specification parts (spec.changed_files) whose change makes an earlier posterior a different model's
MODEL_PARTS = {"stan": None, "config": {"model_config"}}


def model_changes(changes: Mapping[str, list[str]]) -> list[str]:
    """The entries of `changes` (spec.changed_files) that change the model itself; an earlier fit without a
    manifest counts as a different model."""
    if NO_EARLIER_MANIFEST in changes:
        return [NO_EARLIER_MANIFEST]
    out = []
    for part, names in changes.items():
        if part in MODEL_PARTS:
            wanted = MODEL_PARTS[part]
            out += [f"{part}: {name}" for name in names if wanted is None or name in wanted]
    return out


def warm_start_source(previous: Path | None, changes: Mapping[str, list[str]], mode: str,
                      target: Path | None = None) -> tuple[Path | None, str]:
    """(earlier fit folder to start from, or None; the reason, said in the fit's metadata). `target` is the folder
    the new fit will be: a refit of the same inputs and settings (a forced refit, a re-run after a crash) takes the
    cold route, which reproduces the earlier fit byte for byte from the same seed; a warm fit depends on its source
    as well, which its metadata and fit_summary.json name."""
    if mode != "previous_fit":
        return None, "cold: warm starts are off (model.yaml sampler.precondition.warm_start)"
    if previous is None:
        return None, "cold: no earlier fit"
    if target is not None and previous.name == target.name:
        return None, f"cold: same inputs and settings as {previous.name} (the cold route reproduces it)"
    summary_path = previous / "fit_summary.json"
    if not summary_path.exists() or not (previous / "posterior.nc").exists():
        return None, f"cold: the earlier fit {previous.name} is not on disk"
    if json.loads(summary_path.read_text()).get("passes") is not True:
        return None, f"cold: the earlier fit {previous.name} failed its gates"
    if moved := model_changes(changes):
        return None, f"cold: the model changed since {previous.name} ({', '.join(moved)})"
    return previous, f"warm from {previous.name}"
