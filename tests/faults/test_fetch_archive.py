"""Fetch and archive faults through the real epoch_hub source asset and a local HTTP server.

Every case starts from a home where a good snapshot already landed and a publication is current. The
faulty retrieval must (1) leave the run successful (one bad source never stops the others), (2) say what
went wrong, naming the URL, in the attempts table, the source's audit table and the ERROR/WARN checks, and
(3) lose nothing: the good snapshot's bytes, the fetch log and attempts so far, the staged rows (the source
falls back to its last good snapshot) and the publication are as they were. Then the server answers well
again and a re-run lands fresh, passing every check.
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
from dataclasses import dataclass, field

import pytest

from atlas_assets.ingest import archive
from tests.faults.harness import (EPOCH_PATH, GOOD_EPOCH_ZIP, Ledger, body, chunked, closed_port, good_routes,
                                  local_source, mc, sha, slow, truncated, zip_of)


def lying_zip() -> bytes:
    """A member whose headers claim 10 bytes while its data inflates to 200 kB (a zip bomb's trick)."""
    content = bytearray(zip_of({"toy_mc.csv": mc(3) + "x" * 200_000}))
    real = len(mc(3)) + 200_000
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = content.find(signature)
        assert struct.unpack_from("<I", content, at + offset)[0] == real
        struct.pack_into("<I", content, at + offset, 10)
    return bytes(content)


def many_members(n: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as handle:
        for i in range(n):
            handle.writestr(zipfile.ZipInfo(f"part_{i}.csv", date_time=(2026, 4, 1, 0, 0, 0)), "a\n")
    return buffer.getvalue()


@dataclass(frozen=True)
class Fault:
    name: str
    respond: object = None               # the route's responder for the faulty retrieval
    message: str = ""                    # regex the error must match (it must also name the URL)
    status: str = "fetch_failed"         # source_snapshots.status of the faulty attempt
    down: bool = False                   # the source's host refuses connections
    stored: bytes | None = None          # parse faults: the downloaded bytes, kept as an immutable snapshot
    fetcher: dict = field(default_factory=dict)
    caps: dict = field(default_factory=dict)   # archive caps lowered for the case (module attributes)


HTML = b"<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>Checking your browser</body></html>"
SLIP = zip_of({"toy_mc.csv": mc(6), "../../evil.csv": "model,score\nx,1\n"})
ABSOLUTE = zip_of({"toy_mc.csv": mc(6), "/tmp/atlas-fault-absolute.csv": "model,score\nx,1\n"})
BOMB = zip_of({"toy_mc.csv": mc(2) + "0" * 3_000_000})  # ~3 MB of zeros in a ~3 kB download
CORRUPT = GOOD_EPOCH_ZIP[: len(GOOD_EPOCH_ZIP) // 2]
LYING = lying_zip()
CROWD = many_members(archive.MAX_MEMBERS + 1)

FAULTS = [
    Fault("source_down", down=True, message=r"transport error.*gave up after 2 attempts"),
    Fault("http_404", body(b"gone", status=404, content_type="text/plain"), r"HTTP 404 Not Found"),
    Fault("http_500", body(b"boom", status=500, content_type="text/plain"), r"HTTP 500 \(gave up after 2 attempts\)"),
    Fault("http_429", body(b"slow down", status=429, content_type="text/plain"), r"HTTP 429 \(gave up after 2"),
    Fault("timeout", slow(GOOD_EPOCH_ZIP, 1.5), r"timed out after 0\.5s.*gave up after 2 attempts"),
    Fault("truncated_body", truncated(GOOD_EPOCH_ZIP, 40), r"(truncated body|transport error).*gave up after 2"),
    Fault("declared_over_size_cap", body(b"z" * 5000), r"Content-Length 5000 is over the 2000-byte cap",
          fetcher={"max_bytes": 2000}),
    Fault("streamed_over_size_cap", chunked(b"z" * 50_000, chunk=4096), r"body exceeds the 20000-byte cap",
          fetcher={"max_bytes": 20_000}),
    Fault("html_instead_of_zip", body(HTML, content_type="text/html"), r"received an HTML page",
          status="parse_failed", stored=HTML),
    Fault("zip_slip_entry", body(SLIP), r"member '\.\./\.\./evil\.csv' would escape the archive",
          status="parse_failed", stored=SLIP),
    Fault("absolute_path_entry", body(ABSOLUTE), r"member '/tmp/atlas-fault-absolute\.csv' would escape",
          status="parse_failed", stored=ABSOLUTE),
    Fault("zip_bomb_over_uncompressed_cap", body(BOMB), r"\d+ bytes uncompressed, over the cap of 1000000",
          status="parse_failed", stored=BOMB, caps={"MAX_TOTAL_BYTES": 1_000_000}),
    Fault("zip_bomb_lying_header", body(LYING), r"member 'toy_mc\.csv' is corrupt",
          status="parse_failed", stored=LYING),
    Fault("too_many_members", body(CROWD), rf"{archive.MAX_MEMBERS + 1} members, over the cap of {archive.MAX_MEMBERS}",
          status="parse_failed", stored=CROWD),
    Fault("corrupt_zip", body(CORRUPT), r"not a zip archive|corrupt zip", status="parse_failed", stored=CORRUPT),
]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_a_bad_retrieval_is_named_and_loses_nothing(fault, home, epoch, server, monkeypatch, tmp_path):
    for cap, value in fault.caps.items():
        monkeypatch.setattr(archive, cap, value)
    good_sha = sha(GOOD_EPOCH_ZIP)
    before = Ledger.take(home)

    source = local_source("epoch_hub", f"http://127.0.0.1:{closed_port()}/benchmark_data.zip") if fault.down else epoch
    if fault.respond is not None:
        server.routes[EPOCH_PATH] = fault.respond
    outcome = home.run(source, **fault.fetcher)

    # the run goes on; the error names the URL and what happened, everywhere a user looks
    assert outcome.success
    attempt = outcome.latest_attempt()
    assert attempt["status"] == fault.status and attempt["parsed_ok"] is False
    # a fetch error names the URL it tried; a parse error names the source and the snapshot it could not read
    named = [source.url] if fault.status == "fetch_failed" else ["epoch_hub", sha(fault.stored)[:12]]
    assert all(n in attempt["error"] for n in named) and re.search(fault.message, attempt["error"]), attempt["error"]
    reason = "fetch_failed" if fault.status == "fetch_failed" else "unparsable_snapshot"
    (audited,) = outcome.audit(reason)
    assert re.search(fault.message, audited["detail"]) and f"using snapshot {good_sha}" in audited["detail"]
    scrape, fresh = outcome.check("scrape_succeeded"), outcome.check("fresh_download_parsed")
    assert not fresh.passed and re.search(fault.message, fresh.metadata["error"].value)
    assert scrape.passed is (fault.status != "fetch_failed")  # a parse failure is a download that worked
    if not scrape.passed:
        assert source.url in scrape.metadata["error"].value and good_sha in scrape.metadata["snapshots_in_use"].value
    assert outcome.metadata()["fallback_snapshot"] == good_sha

    # nothing lost: the good snapshot, the history, the staged rows, the publication
    after = before.assert_kept(home)
    if fault.stored is not None:
        # the unusable download is kept too (raw downloads are immutable evidence), under its own hash
        assert after.snapshots[f"{sha(fault.stored)[:2]}/{sha(fault.stored)}"] == fault.stored
        assert attempt["sha256"] == sha(fault.stored)
    else:
        assert after.snapshots == before.snapshots and attempt["sha256"] is None
    assert not list(tmp_path.rglob("evil.csv")) and not (tmp_path.parent / "evil.csv").exists()
    assert not list(home.root.rglob("atlas-fault-absolute.csv"))

    # the source answers well again: a fresh, good retrieval of the same rows
    good_routes(server)
    again = home.rerun_good(epoch)
    assert again.latest_attempt()["sha256"] == good_sha and again.staged() == before.staged["epoch_hub"]
