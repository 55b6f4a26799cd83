"""Great Expectations 1.x suites run against a DataFrame, reported as a Dagster check result.

`dagster-ge` still pins GX < 1, so this module is the small adapter between the two:
the check builds a list of `Expectation` specs (cheap, no GX import), `validate_frame`
runs them in an ephemeral GX context and turns the result into an `AssetCheckResult`
whose metadata lists every expectation with its unexpected count and examples.
GX is imported lazily: importing it costs several seconds.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
import pandas as pd

_context_counter = itertools.count()


@dataclass(frozen=True)
class Expectation:
    """One GX expectation by class name, e.g. Expectation("ExpectColumnValuesToNotBeNull", column="row_key")."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __init__(self, name: str, **kwargs: Any) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "kwargs", kwargs)

    def label(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"{self.name}({args})"


def _gx_context():
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return gx, context


def run_suite(frame: pd.DataFrame, expectations: list[Expectation], suite_name: str) -> list[dict[str, Any]]:
    """Run the expectations on the frame; one dict per expectation with success and what failed."""
    gx, context = _gx_context()
    run_id = next(_context_counter)
    source = context.data_sources.add_pandas(f"atlas_{run_id}")
    batch = source.add_dataframe_asset(suite_name).add_batch_definition_whole_dataframe("whole_table")
    suite = context.suites.add(gx.ExpectationSuite(name=suite_name))
    for spec in expectations:
        suite.add_expectation(getattr(gx.expectations, spec.name)(**spec.kwargs))
    validation = context.validation_definitions.add(
        gx.ValidationDefinition(name=f"{suite_name}_{run_id}", data=batch, suite=suite)
    )
    result = validation.run(batch_parameters={"dataframe": frame})
    outcomes = []
    for spec, item in zip(expectations, result.results, strict=True):
        details = item.result or {}
        examples = details.get("partial_unexpected_list") or details.get("observed_value")
        outcomes.append(
            {
                "expectation": spec.label(),
                "success": bool(item.success),
                "unexpected_count": details.get("unexpected_count"),
                "examples": repr(examples)[:300] if examples is not None else None,
                "error": (item.exception_info or {}).get("exception_message") if not item.success else None,
            }
        )
    return outcomes


def _failure(outcome: dict[str, Any]) -> str:
    if outcome["unexpected_count"] is None:  # table-level expectation (row count): the observed value
        return f"{outcome['expectation']}: observed {outcome['examples']}"
    return f"{outcome['expectation']}: {outcome['unexpected_count']} unexpected, e.g. {outcome['examples']}"


def validate_frame(
    frame: pd.DataFrame,
    expectations: list[Expectation],
    *,
    suite_name: str,
    asset_key: dg.AssetKey | None = None,
    check_name: str | None = None,
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
) -> dg.AssetCheckResult:
    """Run a GX suite on `frame` and report it as one Dagster check result."""
    outcomes = run_suite(frame, expectations, suite_name)
    failed = [o for o in outcomes if not o["success"]]
    table = dg.MetadataValue.md(pd.DataFrame(outcomes).to_markdown(index=False))
    return dg.AssetCheckResult(
        passed=not failed,
        severity=severity,
        asset_key=asset_key,
        check_name=check_name,
        metadata={
            "rows": len(frame),
            "expectations": len(outcomes),
            "failed_expectations": len(failed),
            "results": table,
            "failures": "; ".join(_failure(o) for o in failed) or "none",
        },
    )
