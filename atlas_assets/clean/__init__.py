"""The cleaning chain (issue 3): raw_scores + registry -> modeled_observations, in DuckDB SQL."""

from atlas_assets.clean.chain import (
    STAGE_BY_NAME,
    STAGE_NAMES,
    STAGES,
    Stage,
    StageCounts,
    bind_config,
    ensure_ledger,
    record_history,
    run_chain,
    run_stage,
    stage_counts,
)
from atlas_assets.clean.config import CleaningConfig, load_config

__all__ = [
    "STAGES",
    "STAGE_BY_NAME",
    "STAGE_NAMES",
    "CleaningConfig",
    "Stage",
    "StageCounts",
    "bind_config",
    "ensure_ledger",
    "load_config",
    "record_history",
    "run_chain",
    "run_stage",
    "stage_counts",
]
