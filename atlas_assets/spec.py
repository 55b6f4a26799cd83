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

Three scopes: "fit" (what shapes the capability posterior; fit folders are named and checked by
it), "cost" (what shapes the cost posterior: the cost parts below, the ingest and registry that
feed it, the engines; cost fit folders are named and checked by it) and "publication" (both plus
the stages downstream of the posteriors: outputs, validation, publish). Downstream stages
recompute from a fit on every run, so a report or metric change moves the publication's
fingerprint without forcing an eight-minute refit; and nothing of the cost model is in the "fit"
scope (sql/08, stan/cost.stan, config/cost.yaml, atlas_assets/cost/, ingest/costs.py, and the
cost columns' entries in config/benchmarks.yaml, which the fit scope hashes with every cost column
read as a plain auxiliary column), so a cost change never forces the capability refit.
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
# The cost model's own parts (scope "cost"; never in scope "fit").
COST_SQL = ("08_cost_observations.sql",)
COST_STAN = ("cost.stan",)
COST_CONFIG = ("cost.yaml",)
COST_CODE = ("cost/*", "ingest/costs.py")  # package files of the part `cost_code`
REGISTRY_YAML = "benchmarks.yaml"
# Fields of a registry column that only the cost model reads.
COST_COLUMN_FIELDS = ("cost_unit", "tasks_column", "run_total_when")
SCOPES = ("fit", "cost", "publication")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _code_files(package_root: Path) -> dict[str, list[Path]]:
    """Package Python files, and the SQL files a stage keeps in its own folder (outputs/sql, publish/sql), grouped
    into `<subpackage>_code` parts (top-level modules: `package_code`)."""
    parts: dict[str, list[Path]] = {}
    for path in sorted([*package_root.rglob("*.py"), *package_root.rglob("*.sql")]):
        relative = path.relative_to(package_root)
        if "__pycache__" in relative.parts or any(relative.match(pattern) for pattern in NOT_SPECIFICATION):
            continue
        if any(relative.match(pattern) for pattern in COST_CODE):
            part = "cost_code"
        else:
            part = f"{relative.parts[0]}_code" if len(relative.parts) > 1 else "package_code"
        parts.setdefault(part, []).append(path)
    return parts


def specification_manifest(
    project_root: Path | None = None, package_root: Path | None = None, model_config: Path | None = None,
    scope: str = "fit",
) -> dict[str, dict[str, str]]:
    """part -> {file (relative to the project) or distribution -> sha256 or version}. `scope` "fit": what shapes
    the capability posterior (fit folders are named and checked by it); "cost": what shapes the cost posterior;
    "publication": both plus the downstream stages."""
    if scope not in SCOPES:
        raise ValueError(f"unknown specification scope {scope!r} ({' | '.join(SCOPES)})")
    project_root = Path(project_root or settings.PROJECT_ROOT)
    package_root = Path(package_root or settings.PACKAGE_ROOT)
    model_config = Path(model_config or settings.model_config_path())
    config_files = [p for p in sorted((package_root / "config").glob("*.yaml"))
                    if p.name not in ("model.yaml", "validation.yaml")
                    and (scope == "publication" or p.name not in DOWNSTREAM_CONFIG)
                    and (scope != "fit" or p.name not in COST_CONFIG)]
    validation_config = settings.validation_config_path() if package_root == settings.PACKAGE_ROOT \
        else package_root / "config" / "validation.yaml"
    if scope == "publication" and validation_config.exists():
        config_files.append(validation_config)
    if scope == "publication":  # frozen reference scales: they set the display units of what is published
        config_files.extend(sorted(settings.reference_scale_dir().glob("*.yaml")))
    stan = sorted((project_root / "stan").glob("*.stan"))
    files: dict[str, list[Path]] = {
        "sql": [p for p in sorted((project_root / "sql").glob("*.sql")) if scope != "fit" or p.name not in COST_SQL],
        "stan": [p for p in stan if p.name in COST_STAN] if scope == "cost" else
                [p for p in stan if scope == "publication" or p.name not in COST_STAN],
        "config": [*config_files, model_config] if scope != "cost" else config_files,
        **{part: paths for part, paths in _code_files(package_root).items()
           if (scope == "publication" or part not in DOWNSTREAM_CODE) and (scope != "fit" or part != "cost_code")},
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

    def digest(path: Path) -> str:
        if scope == "fit" and path.name == REGISTRY_YAML and path.parent == package_root / "config":
            return _registry_without_costs(path)
        return _sha(path.read_bytes())

    manifest = {part: {label(p): digest(p) for p in paths} for part, paths in files.items()}
    manifest["dependencies"] = {name: _version(name) for name in NUMERIC_DISTRIBUTIONS}
    return manifest


def _registry_without_costs(path: Path) -> str:
    """sha256 of the benchmark registry as the capability fit reads it: every cost column as a plain auxiliary
    column (a cost column is read by the cost model only; for the scores it is a known, unused column)."""
    import yaml

    document = yaml.safe_load(path.read_text())
    for files in (document.get("files") or {}).values():
        for entry in (files or {}).values():
            columns = entry.get("columns") if isinstance(entry, dict) else None
            for name, spec in list((columns or {}).items()):
                if isinstance(spec, dict) and spec.get("use") == "cost":
                    columns[name] = {"use": "auxiliary"}
    return _sha(json.dumps(document, sort_keys=True, default=str).encode())


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def manifest_fingerprint(manifest: dict[str, dict[str, str]]) -> str:
    return _sha(json.dumps(manifest, sort_keys=True).encode())


def specification_fingerprint(scope: str = "fit") -> str:
    return manifest_fingerprint(specification_manifest(scope=scope))


# changed_files' single key when there is nothing to compare with
NO_EARLIER_MANIFEST = "(no earlier manifest)"


def changed_files(old: dict[str, dict[str, str]] | None, new: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """part -> files (or distributions) added, removed or changed from `old` to `new`; {} when identical."""
    if old is None:
        return {NO_EARLIER_MANIFEST: []}
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
