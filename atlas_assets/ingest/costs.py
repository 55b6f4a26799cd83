"""One reported cost of one record -> a raw_costs row in US dollars per task, or an audit row.

Kept apart from the score parsing (tabular.py) on purpose: it shapes only the cost model's input, so it
is fingerprinted with the cost model (spec.py part `cost_code`), and a change here does not force the
capability refit.

Units (registry_columns.cost_unit): `usd_per_task` is taken as published; `usd_per_run` is divided by the
run's task count, the record's `tasks_column` when the registry names one, else the benchmark's registered
item count. A `usd_per_task` column with `run_total_when` holds whole-run totals on the rows where that
column is filled (a publisher pasting totals into a per-task column), converted like `usd_per_run`.
0 means "not reported" at every source seen so far, never "free": it is audited, as is a negative value or
a whole-run value without a task count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from atlas_assets.ingest.records import ParseOutput, blank_to_none


def _named(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def cost_row(out: ParseOutput, record: Mapping[str, Any], column, shared: dict, items: dict, number,
             where: str) -> dict | None:
    """One cost row in USD per task, or None (blank; or audited: 0 means 'not reported', not free)."""
    value = number(column.column)
    if value is None:
        return None
    value *= float(column.scale)
    if value <= 0:
        reason = "zero_cost_unknown" if value == 0 else "negative_cost"
        out.flag(reason, f"{where} field {column.column!r}: cost {value!r} is not a cost (0 = not reported)",
                 file=shared["file"], row_number=shared["row_number"], field_name=column.column, value=value)
        return None
    unit = column.cost_unit
    run_total_when = _named(getattr(column, "run_total_when", None))
    if unit == "usd_per_task" and run_total_when and blank_to_none(record.get(run_total_when)) is not None:
        unit = "usd_per_run"  # this row carries the whole run's total (registry: run_total_when)
    tasks = None
    if unit == "usd_per_run":
        tasks_column = _named(column.tasks_column)
        tasks = number(tasks_column) if tasks_column else None
        if tasks is None and not tasks_column:
            registered_items = items.get(column.benchmark)
            tasks = None if registered_items is None or pd.isna(registered_items) else float(registered_items)
        if tasks is None or tasks <= 0:
            out.flag("cost_without_task_count",
                     f"{where} field {column.column!r}: a whole-run cost with no task count "
                     f"({tasks_column or 'registered items of ' + column.benchmark}); not converted",
                     file=shared["file"], row_number=shared["row_number"], field_name=column.column, value=value)
            return None
    return {
        "row_key": f"{shared['source']}/{shared['file']}#{shared['row_number']}/{column.benchmark}/cost:{column.column}",
        "source": shared["source"], "source_class": shared["source_class"], "snapshot_sha256": out.snapshot_sha256,
        "file": shared["file"], "row_number": shared["row_number"], "model_id": shared["model_id"],
        "model_name": shared["model_name"], "benchmark": column.benchmark, "cost_column": column.column,
        "cost_unit": unit, "reported_value": value, "tasks": tasks,
        "usd_per_task": value / tasks if tasks else value, "harness": shared["harness"],
        "sampling_protocol": shared["sampling_protocol"], "evaluated_on": shared["evaluated_on"],
    }
