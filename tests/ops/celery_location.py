"""A small code location for the Celery test: one asset partitioned like the validation folds (the project's own
partition keys) that reports which process and host ran it, in a job on the project's validation executor
(atlas_assets/defs/executors.py: ATLAS_VALIDATION_EXECUTOR picks it, deploy/celery/celery.yaml configures it)."""

import os
import socket

import dagster as dg

from atlas_assets.defs.executors import validation_executor
from atlas_assets.validation.config import load_validation_config
from atlas_assets.validation.splits import fold_keys

# validation_fold's partitions (atlas_assets/defs/validation/assets.py), without importing the stage's assets
fold_partitions = dg.StaticPartitionsDefinition(fold_keys(load_validation_config()))


@dg.asset(partitions_def=fold_partitions)
def fold_probe(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"pid": os.getpid(), "host": socket.gethostname(),
                                          "fold": context.partition_key})


probe_job = dg.define_asset_job("probe_job", selection=[fold_probe], executor_def=validation_executor())

defs = dg.Definitions(assets=[fold_probe], jobs=[probe_job], executor=dg.in_process_executor)
