"""Shared pieces of the source parsers: the raw_scores row shape, value parsing, audit rows."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field

import pandas as pd

RAW_SCORE_COLUMNS = [
    "row_key", "source", "source_class", "snapshot_sha256", "file", "row_number", "model_id",
    "model_name", "benchmark", "score_column", "score", "stderr", "ci_low", "ci_high", "shots",
    "harness", "sampling_protocol", "evaluated_on", "released_on", "organization", "origin", "origin_url", "verification_class",
]
# One reported cost of one run, converted to US dollars per task by the column's registered unit
# (usd_per_run is divided by the run's task count). The row identity matches raw_scores' (source, file,
# row_number), so a cost joins the score it was reported with.
COST_COLUMNS = [
    "row_key", "source", "source_class", "snapshot_sha256", "file", "row_number", "model_id", "model_name",
    "benchmark", "cost_column", "cost_unit", "reported_value", "tasks", "usd_per_task", "harness",
    "sampling_protocol", "evaluated_on",
]
AUDIT_COLUMNS = ["source", "snapshot_sha256", "file", "row_number", "field", "reason", "detail", "value"]

# Reasons for which a whole file could not be read. Such a file yields no rows from this snapshot;
# the ingest asset keeps the file's last good rows instead (defs/ingest/assets.py), and the WARN
# check `every_file_read` names it.
FILE_ERROR_REASONS = ("empty_file", "duplicate_header", "missing_key_column", "missing_headline_column",
                      "unparsable_file")
# Reasons the ingest asset adds when it keeps a file's last good rows.
KEPT_ROWS_REASONS = ("vanished_file", "emptied_file", "kept_last_good_rows")
# Rows that could not be read at all (as opposed to one field left empty).
UNREADABLE_ROW_REASONS = ("undecodable_row", "undecodable_header", "malformed_row")


class ValueProblem(ValueError):
    """A field's value cannot be read; `reason` is the audit reason code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def parse_number(text: object) -> float | None:
    """Blank -> None; numbers (also '12.5%', '1,234') -> float; anything else raises ValueProblem."""
    if text is None:
        return None
    if isinstance(text, bool):
        raise ValueProblem("non_numeric_value", f"boolean {text!r} is not a number")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        cleaned = str(text).strip().replace(",", "")
        if cleaned == "":
            return None
        if cleaned.endswith("%"):
            cleaned = cleaned[:-1].strip()
        try:
            value = float(cleaned)
        except ValueError as error:
            raise ValueProblem("non_numeric_value", f"{str(text)[:60]!r} is not a number") from error
    if not math.isfinite(value):
        raise ValueProblem("non_finite_value", f"{text!r} is not finite")
    return value


def parse_integer(text: object) -> int | None:
    value = parse_number(text)
    if value is None:
        return None
    if value != int(value):
        raise ValueProblem("non_integer_value", f"{text!r} is not a whole number")
    return int(value)


def parse_shots(text: object) -> int | None:
    """Few-shot counts as published: '5', '25-shot', 'zero-shot' -> int; 'few' names no count and is refused."""
    if isinstance(text, str):
        cleaned = text.strip().lower()
        if cleaned in ("zero-shot", "0-shot"):
            return 0
        if cleaned.endswith("-shot"):
            text = cleaned[: -len("-shot")]
    try:
        return parse_integer(text)
    except ValueProblem as problem:
        raise ValueProblem("unknown_shot_count", f"{str(text)[:40]!r} is not a shot count") from problem


def parse_date(text: object) -> dt.date | None:
    """ISO dates and timestamps ('2026-04-15', '2026-04-15T14:03:19.000Z') -> date."""
    if text is None:
        return None
    cleaned = str(text).strip()
    if cleaned == "":
        return None
    try:
        return dt.date.fromisoformat(cleaned[:10])
    except ValueError as error:
        raise ValueProblem("bad_date", f"{cleaned[:40]!r} is not an ISO date") from error


def undecodable_bytes(text: str) -> bytes:
    """The bytes of `text` that were not UTF-8 (decoded with errors='surrogateescape'), else b''."""
    return bytes(ord(ch) - 0xDC00 for ch in text if 0xDC80 <= ord(ch) <= 0xDCFF)


def shown(text: str) -> str:
    """`text` for an audit message, its undecodable bytes written as \\xNN."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def blank_to_none(text: object) -> str | None:
    if text is None:
        return None
    cleaned = str(text)
    return cleaned if cleaned.strip() else None


@dataclass
class ParseOutput:
    """Rows for raw_scores plus audit rows, accumulated by a parser."""

    source: str
    snapshot_sha256: str
    scores: list[dict] = field(default_factory=list)
    costs: list[dict] = field(default_factory=list)  # rows of COST_COLUMNS
    audit: list[dict] = field(default_factory=list)
    files_read: list[str] = field(default_factory=list)
    files_seen: set[str] = field(default_factory=set)  # every registered file present in the snapshot
    file_errors: dict[str, str] = field(default_factory=dict)  # file -> first FILE_ERROR_REASONS code

    def fail_file(self, reason: str, detail: str, *, file: str, row_number: int | None = None,
                  field_name: str | None = None, value: object = None) -> None:
        """The whole file cannot be read: audit it and mark it, so its last good rows are kept."""
        assert reason in FILE_ERROR_REASONS, reason
        self.flag(reason, detail, file=file, row_number=row_number, field_name=field_name, value=value)
        self.file_errors.setdefault(file, reason)

    def flag(self, reason: str, detail: str, *, file: str | None = None, row_number: int | None = None,
             field_name: str | None = None, value: object = None) -> None:
        self.audit.append({
            "source": self.source, "snapshot_sha256": self.snapshot_sha256, "file": file,
            "row_number": row_number, "field": field_name, "reason": reason, "detail": detail,
            "value": None if value is None else str(value)[:200],
        })

    def score_frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.scores, columns=RAW_SCORE_COLUMNS)
        for column in ("evaluated_on", "released_on"):
            frame[column] = pd.to_datetime(frame[column]).dt.date
        return frame.astype({"row_number": "int64", "score": "float64", "stderr": "float64",
                             "ci_low": "float64", "ci_high": "float64", "shots": "Int64"})

    def cost_frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.costs, columns=COST_COLUMNS)
        frame["evaluated_on"] = pd.to_datetime(frame["evaluated_on"]).dt.date
        return frame.astype({"row_number": "int64", "reported_value": "float64", "tasks": "float64",
                             "usd_per_task": "float64"})

    def audit_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.audit, columns=AUDIT_COLUMNS).astype({"row_number": "Int64"})
