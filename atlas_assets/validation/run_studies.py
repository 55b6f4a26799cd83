"""Run every validation fold, then the publish job, on the project's Dagster instance (what `make run` does
after `atlas_job`; the UI does the same with a backfill of `validation_job` and a launch of `publish_job`).

    python -m atlas_assets.validation.run_studies [--folds forward,masked_0] [--no-publish]

Each fold is one run of `validation_job` for its partition, recorded on the instance like a UI launch
(DAGSTER_HOME), executed in this process one after another: the machine has two cores and every refit
already uses one per chain pair. Exit status 1 when a fold or the publish job fails.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv=None) -> int:
    import dagster as dg

    from atlas_assets.definitions import defs
    from atlas_assets.validation.config import load_validation_config
    from atlas_assets.validation.splits import fold_keys

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folds", default=None, help="comma-separated partition keys (default: every fold)")
    parser.add_argument("--no-publish", action="store_true", help="run the folds only")
    args = parser.parse_args(argv)
    keys = args.folds.split(",") if args.folds else fold_keys(load_validation_config())
    failed = []
    with dg.DagsterInstance.get() as instance:
        job = defs.resolve_job_def("validation_job")
        for key in keys:
            t0 = time.perf_counter()
            result = job.execute_in_process(partition_key=key, instance=instance, raise_on_error=False)
            print(f"validation fold {key}: {'ok' if result.success else 'FAILED'} in {time.perf_counter() - t0:.0f} s",
                  flush=True)
            if not result.success:
                failed.append(key)
        if not args.no_publish:
            result = defs.resolve_job_def("publish_job").execute_in_process(instance=instance, raise_on_error=False)
            print(f"publish_job: {'ok' if result.success else 'FAILED'}", flush=True)
            if not result.success:
                failed.append("publish_job")
    if failed:
        print(f"failed: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
