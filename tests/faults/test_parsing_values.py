"""Parse and value faults in a downloaded export, through the real epoch_hub and swe_bench source assets.

The seeded home holds a good export (toy_mc.csv: 6 rows; toy_agent_external.csv: 3 rows × 2 benchmarks).
Each case serves the export again with one fault. Row-level faults cost exactly their rows: every other
row lands from the new snapshot, and each lost row is in the audit table naming file, row and field.
File-level faults cost nothing: the file keeps its last good rows (with the good snapshot's hash) and the
audit and the WARN check `every_file_read` say why. Whole-document faults fall back to the last good
snapshot. Every case then re-runs on the good export and lands it again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pytest

from tests.faults.harness import (AGENT_HEADER, EPOCH_PATH, GOOD_EPOCH, GOOD_SWE, HEADLINE, MC_HEADER, SWE_PATH,
                                  Ledger, agent, body, mc, sha, zip_of)

GOOD_KEYS = {f"epoch_hub/toy_mc.csv#{i}/toy_mc" for i in range(1, 7)} | {
    f"epoch_hub/toy_agent_external.csv#{i}/{b}" for i in range(1, 4) for b in ("toy_agent", "toy_agent_long")}


def mc_lines() -> list[str]:
    return mc(6).splitlines(keepends=True)


def mc_with(row: int, old: str, new: str) -> str:
    """toy_mc.csv with one edit in data row `row` (1-based; 0 is the header)."""
    lines = mc_lines()
    assert old in lines[row], (old, lines[row])
    lines[row] = lines[row].replace(old, new, 1)
    return "".join(lines)


def mc_bytes(row: int, old: bytes, new: bytes) -> bytes:
    lines = mc(6).encode().splitlines(keepends=True)
    lines[row] = lines[row].replace(old, new, 1)
    return b"".join(lines)


def mc_rows(*edits: tuple[int, str]) -> str:
    lines = mc_lines()
    for row, text in edits:
        lines[row] = text
    return "".join(lines)


@dataclass(frozen=True)
class RowFault:
    name: str
    toy_mc: str | bytes
    audits: tuple[tuple[str, int | None, str | None], ...]    # (reason, row, field) in toy_mc.csv
    detail: str                                                # regex the first audit's detail must match
    lost_rows: tuple[int, ...] = ()                            # toy_mc.csv rows that cannot land


ROW_FAULTS = [
    RowFault("nan_score", mc_with(2, ",0.2,", ",NaN,"), (("non_finite_score", 2, HEADLINE),),
             rf"toy_mc\.csv row 2 field '{re.escape(HEADLINE)}': 'NaN' is not finite", (2,)),
    RowFault("inf_score", mc_with(3, ",0.3,", ",inf,"), (("non_finite_score", 3, HEADLINE),),
             r"toy_mc\.csv row 3 .*'inf' is not finite", (3,)),
    RowFault("negative_infinity_score", mc_with(3, ",0.3,", ",-Infinity,"), (("non_finite_score", 3, HEADLINE),),
             r"toy_mc\.csv row 3 .*'-Infinity' is not finite", (3,)),
    RowFault("non_numeric_score", mc_with(4, ",0.4,", ",n/a,"), (("non_numeric_score", 4, HEADLINE),),
             r"toy_mc\.csv row 4 .*'n/a' is not a number", (4,)),
    RowFault("empty_headline_score", mc_with(5, ",0.5,2025", ",,2025"), (("missing_score", 5, HEADLINE),),
             r"toy_mc\.csv row 5: headline .* is empty", (5,)),
    RowFault("missing_model_id", mc_with(1, "model-1,", ","), (("missing_model_id", 1, "Model version"),),
             r"toy_mc\.csv row 1: no model identifier in 'Model version'", (1,)),
    RowFault("ragged_rows", mc_rows((2, "model-2,0.5,0.2\n"), (4, "model-4,0.5,0.4,2025-01-01,Org,0.01,2026-01-01,x,y\n")),
             (("malformed_row", 2, None), ("malformed_row", 4, None)),
             r"toy_mc\.csv row 2: 3 fields where the header has 7", (2, 4)),
    RowFault("latin1_bytes_in_a_cell", mc_bytes(3, b",Org,", b",Organizaci\xf3n,"),
             (("undecodable_row", 3, "Organization"),), r"toy_mc\.csv row 3 field 'Organization': not UTF-8 \(byte 0xf3",
             (3,)),
    RowFault("bad_date_and_stderr_keep_the_score", mc_with(2, ",2025-01-01,Org,0.01,", ",last spring,Org,oops,"),
             (("bad_date", 2, "Release date"), ("non_numeric_value", 2, "stderr")),
             r"toy_mc\.csv row 2 field 'Release date': 'last spring' is not an ISO date"),
    # an unbalanced quote swallows the lines after it into one field: each swallowed line is a lost row too
    RowFault("unclosed_quote", mc_with(2, ",Org,", ',"Org,'),
             (("malformed_row", 2, None),) * 5,
             r"toy_mc\.csv row 2: 5 fields where the header has 7; an unclosed quote runs from line 3 to line 7 of "
             r"the file and swallowed 4 more line\(s\)", (2, 3, 4, 5, 6)),
]


def staged_keys(home) -> dict[str, str]:
    return dict(home.query("SELECT row_key, snapshot_sha256 FROM raw_scores__epoch_hub"))


@pytest.mark.parametrize("fault", ROW_FAULTS, ids=[f.name for f in ROW_FAULTS])
def test_a_bad_row_costs_only_that_row_and_is_audited(fault, home, epoch, server):
    before = Ledger.take(home)
    export = zip_of({**GOOD_EPOCH, "toy_mc.csv": fault.toy_mc})
    server.routes[EPOCH_PATH] = body(export)
    outcome = home.run(epoch, checks=("fresh_download_parsed",))
    assert outcome.success and outcome.check("fresh_download_parsed").passed  # the snapshot itself is good

    found = [(a["reason"], a["row_number"], a["field"]) for a in outcome.audit() if a["file"] == "toy_mc.csv"]
    assert sorted(found) == sorted(fault.audits)
    first = next(a for a in outcome.audit() if (a["reason"], a["row_number"], a["field"]) == fault.audits[0])
    assert "epoch_hub/toy_mc.csv" in first["detail"] and re.search(fault.detail, first["detail"]), first["detail"]
    assert first["snapshot_sha256"] == sha(export)

    # exactly the bad rows are missing, every other row landed from the new snapshot
    lost = {f"epoch_hub/toy_mc.csv#{row}/toy_mc" for row in fault.lost_rows}
    keys = staged_keys(home)
    assert set(keys) == GOOD_KEYS - lost and set(keys.values()) == {sha(export)}
    # no row lost without an audit row naming it (by its row number, or holding its text)
    for row in fault.lost_rows:
        assert any(a["row_number"] == row or (a["value"] or "").startswith(f"model-{row},") for a in outcome.audit())
    before.assert_kept(home, staged_unchanged=("swe_bench",))

    server.routes[EPOCH_PATH] = body(zip_of(GOOD_EPOCH))
    assert home.rerun_good(epoch).staged() == before.staged["epoch_hub"]


@dataclass(frozen=True)
class FileFault:
    name: str
    members: dict
    file: str
    reason: str
    row: int | None
    field_name: str | None
    detail: str


FILE_FAULTS = [
    FileFault("renamed_headline_column", {"toy_mc.csv": mc(6).replace(HEADLINE, "Best score")}, "toy_mc.csv",
              "missing_headline_column", None, HEADLINE,
              rf"registered column '{re.escape(HEADLINE)}' is absent .*headline score, so the file is not read"),
    FileFault("renamed_model_id_column", {"toy_agent_external.csv": agent(3).replace("Model version,", "Model,")},
              "toy_agent_external.csv", "missing_key_column", None, "Model version",
              r"'Model version' is absent .*names the model of each row"),
    FileFault("duplicate_header", {"toy_mc.csv": mc(6).replace("stderr,Started at", "stderr,stderr")}, "toy_mc.csv",
              "duplicate_header", 0, "stderr", r"header \(row 0\): repeats \['stderr'\]"),
    FileFault("empty_file", {"toy_mc.csv": b""}, "toy_mc.csv", "empty_file", None, None, r"toy_mc\.csv: empty, no header"),
    FileFault("header_only_file", {"toy_agent_external.csv": AGENT_HEADER}, "toy_agent_external.csv", "empty_file",
              None, None, r"toy_agent_external\.csv: header only, no data rows"),
    FileFault("vanished_file", {"toy_agent_external.csv": None}, "toy_agent_external.csv", "vanished_file", None, None,
              r"toy_agent_external\.csv: not in this snapshot any more \(it had 6 rows\)"),
]


@pytest.mark.parametrize("fault", FILE_FAULTS, ids=[f.name for f in FILE_FAULTS])
def test_an_unreadable_file_keeps_its_last_good_rows(fault, home, epoch, server):
    before = Ledger.take(home)
    good_sha = sha(zip_of(GOOD_EPOCH))
    members = {name: data for name, data in {**GOOD_EPOCH, **fault.members}.items() if data is not None}
    export = zip_of(members)
    server.routes[EPOCH_PATH] = body(export)
    outcome = home.run(epoch, checks=("every_file_read",), config={"max_row_loss_share": 0.9})
    assert outcome.success

    (audited,) = [a for a in outcome.audit(fault.reason) if a["file"] == fault.file]
    assert (audited["row_number"], audited["field"]) == (fault.row, fault.field_name)
    assert re.search(fault.detail, audited["detail"]), audited["detail"]
    (kept,) = [a for a in outcome.audit("kept_last_good_rows") if a["file"] == fault.file]
    assert good_sha[:12] in kept["detail"]
    files = outcome.check("every_file_read")
    assert not files.passed and fault.file in files.metadata["problems"].value

    # the file's rows are the last good ones, byte for byte and with the good snapshot's hash
    keys = staged_keys(home)
    assert set(keys) == GOOD_KEYS
    assert {k: v for k, v in keys.items() if f"/{fault.file}#" in k} == {
        k: good_sha for k in GOOD_KEYS if f"/{fault.file}#" in k}
    good_rows = {r for r in before.staged["epoch_hub"] if f"/{fault.file}#" in r[0]}
    assert good_rows <= set(outcome.staged())
    before.assert_kept(home, staged_unchanged=("swe_bench",))

    server.routes[EPOCH_PATH] = body(zip_of(GOOD_EPOCH))
    assert home.rerun_good(epoch).staged() == before.staged["epoch_hub"]


def test_a_snapshot_that_lost_most_rows_is_rejected_and_kept_on_disk(home, epoch, server):
    before = Ledger.take(home)
    shrunk = zip_of({"toy_mc.csv": mc(1)})
    server.routes[EPOCH_PATH] = body(shrunk)
    outcome = home.run(epoch, checks=("fresh_download_parsed",))
    attempt = outcome.latest_attempt()
    assert outcome.success and attempt["status"] == "rejected_shrunk" and attempt["sha256"] == sha(shrunk)
    assert re.search(r"yields 1 score rows against 12 in the last good snapshot .*Largest losses: "
                     r"toy_agent_external\.csv: 6 -> 0; toy_mc\.csv: 6 -> 1", attempt["error"]), attempt["error"]
    (audited,) = outcome.audit("rejected_snapshot")
    assert audited["snapshot_sha256"] == sha(shrunk)
    assert not outcome.check("fresh_download_parsed").passed
    after = before.assert_kept(home)  # every good row stays in use
    assert after.snapshots[f"{sha(shrunk)[:2]}/{sha(shrunk)}"] == shrunk
    server.routes[EPOCH_PATH] = body(zip_of(GOOD_EPOCH))
    assert home.rerun_good(epoch).staged() == before.staged["epoch_hub"]


def test_an_unregistered_file_is_audited_not_read(home, epoch, server):
    before = Ledger.take(home)
    export = zip_of({**GOOD_EPOCH, "surprise_external.csv": "Model version,Score\nx,0.5\n"})
    server.routes[EPOCH_PATH] = body(export)
    outcome = home.run(epoch, checks=())
    (audited,) = outcome.audit("unregistered_file")
    assert audited["file"] == "surprise_external.csv" and "not in the registry; not read" in audited["detail"]
    assert set(staged_keys(home)) == GOOD_KEYS
    before.assert_kept(home, staged_unchanged=("swe_bench",))
    server.routes[EPOCH_PATH] = body(zip_of(GOOD_EPOCH))
    home.rerun_good(epoch)


def test_duplicate_rows_both_land_with_their_own_row_keys(home, epoch, server):
    """Raw is raw: a row published twice is two reports (the cleaning chain resolves them, see
    test_clean_registry); neither is dropped at ingest."""
    export = zip_of({**GOOD_EPOCH, "toy_mc.csv": mc(6) + mc_lines()[3]})
    server.routes[EPOCH_PATH] = body(export)
    outcome = home.run(epoch, checks=())
    rows = home.query("SELECT row_key, model_id, score FROM raw_scores__epoch_hub WHERE model_id = 'model-3'")
    assert sorted(rows) == [("epoch_hub/toy_mc.csv#3/toy_mc", "model-3", 0.3), ("epoch_hub/toy_mc.csv#7/toy_mc", "model-3", 0.3)]
    assert outcome.audit() == []


@pytest.mark.parametrize("broken", [GOOD_SWE[: len(GOOD_SWE) // 2], b'{"leaderboards": [', GOOD_SWE.replace(b'"', b"'"),
                                    json.dumps({"boards": []}).encode()],
                         ids=["truncated_json", "unterminated_json", "single_quoted_json", "json_of_another_shape"])
def test_broken_json_falls_back_to_the_last_good_snapshot(broken, home, swe_bench, server):
    before = Ledger.take(home)
    server.routes[SWE_PATH] = body(broken, content_type="application/json")
    outcome = home.run(swe_bench, checks=("fresh_download_parsed",))
    attempt = outcome.latest_attempt()
    assert outcome.success and attempt["status"] == "parse_failed" and attempt["sha256"] == sha(broken)
    assert f"swe_bench" in attempt["error"] and sha(broken)[:12] in attempt["error"]
    assert re.search(r"not valid JSON: .*line 1 column \d+|expected an object with a 'leaderboards' list", attempt["error"])
    (audited,) = outcome.audit("unparsable_snapshot")
    assert f"using snapshot {sha(GOOD_SWE)}" in audited["detail"]
    before.assert_kept(home)
    server.routes[SWE_PATH] = body(GOOD_SWE)
    assert home.rerun_good(swe_bench).staged() == before.staged["swe_bench"]
