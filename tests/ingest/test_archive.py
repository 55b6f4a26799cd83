"""Archive safety: HTML instead of a zip, corruption, traversal, size caps, wrapping folders."""

from __future__ import annotations

import io
import zipfile

import pytest

from atlas_assets.ingest import archive
from atlas_assets.ingest.archive import ArchiveError, read_zip_members


def make_zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as handle:
        for name, data in members.items():
            handle.writestr(name, data)
    return buffer.getvalue()


def test_reads_members_and_strips_a_wrapping_folder():
    content = make_zip({"benchmark_data/a.csv": b"x", "benchmark_data/sub/b.csv": b"y"})
    assert read_zip_members(content, label="t") == {"a.csv": b"x", "sub/b.csv": b"y"}


def test_html_page_is_rejected_with_a_clear_message():
    with pytest.raises(ArchiveError, match="received an HTML page"):
        read_zip_members(b"<!DOCTYPE html><html><body>Rate limited</body></html>", label="epoch_hub")


def test_corrupt_zip_is_rejected():
    content = make_zip({"a.csv": b"x" * 1000})
    with pytest.raises(ArchiveError, match="epoch_hub"):
        read_zip_members(content[: len(content) // 2], label="epoch_hub")
    corrupted = bytearray(content)
    corrupted[40:60] = b"\x00" * 20  # damage the compressed data of the only member
    with pytest.raises(ArchiveError):
        read_zip_members(bytes(corrupted), label="epoch_hub")


def test_path_traversal_is_refused():
    with pytest.raises(ArchiveError, match="escape"):
        read_zip_members(make_zip({"../evil.csv": b"x"}), label="t")
    with pytest.raises(ArchiveError, match="escape"):
        read_zip_members(make_zip({"/etc/passwd": b"x"}), label="t")


def test_uncompressed_size_is_capped(monkeypatch):
    monkeypatch.setattr(archive, "MAX_TOTAL_BYTES", 10_000)
    with pytest.raises(ArchiveError, match="over the cap"):
        read_zip_members(make_zip({"bomb.csv": b"0" * 50_000}), label="t")
