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
from atlas_assets.ingest.records import ParseOutput, ValueProblem, parse_number, shown, undecodable_bytes
from atlas_assets.ingest.tabular import read_records

SOURCE = "epoch_hub"
URL = "https://epoch.ai/data/benchmark_data.zip"
METADATA_FILE = "benchmark_metadata.csv"


def detect_layout(members: dict[str, bytes]) -> str:
    if METADATA_FILE in members or any(name.startswith("epoch_capabilities_index/") for name in members):
        return "2026-09"
    return "2026-04"


def parse_csv_member(out: ParseOutput, registry, file: str, content: bytes) -> None:
    """Read one CSV member. A file that cannot be read as a whole is a file error (its last good
    rows are kept by the asset); a row that cannot be read costs that row only."""
    where = f"{out.source}/{file}"
    # surrogateescape: a stray non-UTF-8 byte becomes a lone surrogate inside exactly the cell it
    # sits in, so it costs that row (audited with row and field), not the whole file.
    text = content.decode("utf-8-sig", errors="surrogateescape")
    reader = csv.reader(io.StringIO(text, newline=""))
    rows, last_lines = [], []  # each record, and the physical line of the file it ends on
    for cells in reader:
        rows.append(cells)
        last_lines.append(reader.line_num)
    if not rows or not any(cell.strip() for cell in rows[0]):
        out.fail_file("empty_file", f"{where}: empty, no header row", file=file)
        return
    header = [cell.strip() for cell in rows[0]]
    for position, name in enumerate(header, start=1):
        if undecodable_bytes(name):
            out.flag("undecodable_header", f"{where} header (row 0) column {position}: {shown(name)!r} is not UTF-8 "
                     f"(bytes {undecodable_bytes(name)!r}); the column cannot be matched to the registry",
                     file=file, row_number=0, field_name=f"column {position}", value=shown(name))
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        out.fail_file("duplicate_header", f"{where} header (row 0): repeats {duplicates}; columns are ambiguous, "
                      "file not read", file=file, row_number=0, field_name=", ".join(duplicates))
        return
    data = [(index, cells) for index, cells in enumerate(rows[1:], start=1) if any(cell.strip() for cell in cells)]
    if not data:
        out.fail_file("empty_file", f"{where}: header only, no data rows", file=file)
        return

    def records():
        for index, cells in data:
            if len(cells) != len(header):
                first, last = last_lines[index - 1] + 1, last_lines[index]
                if last > first:
                    _flag_unclosed_quote(out, where, file, index, cells, len(header), first, last)
                    continue
                out.flag("malformed_row", f"{where} row {index}: {len(cells)} fields where the header has {len(header)} "
                         "(truncated or unquoted delimiter); row skipped", file=file, row_number=index,
                         value=shown(",".join(cells)))
                continue
            bad = [(name, cell) for name, cell in zip(header, cells) if undecodable_bytes(cell)]
            if bad:
                name, cell = bad[0]
                listed = ", ".join(f"0x{byte:02x}" for byte in undecodable_bytes(cell))
                out.flag("undecodable_row", f"{where} row {index} field {name!r}: not UTF-8 (byte {listed} in "
                         f"{shown(cell)[:60]!r}); row skipped", file=file, row_number=index, field_name=name,
                         value=shown(cell))
                continue
            yield index, dict(zip(header, cells))

    read_records(out, registry, file, header, records())


def _flag_unclosed_quote(out: ParseOutput, where: str, file: str, index: int, cells: list[str], expected: int,
                         first: int, last: int) -> None:
    """A malformed record over several lines: an unbalanced quote took the lines after it into one field. Each
    swallowed line is audited on its own (with its text), so no row of the file goes missing without a trace."""
    swallowed = [line for line in ",".join(cells).split("\n")[1:] if line.strip()]
    out.flag("malformed_row", f"{where} row {index}: {len(cells)} fields where the header has {expected}; an unclosed "
             f"quote runs from line {first} to line {last} of the file and swallowed {len(swallowed)} more line(s); "
             "row skipped", file=file, row_number=index, value=shown(",".join(cells).split("\n")[0]))
    for offset, line in enumerate(swallowed, start=1):
        out.flag("malformed_row", f"{where} row {index}: a line after it (about line {first + offset} of the file) was "
                 f"swallowed by its unclosed quote: {shown(line)[:80]!r}; that row is lost", file=file,
                 row_number=index, value=shown(line))


def cross_check_metadata(out: ParseOutput, registry, content: bytes) -> None:
    """Compare the export's own benchmark_metadata.csv with the registry; audit every disagreement."""
    # Only audits are derived from this file, so a stray byte is replaced rather than fatal.
    rows = list(csv.DictReader(io.StringIO(content.decode("utf-8-sig", errors="replace"), newline="")))
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
        out.files_seen.add(name)
        parse_csv_member(out, registry, name, members[name])
    return out
