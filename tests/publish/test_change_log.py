"""The method change log (CHANGES.md) and the script that measures a change between two publications."""

from __future__ import annotations

import json

import duckdb
import pandas as pd
import pytest

from atlas_assets.publish import store
from atlas_assets.publish.artifacts import collect_publication
from atlas_assets.publish.changes import CHANGE_LOG, ChangeLogError, newest_entry, read_entries
from atlas_assets.publish.compare_publications import compare, main
from tests.publish.fixtures import make_home


def test_the_repository_log_parses_oldest_first_with_an_effect_in_every_entry():
    entries = read_entries()
    assert [e.version for e in entries][:3] == ["atlas-1", "atlas-2", "atlas-3"]
    assert all("Effect" in e.body for e in entries)
    assert newest_entry() == entries[-1]


@pytest.mark.parametrize("text, message", [
    ("## v1 · 2026-12-02 · a\nEffect: x\n## v2 · 2026-12-01 · b\nEffect: y\n", "dated before the entry above"),
    ("## v1 · 2026-12-01 · a\nEffect: x\n## v1 · 2026-12-02 · b\nEffect: y\n", "version v1 appears twice"),
    ("## v1 - 2026-12-01 - a\nEffect: x\n", "line 1: an entry heading must read"),
    ("## v1 · 2026-12-01 · a\nWhat changed: x\n", "states no measured effect"),
    ("# Method change log\n", "no entries"),
])
def test_a_malformed_log_is_refused_naming_the_line(tmp_path, text, message):
    path = tmp_path / "CHANGES.md"
    path.write_text(text)
    with pytest.raises(ChangeLogError, match=message):
        read_entries(path)


def test_the_published_methodology_carries_the_newest_method_version(tmp_path, bundle):
    home = tmp_path / "home"
    fit_dir = make_home(home, bundle)
    with duckdb.connect(str(home / "atlas.duckdb")) as conn:
        publication = collect_publication(conn, fit_dir)
    folder = store.publish(publication, tmp_path / "publications").folder
    recorded = json.loads((folder / "methodology.json").read_text())["method_version"]
    newest = read_entries(CHANGE_LOG)[-1]
    assert (recorded["version"], recorded["date"], recorded["title"]) == (newest.version, newest.date, newest.title)


def _publication(folder, states, models, forward_rmse, headline=None, version="v1"):
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"name": folder.name}))
    (folder / "methodology.json").write_text(json.dumps({"method_version": {"version": version}}))
    frame = pd.DataFrame(states, columns=["model", "reasoning_state", "display_mean"])
    frame["display_lower"], frame["display_upper"] = frame["display_mean"] - 5, frame["display_mean"] + 5
    if headline is not None:
        frame["headline"] = headline
    frame.to_csv(folder / "state_scores.csv", index=False)
    pd.DataFrame(models, columns=["model", "headline_state", "display_mean", "headline_status"]).to_csv(
        folder / "model_scores.csv", index=False)
    pd.DataFrame({"study": ["forward", "forward", "masked"], "method": ["atlas", "eci_form", "atlas"],
                  "rmse_points": [forward_rmse, 99.0, 1.0]}).to_csv(folder / "validation_metrics.csv", index=False)
    return folder


def test_compare_measures_headlines_score_changes_order_and_forward_rmse(tmp_path, capsys):
    old = _publication(tmp_path / "old", [("a", "high", 150), ("b", "default", 140), ("c", "default", 130),
                                          ("d", "default", 120)],
                       [("a", "high", 150, "published"), ("b", "default", 140, "published"),
                        ("c", "default", 130, "published"), ("d", "default", 120, "not enough evidence")],
                       10.5, headline=[True, True, True, False], version="v1")
    new = _publication(tmp_path / "new", [("a", "high", 138), ("b", "default", 141), ("c", "default", 130),
                                          ("e", "default", 125)],
                       [("a", "high", 138, "published"), ("b", "default", 141, "published"),
                        ("c", "default", 130, "not enough evidence"), ("e", "default", 125, "published")],
                       9.75, headline=[True, True, False, True], version="v2")
    result = compare(old, new, top=3)
    assert result["method_version"] == {"old": "v1", "new": "v2"}
    assert result["states"] == {"old": 4, "new": 4, "added": 1, "removed": 1}
    assert result["state_headlines"]["gained"] == [("e", "default")]
    assert result["state_headlines"]["lost"] == [("c", "default")]
    assert result["model_headlines"]["gained"] == ["e"] and result["model_headlines"]["lost"] == ["c"]
    change = result["score_change"]
    assert (change["largest"], change["largest_state"], change["states_in_both"]) == (-12.0, "a high", 3)
    assert change["share_within_old_interval"] == pytest.approx(2 / 3)  # a moved 12 > half its 10-point interval
    top = result["top"]
    assert top["entered"] == ["e"] and top["left"] == ["c"] and top["moved"] == [("b", 2, 1), ("a", 1, 2)]
    assert result["forward_rmse_points"] == {"old": {"forward": 10.5}, "new": {"forward": 9.75}}
    assert main([str(old), str(new), "--top", "3"]) == 0
    printed = capsys.readouterr().out
    assert "largest score change among 3 states in both: -12.0 (a high: 150.0 -> 138.0)" in printed
    assert "before forward 10.50; after forward 9.75" in printed


def test_compare_says_na_without_a_headline_column_and_refuses_a_non_publication(tmp_path, capsys):
    old = _publication(tmp_path / "old", [("a", "high", 150)], [("a", "high", 150, "published")], 10.0)
    new = _publication(tmp_path / "new", [("a", "high", 150)], [("a", "high", 150, "published")], 10.0)
    result = compare(old, new)
    assert result["state_headlines"].startswith("n/a: state_scores has no headline column")
    assert result["top"]["same_order"] and result["score_change"]["largest"] == 0.0
    assert main([str(old), str(tmp_path / "missing")]) == 2
    assert "not a publication folder" in capsys.readouterr().err
