"""Benchmark registry: the curated ``config/benchmarks.yaml`` loaded, validated and shaped as tables.

Pure functions, no Dagster. The YAML says, per exact benchmark, what its scores mean (direction,
declared range and unit, guessing floor, item count, family, role, ...) and, per published file,
how every column is read (score for which benchmark, auxiliary field, or ignored with a reason).
The output DataFrames have exactly the columns of ``registry_benchmarks``, ``registry_files`` and
``registry_columns`` in ``sql/00_source_tables.sql``.

Validation is strict on purpose: a typo in an enumerated field or a dangling benchmark key would
otherwise silently drop or mis-scale scores several stages later. Every error names the YAML file,
the entry (benchmark / source / file / column) and the field.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import yaml

BENCHMARKS_PATH = Path(__file__).resolve().parents[1] / "config" / "benchmarks.yaml"

# Columns exactly as in sql/00_source_tables.sql (order included).
BENCHMARK_COLUMNS = [
    "benchmark", "name", "direction", "range_min", "range_max", "unit", "floor", "items", "family", "role",
    "kind", "sampling_protocol", "category", "is_safety", "is_composite", "contamination", "notes", "reference",
]
FILE_COLUMNS = [
    "source", "file", "source_class", "sampling_protocol", "model_id_column", "model_name_column", "stderr_column",
    "ci_low_column", "ci_high_column", "shots_column", "harness_columns", "evaluated_on_column", "released_on_column",
    "organization_column", "origin_column", "origin_url_column", "verification_class", "republishes_source",
    "republishes_file",
]
COLUMN_COLUMNS = ["source", "file", "column", "use", "benchmark", "headline", "scale", "reason", "cost_unit", "tasks_column",
                  "run_total_when"]

DIRECTIONS = {"higher", "lower", "zero_best", "target", "custom"}
UNITS = {"fraction", "percent", "rating_0_10", "points", "elo", "minutes"}
ROLES = {"primary", "component", "diagnostic"}
KINDS = {"bounded", "rating", "unbounded"}
SAMPLING_PROTOCOLS = {"single", "average", "consensus", "best_of_n"}
CONTAMINATION = {"live", "private", "static"}
# The contract lists these and ends with '...': the set is open, but a closed list here catches typos.
CATEGORIES = {
    "coding", "agents", "math", "science", "reasoning", "knowledge", "language", "multimodal", "writing", "games",
    "cybersecurity", "long_context", "knowledge_work", "general",
}
SOURCES = {"epoch_hub", "swe_bench", "aider", "tau2_bench", "arc_prize"}
SOURCE_CLASSES = {"model_release", "evaluator_release", "benchmark_release"}
USES = {"score", "cost", "auxiliary", "ignored"}
# How a cost column is published: dollars per task, or for the whole run (divided by the task count:
# the record's `tasks_column` when given, else the benchmark's registered item count). A usd_per_task column
# whose publisher pastes whole-run totals into some rows names, in `run_total_when`, the column that is filled
# exactly on those rows (Epoch's Aider copy: the 9 rows with a 'Date of evaluation' carry Aider's total_cost).
COST_UNITS = {"usd_per_task", "usd_per_run"}
LAYOUTS = {"old", "new", "swe_bench", "aider", "tau2_bench", "arc_prize"}
# Who checked a score (seed 002), best first. The class of a row: the parser's per-row rule where the
# source has one (SWE-bench `checked`, tau2-bench's submitter), else the file's `verification_class`,
# else the default of the row's source class (top-level `verification.by_source_class`).
VERIFICATION_CLASSES = ("independent", "community", "vendor_reported", "unverified")

BENCHMARK_FIELDS_REQUIRED = {
    "name", "direction", "unit", "floor", "family", "role", "kind", "sampling_protocol", "category", "safety",
    "composite", "contamination",
}
BENCHMARK_FIELDS_OPTIONAL = {"range", "items", "notes", "reference"}
FILE_POINTER_FIELDS = [
    "model_id_column", "model_name_column", "stderr_column", "ci_low_column", "ci_high_column", "shots_column",
    "evaluated_on_column", "released_on_column", "organization_column", "origin_column", "origin_url_column",
]
FILE_FIELDS = set(FILE_POINTER_FIELDS) | {
    "source_class", "sampling_protocol", "harness_columns", "columns", "source_class_by_origin", "layout", "notes",
    "verification_class", "republishes",
}
VERIFICATION_FIELDS = {"by_source_class", "maintainers", "same_organization"}
# Used when a registry has no `verification` section (small fixture registries): a third party's own run
# is independent, a lab's number about its model vendor-reported, a leaderboard's number checked by its
# maintainer (community). The packaged benchmarks.yaml states the same mapping explicitly.
DEFAULT_VERIFICATION = {"by_source_class": {"evaluator_release": "independent", "model_release": "vendor_reported",
                                            "benchmark_release": "community"}}
COLUMN_FIELDS = {"use", "benchmark", "headline", "scale", "reason", "cost_unit", "tasks_column", "run_total_when"}


class RegistryError(ValueError):
    """The registry YAML is malformed; the message names the file, the entry and the field."""


@dataclass(frozen=True)
class BenchmarkRegistry:
    benchmarks: pd.DataFrame  # columns exactly as registry_benchmarks
    files: pd.DataFrame  # exactly as registry_files (harness_columns is a list of str)
    columns: pd.DataFrame  # exactly as registry_columns
    version: str  # sha256 of the YAML bytes
    path: Path | None = None
    # YAML-only per-file extras (source_class_by_origin, layout, notes), keyed by (source, file)
    file_extras: Mapping[tuple[str, str], dict] = field(default_factory=dict, repr=False)
    # top-level `verification`: by_source_class (source class -> default verification class),
    # maintainers (source -> organizations that maintain its benchmark), same_organization (groups of
    # names of one organization)
    verification: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def verification_class(self, entry: Mapping[str, Any], source_class: str) -> str:
        """The class of a row of file `entry` whose (possibly origin-overridden) source class is given:
        the file's `verification_class` when the row kept the file's source class, else the default
        of its source class."""
        if entry.get("verification_class") and source_class == entry.get("source_class"):
            return entry["verification_class"]
        return self.verification["by_source_class"][source_class]

    def maintainers(self, source: str) -> set[str]:
        return {name.casefold() for name in (self.verification.get("maintainers") or {}).get(source, [])}

    def same_organization(self, a: str | None, b: str | None) -> bool:
        """Two published organization names name one organization (equal ignoring case, or listed together)."""
        if not a or not b:
            return False
        a, b = a.strip().casefold(), b.strip().casefold()
        if a == b:
            return True
        return any(a in group and b in group for group in
                   ({name.casefold() for name in g} for g in self.verification.get("same_organization") or []))

    def file_entry(self, source: str, file: str) -> dict | None:
        """The registry_files row of one file as a dict, plus YAML-only extras
        (``source_class_by_origin``, ``layout``, ``notes``); None when the file is not registered."""
        rows = self.files[(self.files["source"] == source) & (self.files["file"] == file)]
        if rows.empty:
            return None
        entry = {key: _none_if_nan(value) for key, value in rows.iloc[0].to_dict().items()}
        entry["harness_columns"] = list(entry["harness_columns"] or [])
        entry.update(self.file_extras.get((source, file), {}))
        return entry

    def score_columns(self, source: str, file: str) -> pd.DataFrame:
        """The file's ``use == 'score'`` rows of registry_columns (empty when none / unknown file)."""
        c = self.columns
        mask = (c["source"] == source) & (c["file"] == file) & (c["use"] == "score")
        return c[mask].reset_index(drop=True)

    def column_entry(self, source: str, file: str, column: str) -> dict | None:
        c = self.columns
        rows = c[(c["source"] == source) & (c["file"] == file) & (c["column"] == column)]
        return None if rows.empty else {k: _none_if_nan(v) for k, v in rows.iloc[0].to_dict().items()}


