"""Parse the Epoch AI Benchmarking Hub export (benchmark_data.zip), in either layout.

April 2026 layout: flat benchmark CSVs, `epoch_capabilities_index.csv` at the root and
`additional_eci_data/`. Newer layout: the same benchmark CSVs plus `benchmark_metadata.csv`
(which names each file's score column, scale, random baseline and ceiling),
`model_metadata.csv` and an `epoch_capabilities_index/` folder. Which columns are scores is
decided by the registry, never by the file; `benchmark_metadata.csv`, when present, is
cross-checked against it and every disagreement is audited.
"""

from __future__ import annotations

import csv
import io

from atlas_assets.ingest.archive import read_zip_members
from atlas_assets.ingest.records import ParseOutput, ValueProblem, parse_number
from atlas_assets.ingest.tabular import read_records

SOURCE = "epoch_hub"
URL = "https://epoch.ai/data/benchmark_data.zip"
METADATA_FILE = "benchmark_metadata.csv"


def detect_layout(members: dict[str, bytes]) -> str:
    if METADATA_FILE in members or any(name.startswith("epoch_capabilities_index/") for name in members):
        return "2026-09"
    return "2026-04"


def parse_csv_member(out: ParseOutput, registry, file: str, content: bytes) -> None:
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        out.flag("undecodable_file", f"{out.source}/{file}: not UTF-8 ({error})", file=file)
        return
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows or not any(cell.strip() for cell in rows[0]):
        out.flag("empty_file", f"{out.source}/{file}: empty, no header row", file=file)
        return
    header = [cell.strip() for cell in rows[0]]
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        out.flag("duplicate_header", f"{out.source}/{file}: header repeats {duplicates}; columns are ambiguous, file skipped",
                 file=file, field_name=", ".join(duplicates))
        return

    def records():
        for index, cells in enumerate(rows[1:], start=1):
            if not any(cell.strip() for cell in cells):
                continue
            if len(cells) != len(header):
                out.flag("malformed_row", f"{out.source}/{file} row {index}: {len(cells)} fields where the header has {len(header)} "
                         "(truncated or unquoted delimiter); row skipped", file=file, row_number=index, value=",".join(cells))
                continue
            yield index, dict(zip(header, cells))

    if len(rows) == 1:
        out.flag("empty_file", f"{out.source}/{file}: header only, no data rows", file=file)
    read_records(out, registry, file, header, records())


def cross_check_metadata(out: ParseOutput, registry, content: bytes) -> None:
    """Compare the export's own benchmark_metadata.csv with the registry; audit every disagreement."""
    rows = list(csv.DictReader(io.StringIO(content.decode("utf-8-sig"), newline="")))
    for index, row in enumerate(rows, start=1):
        file, column = (row.get("source_file") or "").strip(), (row.get("score_column") or "").strip()
        if not file:
            continue
        entry = registry.file_entry(SOURCE, file)
        if entry is None:
            out.flag("unregistered_file", f"{METADATA_FILE} row {index} names {file!r}, which the registry does not know",
                     file=METADATA_FILE, row_number=index, field_name="source_file", value=file)
            continue
        scores = registry.score_columns(SOURCE, file)
        headline = scores.loc[scores["headline"], "column"].tolist()
        if column and headline and column != headline[0]:
            out.flag("headline_mismatch", f"{METADATA_FILE} row {index}: Epoch's score column for {file} is {column!r}, "
                     f"the registry's headline is {headline[0]!r}", file=METADATA_FILE, row_number=index,
                     field_name="score_column", value=column)
        try:
            baseline = parse_number(row.get("random_baseline"))
        except ValueProblem:
            baseline = None
        if baseline is not None and not scores.empty:
            benchmark = scores.loc[scores["headline"], "benchmark"].iloc[0] if any(scores["headline"]) else scores["benchmark"].iloc[0]
            floor = registry.benchmarks.set_index("benchmark").at[benchmark, "floor"]
            if abs(float(floor) - baseline) > 0.02:
                out.flag("floor_disagreement", f"{METADATA_FILE} row {index}: Epoch's random baseline for {file} is {baseline}, "
                         f"the registry's floor for {benchmark} is {floor}", file=METADATA_FILE, row_number=index,
                         field_name="random_baseline", value=baseline)


def parse_epoch_export(content: bytes, registry, snapshot_sha256: str) -> ParseOutput:
    out = ParseOutput(source=SOURCE, snapshot_sha256=snapshot_sha256)
    members = read_zip_members(content, label=f"{SOURCE} {URL} (sha256 {snapshot_sha256[:12]})")
    for name in sorted(members):
        if not name.lower().endswith(".csv"):
            continue
        if name == METADATA_FILE:
            cross_check_metadata(out, registry, members[name])
        if registry.file_entry(SOURCE, name) is None and name != METADATA_FILE:
            out.flag("unregistered_file", f"{SOURCE}/{name} is in the export but not in the registry; not read", file=name)
            continue
        parse_csv_member(out, registry, name, members[name])
    return out
