"""Where validation_job's steps run: in the run's own process (the default), or on Celery workers when
ATLAS_VALIDATION_EXECUTOR=celery (dagster-celery; broker, backend and Celery settings in
deploy/celery/celery.yaml, which the workers start from too). Each validation run is one partition, one
step: a backfill puts one step per fold on the broker, and each worker that listens takes the next one."""

from __future__ import annotations

import os

import dagster as dg
import yaml

from atlas_assets import settings

EXECUTOR_VARIABLE = "ATLAS_VALIDATION_EXECUTOR"
CELERY_CONFIG = settings.PROJECT_ROOT / "deploy" / "celery" / "celery.yaml"
CHOICES = ("in_process", "celery")


def celery_config(path=CELERY_CONFIG) -> dict:
    """The executor block (`execution: config:`) of the Celery file the workers also start from."""
    parsed = yaml.safe_load(path.read_text()) or {}
    config = (parsed.get("execution") or {}).get("config")
    if not isinstance(config, dict):
        raise ValueError(f"{path}: no `execution: config:` block for the Celery executor")
    return config


def validation_executor() -> dg.ExecutorDefinition | None:
    """The executor chosen by ATLAS_VALIDATION_EXECUTOR; None keeps the Definitions' default (in process)."""
    choice = os.environ.get(EXECUTOR_VARIABLE, "").strip() or "in_process"
    if choice not in CHOICES:
        raise ValueError(f"{EXECUTOR_VARIABLE}={choice!r}: expected one of {', '.join(CHOICES)}")
    if choice == "in_process":
        return None
    from dagster_celery import celery_executor

    return celery_executor.configured(celery_config(), name="celery")