def load_benchmark_registry(path: Path | None = None) -> BenchmarkRegistry:
    """Read, validate and tabulate the benchmark registry (default: atlas_assets/config/benchmarks.yaml)."""
    path = Path(path) if path is not None else BENCHMARKS_PATH
    raw = path.read_bytes()
    try:
        document = yaml.load(raw, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path}: not valid YAML: {exc}") from exc
    validator = _Validator(path)
    benchmarks, files, columns, extras, verification = validator.build(document)
    return BenchmarkRegistry(
        benchmarks=benchmarks, files=files, columns=columns, version=hashlib.sha256(raw).hexdigest(), path=path,
        file_extras=extras, verification=verification,
    )


# ---------------------------------------------------------------------------------------------- validation


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser where built: 10x faster
    """SafeLoader that rejects duplicate keys: PyYAML would silently keep the last one, so a benchmark
    or column entered twice would lose its first definition without a trace."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)



class _Validator:
    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, field: str | None, message: str) -> RegistryError:
        at = f"{where}.{field}" if field else where
        return RegistryError(f"{self.path}: {at}: {message}")

    def build(self, document: Any):
        if not isinstance(document, Mapping):
            raise self.fail("<root>", None, "expected a mapping with keys version, benchmarks, files")
        unknown = set(document) - {"version", "benchmarks", "files", "verification"}
        if unknown:
            raise self.fail("<root>", None, f"unknown top-level keys {sorted(unknown)}")
        for key in ("version", "benchmarks", "files"):
            if key not in document:
                raise self.fail("<root>", key, "missing")
        if not isinstance(document["benchmarks"], Mapping) or not document["benchmarks"]:
            raise self.fail("benchmarks", None, "expected a non-empty mapping of benchmark key -> entry")
        if not isinstance(document["files"], Mapping) or not document["files"]:
            raise self.fail("files", None, "expected a mapping of source -> file -> entry")

        benchmark_rows = [self.benchmark(key, entry) for key, entry in document["benchmarks"].items()]
        defined = {row["benchmark"] for row in benchmark_rows}
        units = {row["benchmark"]: row for row in benchmark_rows}

        file_rows, column_rows, extras = [], [], {}
        for source, files in document["files"].items():
            if source not in SOURCES:
                raise self.fail(f"files.{source}", None, f"unknown source {source!r}; allowed: {sorted(SOURCES)}")
            if not isinstance(files, Mapping) or not files:
                raise self.fail(f"files.{source}", None, "expected a non-empty mapping of file -> entry")
            for file, entry in files.items():
                file_row, cols, extra = self.file(source, str(file), entry, defined, units)
                file_rows.append(file_row)
                column_rows.extend(cols)
                extras[(source, str(file))] = extra

        verification = self.verification(document.get("verification"))
        registered_files = {(row["source"], row["file"]) for row in file_rows}
        for row in file_rows:
            if row["republishes_source"] is not None and (row["republishes_source"], row["republishes_file"]) not in registered_files:
                raise self.fail(f"files.{row['source']}.{row['file']}", "republishes",
                                f"names {row['republishes_source']}/{row['republishes_file']}, which is not a registered file")

        published = {row["benchmark"] for row in column_rows if row["use"] == "score"}
        orphans = sorted(defined - published)
        if orphans:
            raise self.fail(f"benchmarks.{orphans[0]}", None,
                            f"no file column publishes this benchmark (unpublished: {orphans})")

        benchmarks = pd.DataFrame(benchmark_rows, columns=BENCHMARK_COLUMNS)
        benchmarks["items"] = benchmarks["items"].astype("Int64")
        for col in ("range_min", "range_max", "floor"):
            benchmarks[col] = benchmarks[col].astype("float64")
        for col in ("is_safety", "is_composite"):
            benchmarks[col] = benchmarks[col].astype(bool)
        files_df = pd.DataFrame(file_rows, columns=FILE_COLUMNS)
        columns_df = pd.DataFrame(column_rows, columns=COLUMN_COLUMNS)
        columns_df["headline"] = columns_df["headline"].astype(bool)
        columns_df["scale"] = columns_df["scale"].astype("float64")
        return benchmarks, files_df, columns_df, extras, verification

    def verification(self, section: Any) -> dict:
        where = "verification"
        if section is None:
            section = DEFAULT_VERIFICATION
        if not isinstance(section, Mapping):
            raise self.fail(where, None, "expected a mapping with by_source_class (and optional maintainers, same_organization)")
        unknown = set(section) - VERIFICATION_FIELDS
        if unknown:
            raise self.fail(where, sorted(unknown)[0], f"unknown field (allowed: {sorted(VERIFICATION_FIELDS)})")
        defaults = section.get("by_source_class")
        if not isinstance(defaults, Mapping) or set(defaults) != SOURCE_CLASSES:
            raise self.fail(where, "by_source_class", f"must map every source class {sorted(SOURCE_CLASSES)} to a verification class")
        for klass, value in defaults.items():
            self.enum(f"{where}.by_source_class", klass, value, set(VERIFICATION_CLASSES))
        maintainers = section.get("maintainers") or {}
        if not isinstance(maintainers, Mapping) or not all(
                source in SOURCES and isinstance(names, list) and all(isinstance(n, str) for n in names)
                for source, names in maintainers.items()):
            raise self.fail(where, "maintainers", f"expected source -> list of organization names (sources: {sorted(SOURCES)})")
        groups = section.get("same_organization") or []
        if not isinstance(groups, list) or not all(isinstance(g, list) and all(isinstance(n, str) for n in g) for g in groups):
            raise self.fail(where, "same_organization", "expected a list of lists of organization names")
        return {"by_source_class": dict(defaults), "maintainers": dict(maintainers), "same_organization": list(groups)}

    # -------------------------------------------------------------------------------- benchmarks

    def benchmark(self, key: Any, entry: Any) -> dict:
        where = f"benchmarks.{key}"
        if not isinstance(key, str) or not key or key != key.strip():
            raise self.fail(where, None, "benchmark key must be a non-empty string")
        if not isinstance(entry, Mapping):
            raise self.fail(where, None, "expected a mapping")
        unknown = set(entry) - BENCHMARK_FIELDS_REQUIRED - BENCHMARK_FIELDS_OPTIONAL
        if unknown:
            raise self.fail(where, sorted(unknown)[0], f"unknown field (allowed: {sorted(BENCHMARK_FIELDS_REQUIRED | BENCHMARK_FIELDS_OPTIONAL)})")
        for field in sorted(BENCHMARK_FIELDS_REQUIRED):
            if field not in entry:
                raise self.fail(where, field, "missing")

        name = self.text(where, "name", entry["name"])
        direction = entry["direction"]
        if direction is not None:  # NULL is allowed by the contract: direction unknown
            self.enum(where, "direction", direction, DIRECTIONS)
        unit = self.enum(where, "unit", entry["unit"], UNITS)
        role = self.enum(where, "role", entry["role"], ROLES)
        kind = self.enum(where, "kind", entry["kind"], KINDS)
        protocol = self.enum(where, "sampling_protocol", entry["sampling_protocol"], SAMPLING_PROTOCOLS)
        category = self.enum(where, "category", entry["category"], CATEGORIES)
        contamination = self.enum(where, "contamination", entry["contamination"], CONTAMINATION)
        family = self.text(where, "family", entry["family"])
        safety = self.boolean(where, "safety", entry["safety"])
        composite = self.boolean(where, "composite", entry["composite"])

        floor = self.number(where, "floor", entry["floor"])
        if not 0 <= floor < 1:
            raise self.fail(where, "floor", f"must satisfy 0 <= floor < 1 (guessing floor on the 0-1 scale), got {floor}")
        if kind == "rating" and floor != 0:
            raise self.fail(where, "floor", f"a rating has no guessing floor: must be 0, got {floor}")

        range_min = range_max = None
        if "range" in entry and entry["range"] is not None:
            value = entry["range"]
            if not isinstance(value, list) or len(value) != 2:
                raise self.fail(where, "range", f"expected [min, max] (max may be null), got {value!r}")
            range_min = None if value[0] is None else self.number(where, "range", value[0])
            range_max = None if value[1] is None else self.number(where, "range", value[1])
        if kind == "bounded":
            if range_min is None or range_max is None:
                raise self.fail(where, "range", "a bounded benchmark needs a declared [min, max]")
            if not range_min < range_max:
                raise self.fail(where, "range", f"range_min must be < range_max, got [{range_min}, {range_max}]")
        elif range_min is not None and range_max is not None and not range_min < range_max:
            raise self.fail(where, "range", f"range_min must be < range_max, got [{range_min}, {range_max}]")

        items = entry.get("items")
        if items is not None and (isinstance(items, bool) or not isinstance(items, int) or items <= 0):
            raise self.fail(where, "items", f"must be a positive integer, got {items!r}")

        notes = entry.get("notes")
        reference = entry.get("reference")
        for field, value in (("notes", notes), ("reference", reference)):
            if value is not None and not isinstance(value, str):
                raise self.fail(where, field, "must be a string")
        return dict(
            benchmark=key, name=name, direction=direction, range_min=range_min, range_max=range_max, unit=unit,
            floor=floor, items=items, family=family, role=role, kind=kind, sampling_protocol=protocol,
            category=category, is_safety=safety, is_composite=composite, contamination=contamination,
            notes=notes, reference=reference,
        )

    # -------------------------------------------------------------------------------- files and columns

    def file(self, source: str, file: str, entry: Any, defined: set[str], benchmarks: dict):
        where = f"files.{source}.{file}"
        if not isinstance(entry, Mapping):
            raise self.fail(where, None, "expected a mapping")
        unknown = set(entry) - FILE_FIELDS
        if unknown:
            raise self.fail(where, sorted(unknown)[0], f"unknown field (allowed: {sorted(FILE_FIELDS)})")
        for field in ("source_class", "columns"):
            if field not in entry:
                raise self.fail(where, field, "missing")
        source_class = self.enum(where, "source_class", entry["source_class"], SOURCE_CLASSES)
        protocol = entry.get("sampling_protocol")
        if protocol is not None:
            self.enum(where, "sampling_protocol", protocol, SAMPLING_PROTOCOLS)
        layout = entry.get("layout")
        if layout is not None:
            self.enum(where, "layout", layout, LAYOUTS)
        verification_class = entry.get("verification_class")
        if verification_class is not None:
            self.enum(where, "verification_class", verification_class, set(VERIFICATION_CLASSES))
        republishes = entry.get("republishes")
        republishes_source = republishes_file = None
        if republishes is not None:
            # 'source/file': this file copies that file's results (the same runs), so the duplicate
            # resolution treats a copied row and its original as reports of one cell, not two votes.
            if not isinstance(republishes, str) or "/" not in republishes:
                raise self.fail(where, "republishes", f"expected 'source/file' of the original, got {republishes!r}")
            republishes_source, republishes_file = republishes.split("/", 1)
            if republishes_source == source:
                raise self.fail(where, "republishes", "a file republishes another source's file")
        by_origin = entry.get("source_class_by_origin") or {}
        if not isinstance(by_origin, Mapping):
            raise self.fail(where, "source_class_by_origin", "expected a mapping origin -> source_class")
        for origin, klass in by_origin.items():
            self.enum(f"{where}.source_class_by_origin", str(origin), klass, SOURCE_CLASSES)

        columns = entry["columns"]
        if not isinstance(columns, Mapping) or not columns:
            raise self.fail(where, "columns", "expected a non-empty mapping column -> {use, ...}")
        column_rows = [self.column(source, file, str(name), spec, defined, benchmarks) for name, spec in columns.items()]
        headlines = [row["column"] for row in column_rows if row["headline"]]
        has_scores = any(row["use"] == "score" for row in column_rows)
        if has_scores and len(headlines) != 1:
            raise self.fail(where, "columns", f"exactly one headline score column per file, found {len(headlines)}: {headlines}")

        registered = set(columns)
        headline_benchmark = next((row["benchmark"] for row in column_rows if row["headline"]), None)
        for row in column_rows:
            if row["use"] != "cost":
                continue
            if row["benchmark"] is None:
                if headline_benchmark is None:
                    raise self.fail(f"{where}.columns.{row['column']}", "benchmark",
                                    "a cost column in a file without a headline score must name its benchmark")
                row["benchmark"] = headline_benchmark
            for field in ("tasks_column", "run_total_when"):
                if row[field] is not None and row[field] not in registered:
                    raise self.fail(f"{where}.columns.{row['column']}", field,
                                    f"names column {row[field]!r}, which is not registered under columns")
        pointers = {}
        for field in FILE_POINTER_FIELDS:
            value = entry.get(field)
            if value is not None:
                if not isinstance(value, str):
                    raise self.fail(where, field, f"must be a column name or null, got {value!r}")
                if value not in registered:
                    raise self.fail(where, field, f"names column {value!r}, which is not registered under columns")
            pointers[field] = value
        harness = entry.get("harness_columns") or []
        if not isinstance(harness, list) or not all(isinstance(h, str) for h in harness):
            raise self.fail(where, "harness_columns", "must be a list of column names")
        for h in harness:
            if h not in registered:
                raise self.fail(where, "harness_columns", f"names column {h!r}, which is not registered under columns")
        # The score columns themselves must not double as metadata pointers (would mis-read a score as e.g. a date).
        score_names = {row["column"] for row in column_rows if row["use"] == "score"}
        for field, value in pointers.items():
            if value in score_names:
                raise self.fail(where, field, f"points at score column {value!r}")

        file_row = dict(source=source, file=file, source_class=source_class, sampling_protocol=protocol,
                        harness_columns=list(harness), verification_class=verification_class,
                        republishes_source=republishes_source, republishes_file=republishes_file, **pointers)
        extras = {"source_class_by_origin": dict(by_origin), "layout": layout, "notes": entry.get("notes")}
        return file_row, column_rows, extras

    def column(self, source: str, file: str, name: str, spec: Any, defined: set[str], benchmarks: dict) -> dict:
        where = f"files.{source}.{file}.columns.{name}"
        if not isinstance(spec, Mapping):
            raise self.fail(where, None, "expected a mapping {use: ...}")
        unknown = set(spec) - COLUMN_FIELDS
        if unknown:
            raise self.fail(where, sorted(unknown)[0], f"unknown field (allowed: {sorted(COLUMN_FIELDS)})")
        if "use" not in spec:
            raise self.fail(where, "use", "missing")
        use = self.enum(where, "use", spec["use"], USES)
        benchmark = spec.get("benchmark")
        headline = spec.get("headline", False)
        if not isinstance(headline, bool):
            raise self.fail(where, "headline", f"must be true or false, got {headline!r}")
        scale = self.number(where, "scale", spec.get("scale", 1.0))
        if not (math.isfinite(scale) and scale > 0):
            raise self.fail(where, "scale", f"must be a positive number, got {scale}")
        reason = spec.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise self.fail(where, "reason", "must be a string")
        cost_unit, tasks_column = spec.get("cost_unit"), spec.get("tasks_column")
        run_total_when = spec.get("run_total_when")
        if use == "cost":
            # A cost belongs to a benchmark's run: the one named, else the file's headline benchmark (filled
            # in by the file once its headline is known).
            self.enum(where, "cost_unit", cost_unit, COST_UNITS)
            if benchmark is not None and benchmark not in defined:
                raise self.fail(where, "benchmark", f"unknown benchmark {benchmark!r} (not defined under benchmarks)")
            if headline:
                raise self.fail(where, "headline", "a cost column cannot be the headline score")
            if tasks_column is not None and (cost_unit != "usd_per_run" or not isinstance(tasks_column, str)):
                raise self.fail(where, "tasks_column", "only a usd_per_run cost names a tasks column (a column name)")
            if run_total_when is not None and (cost_unit != "usd_per_task" or not isinstance(run_total_when, str)):
                raise self.fail(where, "run_total_when", "only a usd_per_task cost names a run_total_when column "
                                "(a column name: rows where it is filled carry a whole-run total)")
        elif cost_unit is not None or tasks_column is not None or run_total_when is not None:
            field = "cost_unit" if cost_unit is not None else "tasks_column" if tasks_column is not None else "run_total_when"
            raise self.fail(where, field, f"only cost columns have a cost unit, tasks column or run_total_when (use is {use!r})")
        elif use == "score":
            if benchmark is None:
                raise self.fail(where, "benchmark", "a score column must name the benchmark it publishes")
            if benchmark not in defined:
                raise self.fail(where, "benchmark", f"unknown benchmark {benchmark!r} (not defined under benchmarks)")
        else:
            if benchmark is not None:
                raise self.fail(where, "benchmark", f"only score columns map to a benchmark (use is {use!r})")
            if headline:
                raise self.fail(where, "headline", f"only a score column can be the headline (use is {use!r})")
            if use == "ignored" and not (reason and reason.strip()):
                raise self.fail(where, "reason", "an ignored column needs a reason")
        return dict(source=source, file=file, column=name, use=use, benchmark=benchmark, headline=headline,
                    scale=scale, reason=reason, cost_unit=cost_unit, tasks_column=tasks_column,
                    run_total_when=run_total_when)

    # -------------------------------------------------------------------------------- field helpers

    def enum(self, where: str, field: str, value: Any, allowed: set[str]) -> str:
        if value not in allowed:
            raise self.fail(where, field, f"{value!r} is not one of {sorted(allowed)}")
        return value

    def text(self, where: str, field: str, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, field, f"must be a non-empty string, got {value!r}")
        return value

    def boolean(self, where: str, field: str, value: Any) -> bool:
        if not isinstance(value, bool):  # 'yes'/'no' strings or 0/1 are rejected: YAML typos, not booleans
            raise self.fail(where, field, f"must be true or false, got {value!r}")
        return value

    def number(self, where: str, field: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(where, field, f"must be a number, got {value!r}")
        return float(value)


def _none_if_nan(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
