"""Whether a finished fit may be published: every asset that publishes from a fit asks here first.

A fit folder is publishable when it is complete, every convergence gate recorded in its
diagnostics passed (re-read from the recorded values, not from one `passes` flag), and
it was made under the specification now in force. Otherwise `UnpublishableFit` names the
failing gate (with its value and parameters) or the parts of the specification that
changed, and the caller publishes nothing, so the last good tables stay as they were.
"""

from __future__ import annotations

import json
from pathlib import Path

from atlas_assets.model.diagnostics import failure_reasons

REQUIRED_FILES = ("fit_summary.json", "diagnostics.json", "posterior.nc")
GATE_NAMES = {"rhat": "gate_max_rhat", "ess_bulk": "gate_min_ess_bulk", "ess_tail": "gate_min_ess_tail",
              "divergences": "gate_divergences", "ebfmi": "gate_min_ebfmi"}


class UnpublishableFit(RuntimeError):
    pass


def require_publishable_fit(fit_dir: Path, current_spec_sha256: str | None = None) -> dict:
    """The fit's diagnostics when it may be published; raises UnpublishableFit otherwise."""
    fit_dir = Path(fit_dir)
    missing = [name for name in REQUIRED_FILES if not (fit_dir / name).exists()]
    if missing:
        raise UnpublishableFit(f"fit {fit_dir} is incomplete (missing {missing}): nothing published")
    diagnostics = json.loads((fit_dir / "diagnostics.json").read_text())
    checks = diagnostics.get("checks") or {}
    failing = failure_reasons(diagnostics)
    failing.update({gate: "not evaluated" for gate in GATE_NAMES if gate not in checks})
    if failing or diagnostics.get("passes") is not True:
        detail = "; ".join(f"{GATE_NAMES.get(gate, gate)} failed: {why}" for gate, why in failing.items())
        raise UnpublishableFit(
            f"fit {fit_dir.name} failed its convergence gates ({detail or 'passes is not true'}): "
            "nothing published, the last good tables stay in place")
    if current_spec_sha256 is not None:
        fingerprint = _read_json(fit_dir / "fingerprint.json")
        made_under = fingerprint.get("spec_sha256")
        if made_under != current_spec_sha256:
            raise UnpublishableFit(
                f"fit {fit_dir.name} was made under specification {str(made_under)[:16]}, the code and configuration "
                f"now in force are {current_spec_sha256[:16]}: materialize stan_data and capability_fit first "
                "(nothing published)")
    return diagnostics


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}
