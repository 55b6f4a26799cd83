"""Versions on disk: atomic writes, the pointer switched last, earlier versions kept, no duplicates, tampering caught."""

from __future__ import annotations

import json

import duckdb
import pandas as pd
import pytest

from atlas_assets.publish import store
from atlas_assets.publish.artifacts import collect_publication
from tests.publish.fixtures import make_home


@pytest.fixture
def publication(tmp_path, bundle):
    fit_dir = make_home(tmp_path / "home", bundle)
    with duckdb.connect(str(tmp_path / "home" / "atlas.duckdb")) as conn:
        return collect_publication(conn, fit_dir)


def changed(publication, value: float):
    """The same publication with one number moved (as a refit would)."""
    import copy

    other = copy.copy(publication)
    other.tables = dict(publication.tables)
    item = copy.copy(publication.tables["model_scores"])
    item.frame = item.frame.assign(p_rank1=value)
    other.tables["model_scores"] = item
    return other


def snapshot(root):
    """Every file under the publications root (but the lock) with its bytes: what a reader could see."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".lock"}


def test_a_publication_is_a_verified_version_that_current_names(tmp_path, publication):
    root = tmp_path / "publications"
    outcome = store.publish(publication, root)
    assert outcome.created and store.current_name(root) == outcome.name == outcome.folder.name
    assert store.list_versions(root) == [outcome.name]
    assert store.verify_publication(outcome.folder) == []
    manifest = store.read_manifest(outcome.folder)
    assert manifest["stamps"] == publication.stamps.as_dict()
    for artifact, item in publication.tables.items():
        for suffix in ("csv", "parquet"):
            record = manifest["files"][f"{artifact}.{suffix}"]
            assert record["rows"] == len(item.frame)
            assert record["sha256"] == store.sha256_file(outcome.folder / f"{artifact}.{suffix}")
    parquet = duckdb.sql(f"SELECT * FROM read_parquet('{outcome.folder / 'model_scores.parquet'}')").df()
    csv = pd.read_csv(outcome.folder / "model_scores.csv")
    assert list(parquet["display_mean"]) == pytest.approx(list(csv["display_mean"]))
    methodology = json.loads((outcome.folder / "methodology.json").read_text())
    assert methodology["stamps"] == manifest["stamps"]
    assert not list(root.glob(".staging-*"))


def test_a_failure_mid_publish_leaves_the_previous_publication_and_pointer_intact(tmp_path, publication, monkeypatch):
    root = tmp_path / "publications"
    first = store.publish(publication, root)
    before = snapshot(root)
    real_writer, written = store.write_table_files, []

    def failing_writer(frame, folder, name, conn):
        if len(written) == 3:
            raise OSError("disk full (injected)")
        written.append(name)
        return real_writer(frame, folder, name, conn)

    monkeypatch.setattr(store, "write_table_files", failing_writer)
    with pytest.raises(OSError, match="injected"):
        store.publish(changed(publication, 0.5), root)
    assert len(written) == 3  # the failure came part-way through, after files were written
    assert snapshot(root) == before  # nothing a reader can see changed, no staging left behind
    assert store.current_name(root) == first.name and store.verify_publication(first.folder) == []


def test_a_failure_at_the_pointer_switch_leaves_the_previous_publication_current(tmp_path, publication, monkeypatch):
    root = tmp_path / "publications"
    first = store.publish(publication, root)
    before = snapshot(root)

    def failing_switch(root_, name):
        raise OSError("rename failed (injected)")

    monkeypatch.setattr(store, "_switch_pointer", failing_switch)
    with pytest.raises(OSError, match="injected"):
        store.publish(changed(publication, 0.5), root)
    assert snapshot(root) == before  # the renamed but never pointed-to version is gone too
    assert store.list_versions(root) == [first.name]


def test_a_second_publication_keeps_the_first_readable(tmp_path, publication):
    root = tmp_path / "publications"
    first = store.publish(publication, root)
    first_files = snapshot(first.folder)
    second = store.publish(changed(publication, 0.25), root)
    assert second.created and second.name != first.name and second.previous == first.name
    assert store.current_name(root) == second.name
    assert store.list_versions(root) == sorted([first.name, second.name])
    assert snapshot(first.folder) == first_files
    assert store.verify_publication(first.folder) == [] and store.verify_publication(second.folder) == []


def test_the_same_content_is_not_published_twice(tmp_path, publication):
    root = tmp_path / "publications"
    first = store.publish(publication, root)
    again = store.publish(publication, root)
    assert not again.created and not again.pointer_moved and again.name == first.name
    assert store.list_versions(root) == [first.name]
    # after another publication, republishing the first content points back at the first version
    second = store.publish(changed(publication, 0.25), root)
    back = store.publish(publication, root)
    assert not back.created and back.pointer_moved and back.name == first.name
    assert store.current_name(root) == first.name and len(store.list_versions(root)) == 2
    assert second.name in store.list_versions(root)
    # a version damaged on disk is not reused: the same content gets a new, intact version
    damaged = first.folder / "reasoning_effects.csv"
    damaged.chmod(0o644)
    damaged.write_text(damaged.read_text() + "\n")
    fresh = store.publish(publication, root)
    assert fresh.created and fresh.name not in (first.name, second.name)
    assert store.verify_publication(fresh.folder) == [] and len(store.list_versions(root)) == 3


def test_tampering_with_a_published_file_fails_verification(tmp_path, publication):
    outcome = store.publish(publication, tmp_path / "publications")
    target = outcome.folder / "model_scores.csv"
    assert target.stat().st_mode & 0o222 == 0  # published read-only
    target.chmod(0o644)
    text = target.read_text()
    first_value = text.splitlines()[1].split(",")[3]
    target.write_text(text.replace(first_value, str(float(first_value) + 1.0), 1))
    assert any("model_scores.csv: sha256 differs" in p for p in store.verify_publication(outcome.folder))


def test_stamps_disagreeing_with_the_manifest_fail_verification(tmp_path, publication):
    outcome = store.publish(publication, tmp_path / "publications")
    # another fit's rows slipped in, with the manifest's hash and size made to match: only the stamps can tell
    path = outcome.folder / "difficulty_bounds.csv"
    assert path.stat().st_mode & 0o222 == 0  # published read-only
    path.chmod(0o644)
    (outcome.folder / store.MANIFEST).chmod(0o644)
    frame = pd.read_csv(path)
    frame.loc[0, "fit"] = "another-fit"
    frame.to_csv(path, index=False)
    manifest = store.read_manifest(outcome.folder)
    manifest["files"][path.name].update(sha256=store.sha256_file(path), bytes=path.stat().st_size)
    (outcome.folder / store.MANIFEST).write_text(json.dumps(manifest))
    problems = store.verify_publication(outcome.folder)
    assert problems and all("difficulty_bounds" in p for p in problems) and "another-fit" in problems[0]


def test_an_unlisted_file_in_a_version_fails_verification(tmp_path, publication):
    outcome = store.publish(publication, tmp_path / "publications")
    (outcome.folder / "extra.csv").write_text("a\n1\n")
    assert any("not in the manifest" in p for p in store.verify_publication(outcome.folder))


def test_report_link_is_switched_atomically_and_a_failed_build_keeps_the_old_report(tmp_path, publication):
    outcome = store.publish(publication, tmp_path / "publications")

    def build(text):
        def write(out):
            (out / "index.html").write_text(text)
            return text
        return write

    link, result = store.install_report(outcome.folder, build("first"))
    assert result == "first" and (link / "index.html").read_text() == "first" and link.is_symlink()

    def broken(out):
        (out / "index.html").write_text("half")
        raise RuntimeError("figure failed (injected)")

    with pytest.raises(RuntimeError, match="injected"):
        store.install_report(outcome.folder, broken)
    assert (link / "index.html").read_text() == "first"
    link, _ = store.install_report(outcome.folder, build("second"))
    assert (link / "index.html").read_text() == "second"
    assert len(list(outcome.folder.glob("report-*"))) == 1 and not list(outcome.folder.glob(".report-*"))
    assert store.verify_publication(outcome.folder) == []  # the report lives beside the manifest's files
