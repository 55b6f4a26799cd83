"""The cost configuration (atlas_assets/config/cost.yaml), validated against config_schema.CostFile; a workload
that names a benchmark the registry does not define is an error naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from atlas_assets.settings import CONFIG_DIR, PROJECT_ROOT

COST_CONFIG = CONFIG_DIR / "cost.yaml"


class CostConfigError(ValueError):
    pass


def load_cost_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> dict:
    from atlas_assets.config_schema import CostFile, load_validated
    from atlas_assets.registry.benchmarks import load_benchmark_registry

    path = Path(path) if path else COST_CONFIG
    cfg = load_validated(path, CostFile, overrides)
    known = set(load_benchmark_registry().benchmarks["benchmark"])
    for workload, benchmarks in cfg["outputs"]["workloads"].items():
        unknown = [b for b in benchmarks if b not in known]
        if unknown:
            raise CostConfigError(f"{path}: outputs.workloads.{workload}: benchmarks {unknown} are not in the "
                                  "benchmark registry (config/benchmarks.yaml)")
    return cfg


def cost_stan_file(cfg: Mapping[str, Any]) -> Path:
    path = Path(cfg["stan_file"])
    return path if path.is_absolute() else PROJECT_ROOT / path
