"""Fingerprints: what a published number depends on.

The specification fingerprint covers everything that shapes a published number, in
named parts: the SQL stages, the Stan programs, the package's configuration (with
the model configuration actually in use), the package's Python code by subpackage
(ingest, registry, cleaning, model and any later stage; the code that only checks or
wires assets is left out: it gates numbers, it does not shape them), and the versions
of the installed libraries that compute them. The data hash is the sha256 of the
modeled observations in a canonical order. A fit is named by both, so an unchanged
input and specification reuses the fit, any change refits, and `changed_files`
says which parts and files moved since an earlier manifest.

Two scopes: "fit" (what shapes the posterior; fit folders are named and checked by it) and
"publication" (that plus the stages downstream of the posterior: outputs, validation,
publish). Downstream stages recompute from a fit on every run, so a report or metric change
moves the publication's fingerprint without forcing an eight-minute refit.
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path

import pandas as pd

from atlas_assets import settings

# Libraries whose version can move a number: the engines, the numerics, the tables.
NUMERIC_DISTRIBUTIONS = (
    "numpy", "scipy", "pandas", "duckdb", "pystan", "httpstan", "cmdstanpy", "arviz", "xarray", "pyyaml",
)
# Package code that checks or wires but computes nothing published.
# (config_schema.py only accepts or refuses a config, whose values are fingerprinted as config; the asset
# wiring in defs/ runs the stages' code, which is fingerprinted; spec, settings and storage name, place and
# write, they do not compute.)
NOT_SPECIFICATION = ("defs/*", "defs/*/*", "quality/*", "definitions.py", "resources.py", "model/cmdstan_setup.py",
                     "config_schema.py", "spec.py", "settings.py", "storage.py")
# Stages downstream of the posterior: they recompute from a fit on every run, so they are part of what a
# publication depends on but not of the fit's own specification (a report change must not force a refit).
DOWNSTREAM_CODE = ("outputs_code", "validation_code", "publish_code")
DOWNSTREAM_CONFIG = ("outputs.yaml", "validation.yaml", "publish.yaml")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _code_files(package_root: Path) -> dict[str, list[Path]]:
    """Package Python files grouped into `<subpackage>_code` parts (top-level modules: `package_code`)."""
    parts: dict[str, list[Path]] = {}
    for path in sorted(package_root.rglob("*.py")):
        relative = path.relative_to(package_root)
        if "__pycache__" in relative.parts or any(relative.match(pattern) for pattern in NOT_SPECIFICATION):
            continue
        part = f"{relative.parts[0]}_code" if len(relative.parts) > 1 else "package_code"
        parts.setdefault(part, []).append(path)
    return parts


def specification_manifest(
    project_root: Path | None = None, package_root: Path | None = None, model_config: Path | None = None,
    scope: str = "fit",
) -> dict[str, dict[str, str]]:
    """part -> {file (relative to the project) or distribution -> sha256 or version}. `scope` "fit": what shapes
    the posterior (fit folders are named and checked by it); "publication": that plus the downstream stages."""
    if scope not in ("fit", "publication"):
        raise ValueError(f"unknown specification scope {scope!r} (fit | publication)")
    project_root = Path(project_root or settings.PROJECT_ROOT)
    package_root = Path(package_root or settings.PACKAGE_ROOT)
    model_config = Path(model_config or settings.model_config_path())
    config_files = [p for p in sorted((package_root / "config").glob("*.yaml"))
                    if p.name not in ("model.yaml", "validation.yaml")
                    and (scope == "publication" or p.name not in DOWNSTREAM_CONFIG)]
    validation_config = settings.validation_config_path() if package_root == settings.PACKAGE_ROOT \
        else package_root / "config" / "validation.yaml"
    if scope == "publication" and validation_config.exists():
        config_files.append(validation_config)
    files: dict[str, list[Path]] = {
        "sql": sorted((project_root / "sql").glob("*.sql")),
        "stan": sorted((project_root / "stan").glob("*.stan")),
        "config": [*config_files, model_config],
        **{part: paths for part, paths in _code_files(package_root).items()
           if scope == "publication" or part not in DOWNSTREAM_CODE},
    }

    def label(path: Path) -> str:
        if path == model_config:
            return "model_config"  # whichever file is in use, under one name
        if path == validation_config:
            return "validation_config"
        try:
            return str(path.relative_to(project_root))
        except ValueError:
            return str(path)

    manifest = {part: {label(p): _sha(p.read_bytes()) for p in paths} for part, paths in files.items()}
    manifest["dependencies"] = {name: _version(name) for name in NUMERIC_DISTRIBUTIONS}
    return manifest


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def manifest_fingerprint(manifest: dict[str, dict[str, str]]) -> str:
    return _sha(json.dumps(manifest, sort_keys=True).encode())


def specification_fingerprint(scope: str = "fit") -> str:
    return manifest_fingerprint(specification_manifest(scope=scope))


def changed_files(old: dict[str, dict[str, str]] | None, new: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """part -> files (or distributions) added, removed or changed from `old` to `new`; {} when identical."""
    if old is None:
        return {"(no earlier manifest)": []}
    out: dict[str, list[str]] = {}
    for part in sorted(set(old) | set(new)):
        before, after = old.get(part, {}), new.get(part, {})
        moved = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        if moved:
            out[part] = moved
    return out


def frame_hash(frame: pd.DataFrame, order_by: list[str]) -> str:
    """sha256 of a frame's CSV rendering, rows sorted by `order_by`, columns in their given order."""
    canonical = frame.sort_values(order_by, kind="mergesort").reset_index(drop=True)
    return hashlib.sha256(canonical.to_csv(index=False, float_format="%.12g").encode()).hexdigest()
