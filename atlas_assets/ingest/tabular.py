"""Turn the records of one registered source file into raw_scores rows.

Both parsers end here: the Epoch CSVs hand over their rows, the SWE-bench parser its
result objects. The registry says which fields carry scores (and their scale), which
carry stderr, shots, harness, dates; every field the registry does not know, every
registered field that is missing, and every value that cannot be read becomes an audit
row naming the source, file, row and field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pandas as pd

from atlas_assets.ingest.costs import cost_row
from atlas_assets.ingest.records import ParseOutput, ValueProblem, blank_to_none, parse_date, parse_number, parse_shots

# (record) -> (model_id, model_name, problem); problem is an audit detail when the id can't be had.
Identify = Callable[[Mapping[str, Any]], tuple[str | None, str | None, str | None]]
# (record) -> overrides for raw_scores fields derived by source-specific rules.
Enrich = Callable[[Mapping[str, Any]], dict[str, Any]]


def default_identify(entry: Mapping[str, Any]) -> Identify:
    id_column, name_column = entry.get("model_id_column"), entry.get("model_name_column")

    def identify(record: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
        model_id = blank_to_none(record.get(id_column)) if id_column else None
        model_name = blank_to_none(record.get(name_column)) if name_column else None
        if model_id is None and model_name is not None:
            # Older rows name the model only by its display name; that is then the identifier as published.
            model_id = model_name
        if model_id is None:
            return None, None, f"no model identifier in {id_column!r}" + (f" or {name_column!r}" if name_column else "")
        return model_id, model_name, None

    return identify


def read_records(
    out: ParseOutput,
    registry,
    file: str,
    header: list[str],
    records: Iterable[tuple[int, Mapping[str, Any]]],
    *,
    identify: Identify | None = None,
    enrich: Enrich | None = None,
    key_columns: Iterable[str] | None = None,
) -> None:
    """Rows of one file into `out`. `key_columns` are the fields that say which model a row is
    (default: the registry's model_id_column and model_name_column)."""
    source = out.source
    entry = registry.file_entry(source, file)
    if entry is None:
        out.flag("unregistered_file", f"{source}/{file} is not in the benchmark registry; its scores were not read", file=file)
        return
    registered = registry.columns[(registry.columns["source"] == source) & (registry.columns["file"] == file)]
    known = set(registered["column"])
    if key_columns is None:
        key_columns = [entry.get("model_id_column"), entry.get("model_name_column")]
    keys = [column for column in key_columns if column]
    for column in header:
        if column not in known:
            out.flag("unregistered_column", f"{source}/{file}: column {column!r} is not in the registry (neither used nor ignored)",
                     file=file, field_name=column)
    # as lists of named tuples once per file: itertuples() per record was most of an ingest's time
    score_columns = list(registered[(registered["use"] == "score") & registered["column"].isin(header)].itertuples(index=False))
    cost_columns = list(registered[(registered["use"] == "cost") & registered["column"].isin(header)].itertuples(index=False))
    items = registry.benchmarks.set_index("benchmark")["items"].to_dict()
    unreadable = False
    for column in sorted(known - set(header)):
        detail = f"{source}/{file}: registered column {column!r} is absent (renamed or dropped upstream?)"
        if column in keys:
            # Another column would re-key every row silently (display names as identifiers): the file is
            # unreadable until the registry says how the publisher now names its models.
            out.fail_file("missing_key_column", f"{detail}; it names the model of each row, so the file is not read",
                          file=file, field_name=column)
            unreadable = True
        elif bool(registered.loc[registered["column"] == column, "headline"].any()):
            # Without its headline the file would still land its secondary columns, silently losing the main score.
            out.fail_file("missing_headline_column", f"{detail}; it is the file's headline score, so the file is not read",
                          file=file, field_name=column)
            unreadable = True
        else:
            out.flag("missing_column", detail, file=file, field_name=column)
    if unreadable or not score_columns:
        return
    out.files_read.append(file)

    identify = identify or default_identify(entry)
    harness_columns = list(entry.get("harness_columns") or [])
    # Files that re-publish several kinds of source name the origin per row (e.g. a HELM row in a paper-sourced file).
    class_by_origin = dict(entry.get("source_class_by_origin") or {})

    def text(record: Mapping[str, Any], column: str | None) -> str | None:
        return blank_to_none(record.get(column)) if column else None

    for row_number, record in records:
        model_id, model_name, problem = identify(record)
        if model_id is None:
            out.flag("missing_model_id", f"{source}/{file} row {row_number}: {problem}", file=file, row_number=row_number,
                     field_name=entry.get("model_id_column"))
            continue

        def number(column: str | None, parse=parse_number):
            if not column:
                return None
            try:
                return parse(record.get(column))
            except ValueProblem as problem_value:
                out.flag(problem_value.reason, f"{source}/{file} row {row_number} field {column!r}: {problem_value}; left empty",
                         file=file, row_number=row_number, field_name=column, value=record.get(column))
                return None

        def date(column: str | None):
            return number(column, parse=parse_date)

        harness_parts = [text(record, column) for column in harness_columns]
        shared = {
            "source": source, "source_class": entry["source_class"], "snapshot_sha256": out.snapshot_sha256,
            "file": file, "row_number": row_number, "model_id": model_id, "model_name": model_name,
            "stderr": number(entry.get("stderr_column")), "ci_low": number(entry.get("ci_low_column")),
            "ci_high": number(entry.get("ci_high_column")), "shots": number(entry.get("shots_column"), parse=parse_shots),
            "harness": " | ".join(part.strip() for part in harness_parts if part) or None,
            "sampling_protocol": entry.get("sampling_protocol"),
            "evaluated_on": date(entry.get("evaluated_on_column")), "released_on": date(entry.get("released_on_column")),
            "organization": text(record, entry.get("organization_column")),
            "origin": text(record, entry.get("origin_column")), "origin_url": text(record, entry.get("origin_url_column")),
        }
        if shared["origin"] is not None and shared["origin"].strip() in class_by_origin:
            shared["source_class"] = class_by_origin[shared["origin"].strip()]
        # Who checked the score: the file's class, or its (possibly origin-overridden) source class's default;
        # a source-specific rule in `enrich` (SWE-bench 'checked', tau2-bench's submitter) decides per row.
        shared["verification_class"] = registry.verification_class(entry, shared["source_class"])
        if enrich is not None:
            shared.update(enrich(record))

        for score_column in score_columns:
            raw_value = record.get(score_column.column)
            try:
                value = parse_number(raw_value)
            except ValueProblem as problem_value:
                out.flag("non_numeric_score" if problem_value.reason == "non_numeric_value" else "non_finite_score",
                         f"{source}/{file} row {row_number} field {score_column.column!r}: {problem_value}",
                         file=file, row_number=row_number, field_name=score_column.column, value=raw_value)
                continue
            if value is None:
                if score_column.headline:
                    out.flag("missing_score", f"{source}/{file} row {row_number}: headline {score_column.column!r} is empty",
                             file=file, row_number=row_number, field_name=score_column.column)
                continue
            scale = float(score_column.scale)
            row = dict(shared)
            row.update({
                "row_key": f"{source}/{file}#{row_number}/{score_column.benchmark}",
                "benchmark": score_column.benchmark,
                "score_column": score_column.column,
                "score": value * scale,
            })
            # stderr and CI describe the headline score, in its published units.
            for key in ("stderr", "ci_low", "ci_high"):
                if not score_column.headline:
                    row[key] = None
                elif row[key] is not None:
                    row[key] = row[key] * scale
            out.scores.append(row)
        for cost_column in cost_columns:
            cost = cost_row(out, record, cost_column, shared, items, number, f"{source}/{file} row {row_number}")
            if cost is not None:
                out.costs.append(cost)
