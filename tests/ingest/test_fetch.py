"""The fetcher against a real local HTTP server (pytest-httpserver), and the offline mirror."""

from __future__ import annotations

import hashlib
import os
import stat
import time

import pytest
from werkzeug import Response

from atlas_assets.ingest.fetch import FetchError, SourceFetcher, mirror_path
from atlas_assets.ingest.snapshots import SnapshotStore

BODY = b"model,score\na,0.5\n"


def make_fetcher(tmp_path, **overrides) -> SourceFetcher:
    options = {"snapshot_dir": str(tmp_path / "snapshots"), "backoff_seconds": 0.01, "max_attempts": 3, "timeout_seconds": 2.0}
    options.update(overrides)
    return SourceFetcher(**options)


def stored_files(tmp_path):
    root = tmp_path / "snapshots" / "sha256"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_success_stores_content_addressed_read_only_snapshot(httpserver, tmp_path):
    httpserver.expect_request("/data.csv").respond_with_data(BODY, content_type="text/csv")
    result = make_fetcher(tmp_path).fetch(httpserver.url_for("/data.csv"))

    assert result.sha256 == hashlib.sha256(BODY).hexdigest()
    assert result.bytes == len(BODY) and result.origin == "live" and result.changed
    assert result.path.read_bytes() == BODY
    assert result.path.name == result.sha256
    assert not (os.stat(result.path).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    history = SnapshotStore(tmp_path / "snapshots").history(result.url)
    assert [h.sha256 for h in history] == [result.sha256]


def test_retry_after_server_error_then_success(httpserver, tmp_path):
    httpserver.expect_ordered_request("/flaky").respond_with_data("boom", status=500)
    httpserver.expect_ordered_request("/flaky").respond_with_data("boom", status=503)
    httpserver.expect_ordered_request("/flaky").respond_with_data(BODY)
    result = make_fetcher(tmp_path).fetch(httpserver.url_for("/flaky"))
    assert result.path.read_bytes() == BODY
    assert len(httpserver.log) == 3


def test_persistent_500_gives_up_after_bounded_attempts_and_stores_nothing(httpserver, tmp_path):
    httpserver.expect_request("/down").respond_with_data("boom", status=500)
    with pytest.raises(FetchError, match=r"HTTP 500.*gave up after 3 attempts"):
        make_fetcher(tmp_path).fetch(httpserver.url_for("/down"))
    assert len(httpserver.log) == 3
    assert stored_files(tmp_path) == []


def test_404_is_final_without_retries(httpserver, tmp_path):
    httpserver.expect_request("/missing").respond_with_data("nope", status=404)
    with pytest.raises(FetchError, match="HTTP 404"):
        make_fetcher(tmp_path).fetch(httpserver.url_for("/missing"))
    assert len(httpserver.log) == 1


def test_timeout_is_retried_then_reported(httpserver, tmp_path):
    def slow(_request):
        time.sleep(1.0)
        return Response(BODY)

    httpserver.expect_request("/slow").respond_with_handler(slow)
    with pytest.raises(FetchError, match="timed out"):
        make_fetcher(tmp_path, timeout_seconds=0.2, max_attempts=2).fetch(httpserver.url_for("/slow"))
    assert stored_files(tmp_path) == []


def test_truncated_body_is_rejected(httpserver, tmp_path):
    def truncated(_request):
        response = Response(BODY[:5])
        response.headers["Content-Length"] = str(len(BODY))
        response.automatically_set_content_length = False
        return response

    httpserver.expect_request("/cut").respond_with_handler(truncated)
    with pytest.raises(FetchError, match="truncated|transport error|incomplete"):
        make_fetcher(tmp_path, max_attempts=2).fetch(httpserver.url_for("/cut"))
    assert stored_files(tmp_path) == []


def test_size_cap(httpserver, tmp_path):
    httpserver.expect_request("/big").respond_with_data(b"x" * 5000)
    with pytest.raises(FetchError, match="cap"):
        make_fetcher(tmp_path, max_bytes=1000).fetch(httpserver.url_for("/big"))
    assert stored_files(tmp_path) == []


def test_conditional_request_reuses_snapshot_on_304(httpserver, tmp_path):
    def conditional(request):
        if request.headers.get("If-None-Match") == '"v1"':
            return Response(status=304)
        return Response(BODY, headers={"ETag": '"v1"', "Last-Modified": "Wed, 01 Apr 2026 00:00:00 GMT"})

    httpserver.expect_request("/cond").respond_with_handler(conditional)
    fetcher = make_fetcher(tmp_path)
    first = fetcher.fetch(httpserver.url_for("/cond"))
    second = fetcher.fetch(httpserver.url_for("/cond"))

    assert httpserver.log[1][0].headers.get("If-None-Match") == '"v1"'
    assert httpserver.log[1][0].headers.get("If-Modified-Since") == "Wed, 01 Apr 2026 00:00:00 GMT"
    assert second.not_modified and not second.changed
    assert second.sha256 == first.sha256 and second.bytes == len(BODY)
    assert len(stored_files(tmp_path)) == 1


def test_changed_content_is_a_new_snapshot_and_the_old_one_stays(httpserver, tmp_path):
    httpserver.expect_ordered_request("/v").respond_with_data(BODY)
    httpserver.expect_ordered_request("/v").respond_with_data(BODY + b"b,0.7\n")
    fetcher = make_fetcher(tmp_path)
    first = fetcher.fetch(httpserver.url_for("/v"))
    second = fetcher.fetch(httpserver.url_for("/v"))
    assert second.changed and second.previous_sha256 == first.sha256
    assert first.path.read_bytes() == BODY  # untouched
    assert len(stored_files(tmp_path)) == 2


def test_mirror_maps_host_and_path(tmp_path):
    mirror = tmp_path / "mirror"
    target = mirror / "example.org" / "data" / "file.zip"
    target.parent.mkdir(parents=True)
    target.write_bytes(BODY)
    fetcher = make_fetcher(tmp_path, mirror=str(mirror))
    result = fetcher.fetch("https://example.org/data/file.zip")
    assert result.origin == "mirror" and result.path.read_bytes() == BODY
    with pytest.raises(FetchError, match="offline mirror has no file"):
        fetcher.fetch("https://example.org/data/other.zip")
    with pytest.raises(FetchError, match="outside the mirror"):
        mirror_path(mirror, "https://example.org/../../etc/passwd")


# --- issue 7 item 11: every attempt is recorded, failed ones too
def test_failed_attempts_are_recorded_and_never_taken_for_a_good_snapshot(httpserver, tmp_path):
    httpserver.expect_ordered_request("/gone").respond_with_data(BODY)
    httpserver.expect_ordered_request("/gone").respond_with_data("nope", status=404)
    fetcher = make_fetcher(tmp_path)
    url = httpserver.url_for("/gone")
    good = fetcher.fetch(url)
    with pytest.raises(FetchError, match="HTTP 404") as raised:
        fetcher.fetch(url)
    store = SnapshotStore(tmp_path / "snapshots")
    history = store.history(url)
    assert [(h.sha256, h.status, h.error is None) for h in history] == [(good.sha256, 200, True), ("", 404, False)]
    assert "HTTP 404" in history[-1].error
    assert raised.value.attempt == history[-1]
    assert store.last_good(url).sha256 == good.sha256


def test_mirror_without_the_file_is_a_recorded_attempt(tmp_path):
    fetcher = make_fetcher(tmp_path, mirror=str(tmp_path / "mirror"))
    with pytest.raises(FetchError, match="offline mirror has no file") as raised:
        fetcher.fetch("https://example.org/data/file.zip")
    attempt = raised.value.attempt
    assert attempt.origin == "mirror" and attempt.sha256 == "" and "offline mirror has no file" in attempt.error
    assert SnapshotStore(tmp_path / "snapshots").history("https://example.org/data/file.zip") == [attempt]
