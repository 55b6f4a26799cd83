"""One fit in a Dagster Pipes subprocess into a fit folder, shared by the capability fit and the cost fit.

The fit is written to `<final>.partial`; only a fit that passes its convergence gates takes the final name
(and can be reused by later runs); a failing one is kept as `<final>.failed` for inspection, and nothing
publishes from it.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any, Mapping

import dagster as dg


def _replaced(folder: Path) -> Path:
    return folder.with_name(folder.name + ".replaced")


def install(staging: Path, destination: Path) -> None:
    """Move a finished fit into place. An existing folder of that name is first renamed aside and removed only once
    the new one is in: a process killed between the two steps leaves the old folder recoverable (`restore_replaced`),
    never neither."""
    old = _replaced(destination)
    shutil.rmtree(old, ignore_errors=True)
    if destination.exists():
        destination.rename(old)
    staging.rename(destination)
    shutil.rmtree(old, ignore_errors=True)


def restore_replaced(folder: Path) -> None:
    """A folder set aside by an `install` that was killed before its new folder arrived comes back."""
    old = _replaced(folder)
    if old.exists() and not folder.exists():
        old.rename(folder)


def fit_in_subprocess(context: dg.AssetExecutionContext, pipes_subprocess_client: dg.PipesSubprocessClient, *,
                      module: str, observations_path: Path, final: Path, fingerprint: Mapping[str, Any],
                      specification: str, options: Mapping[str, Any], what: str) -> tuple[dg.MaterializeResult, Path, dict]:
    """Run `python -m <module> --observations ... --out <staging> [--<option> <value> ...]` through Pipes; returns
    (its materialize result, the folder it ended in: `final` or `<final>.failed`, its fit_summary.json)."""
    staging, failed = final.with_name(final.name + ".partial"), final.with_name(final.name + ".failed")
    restore_replaced(final)
    restore_replaced(failed)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    (staging / "fingerprint.json").write_text(json.dumps(dict(fingerprint)))
    (staging / "specification.json").write_text(specification)
    command = [sys.executable, "-m", module, "--observations", str(observations_path), "--out", str(staging)]
    for key, value in options.items():
        command += [f"--{key}", str(value)]
    context.log.info(f"{what} in a subprocess: {' '.join(command)}")
    result = pipes_subprocess_client.run(command=command, context=context).get_materialize_result()
    if not (staging / "fit_summary.json").exists():
        raise dg.Failure(f"the {what} process ended without writing {staging / 'fit_summary.json'}")
    summary = json.loads((staging / "fit_summary.json").read_text())
    destination = final if summary["passes"] is True else failed
    install(staging, destination)
    if destination == failed:
        context.log.warning(f"the {what} FAILED its convergence gates; kept in {failed}, nothing will publish from it")
    return result, destination, summary
