"""The report, built from a published folder only: its sections and images, its numbers equal to the published
files', and a visible note where validation results are missing."""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser

import duckdb
import pandas as pd
import pytest

from atlas_assets.publish import store
from atlas_assets.publish.artifacts import VALIDATION_ARTIFACTS, collect_publication
from atlas_assets.publish.config import load_publish_config
from atlas_assets.publish.report import REPORT_FILE, REPORT_RECORD, build_report
from tests.publish.fixtures import make_home

SECTIONS = ["leaderboard", "gates", "skills", "beyond", "reasoning", "difficulty", "reliability", "quality",
            "comparability", "scale", "cost", "calibration", "forward", "dimensionality", "method"]
PNG = b"\x89PNG\r\n\x1a\n"


class TableRows(HTMLParser):
    """The cell texts of each row of the table with the given id."""

    def __init__(self, table_id: str):
        super().__init__()
        self.table_id, self.inside, self.rows, self.cell = table_id, False, [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table" and dict(attrs).get("id") == self.table_id:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag == "td":
            self.cell = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif self.inside and tag == "td":
            self.rows[-1].append(self.cell)
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def published(root, bundle, **changes):
    """A publication of the fixture fit (with `changes` to its tables) under `root`; its version folder.
    The report reads this folder only: the ATLAS_HOME it came from is deleted before the report is built."""
    home = root / "home"
    fit_dir = make_home(home, bundle, **changes)
    with duckdb.connect(str(home / "atlas.duckdb")) as conn:
        publication = collect_publication(conn, fit_dir)
    outcome = store.publish(publication, root / "publications")
    shutil.rmtree(home)
    return outcome.folder


def published_report(root, bundle, **changes):
    """(version folder, its report page) of a publication of the fixture fit with `changes` to its tables."""
    folder = published(root, bundle, **changes)
    out = root / "report"
    out.mkdir()
    build_report(folder, out, load_publish_config()["report"])
    return folder, (out / REPORT_FILE).read_text()


@pytest.fixture(scope="module")
def full_report(tmp_path_factory, bundle):
    root = tmp_path_factory.mktemp("report_full")
    folder = published(root, bundle)
    out = root / "report"
    out.mkdir()
    return folder, out, build_report(folder, out, load_publish_config()["report"])


def test_report_has_every_section_and_its_images(full_report):
    folder, out, result = full_report
    page = (out / REPORT_FILE).read_text()
    assert result.sections == SECTIONS and result.notes == []
    for section in SECTIONS:
        assert f'<section id="{section}">' in page and f'href="#{section}"' in page
    for image in ("leaderboard", "difficulty", "reliability", "calibration", "forward"):
        assert f'<img src="{image}.png"' in page
        assert (out / f"{image}.png").read_bytes().startswith(PNG)
        assert result.images[image].startswith(PNG)  # the small copy for the asset's metadata
    assert "<script" not in page and "http" not in page.split("<main>")[0]  # self-contained: no scripts, no CDN
    record = json.loads((out / REPORT_RECORD).read_text())
    assert record["publication"] == folder.name
    assert record["content_sha256"] == store.read_manifest(folder)["content_sha256"]


def test_report_notes_a_publication_without_quality_or_verdicts(full_report):
    _, out, _ = full_report  # the fixture home has neither table: both are published empty
    page = (out / REPORT_FILE).read_text()
    assert "has no family_quality rows" in page and "has no comparability_verdicts rows" in page


def test_report_leaderboard_numbers_equal_the_published_model_scores(full_report):
    folder, out, _ = full_report
    scores = pd.read_csv(folder / "model_scores.csv")
    expected = scores[scores["headline_status"] == "published"].sort_values(
        ["display_mean", "model"], ascending=[False, True]).head(load_publish_config()["report"]["leaderboard_models"])
    parser = TableRows("leaderboard-table")
    parser.feed((out / REPORT_FILE).read_text())
    rows = [row for row in parser.rows if row]  # the header row has no td
    assert len(rows) == len(expected) > 10
    for row, (_, published_row) in zip(rows, expected.iterrows()):
        rank, model, state, mean, interval = row[:5]
        assert model == published_row["model"] and state.startswith(published_row["headline_state"])
        assert mean == f"{published_row['display_mean']:.1f}"
        assert interval == f"{published_row['display_lower']:.1f} – {published_row['display_upper']:.1f}"


def test_report_shows_the_published_reliability_grades_and_difficulty(full_report):
    folder, out, _ = full_report
    page = (out / REPORT_FILE).read_text()
    grades = pd.read_csv(folder / "reliability_grades.csv")
    for _, row in grades.iterrows():
        assert f"<td>{row['family']}</td><td>{row['grade']}</td>" in page
    bounds = pd.read_csv(folder / "difficulty_bounds.csv")
    flagged = bounds[bounds["bound"].notna()]
    assert f"{len(flagged)} of {len(bounds)} families are reported as bounds" in page
    assert any(f"<td class=n>{d}</td>" in page for d in flagged["difficulty_display"])  # a bound is drawn


def test_report_notes_missing_validation_instead_of_failing(tmp_path, bundle):
    folder = published(tmp_path, bundle, drop=VALIDATION_ARTIFACTS)
    out = tmp_path / "report"
    out.mkdir()
    result = build_report(folder, out, load_publish_config()["report"])
    page = (out / REPORT_FILE).read_text()
    assert result.sections == SECTIONS
    assert len(result.notes) == 2 and all("No validation results" in n for n in result.notes)
    assert page.count('<p class="note">No validation results to show: validation_') == 2
    assert not (out / "calibration.png").exists() and not (out / "forward.png").exists()
    assert (out / "leaderboard.png").exists()


def test_the_report_says_where_every_capability_comes_from(tmp_path):
    """The 'Beyond the fit' section counts the published capabilities per path (fitted, calibrated at a measured
    setting or at one without results, predicted settings of fitted models, unknown-setting runs)."""
    from types import SimpleNamespace

    from atlas_assets.publish.report import _score_paths

    pd.DataFrame({"model": ["a", "a", "b"]}).to_csv(tmp_path / "state_scores.csv", index=False)
    version = SimpleNamespace(optional_table=lambda name: pd.read_csv(tmp_path / f"{name}.csv")
                              if (tmp_path / f"{name}.csv").exists() else pd.DataFrame())
    calibrated = pd.DataFrame({"model": ["n", "n", "m"], "n_obs": [2, 0, 1]})
    predicted = pd.DataFrame({"model": ["a"]})
    unknown = pd.DataFrame({"model": ["a", "b"]})
    rows = dict((label, n) for label, n in _score_paths(version, calibrated, predicted, unknown))
    assert rows == {"fitted (the main fit's posterior)": 3,
                    "calibrated onto the fit from the model's own results": 2,
                    "calibrated model, setting without results (reasoning structure)": 1,
                    "fitted model, setting without results (reasoning structure)": 1,
                    "fitted model, unknown setting (mixture over its settings)": 2}
    assert _score_paths(version, pd.DataFrame(), pd.DataFrame(), pd.DataFrame()) == [
        ["fitted (the main fit's posterior)", 3]]


def test_report_lists_withheld_headlines_with_their_reason_and_leaves_them_off_the_leaderboard(full_report):
    folder, out, _ = full_report
    page = (out / REPORT_FILE).read_text()
    gates = pd.read_csv(folder / "headline_gates.csv")
    withheld = gates[gates["headline_state"] & ~gates["gate_pass"]]
    assert len(withheld) > 0  # the fixture's rule bites
    parser = TableRows("gate-withheld-table")
    parser.feed(page)
    rows = {row[0]: row for row in parser.rows if row}
    assert set(rows) == set(withheld["model"])
    for _, r in withheld.iterrows():
        assert rows[r["model"]][-1] == r["reason"]
    board = TableRows("leaderboard-table")
    board.feed(page)
    assert not {row[1] for row in board.rows if row} & set(withheld["model"])
    models = pd.read_csv(folder / "model_scores.csv").set_index("model")
    assert (models.loc[withheld["model"], "headline_status"] == "not enough evidence").all()


def test_report_shows_the_published_skill_scores_per_category(full_report):
    folder, out, _ = full_report
    page = (out / REPORT_FILE).read_text()
    skills = pd.read_csv(folder / "skill_scores.csv")
    published = skills[skills["status"] == "published"]
    for category, rows in published.groupby("category"):
        parser = TableRows(f"skill-{category}-table")
        parser.feed(page)
        shown = [row for row in parser.rows if row]
        best = rows.sort_values(["display_mean", "model"], ascending=[False, True]).iloc[0]
        assert shown[0][:3] == [best["model"], best["reasoning_state"], f"{best['display_mean']:.1f}"]
    assert f"{len(published)} skill scores of" in page


def test_calibrated_states_skill_scores_are_published_and_shown_apart_from_the_ranked_ones(tmp_path, bundle):
    """A model outside the fit, calibrated in, with skills in two categories (outputs/skill_scores.py on a constructed
    case): the publication carries them flagged 'calibrated', the report lists them in their own table and counts
    them per category, and they do not enter the ranked per-category tables."""
    from atlas_assets.outputs.skill_scores import calibrated_skill_scores
    from tests.outputs.test_skill_scores import CFG, newcomer_world

    draws, families, membership, calibration, reasoning, priors = newcomer_world(
        {"coding": 2.0, "math": 1.0, "science": 1.5}, theta_prior=(1.5, 0.4), seed=5, n_draws=60,
        families_per_category={"coding": 2, "math": 2, "science": 1})
    taus = pd.DataFrame({"category": ["coding", "math", "science"], "deviation_sd": 0.3})
    calibrated = calibrated_skill_scores(draws, families, calibration, reasoning, priors, membership, taus, CFG, 0.9,
                                         seed=1).assign(fit=bundle.fit)
    folder, page = published_report(tmp_path, bundle, replace={"calibrated_skill_scores": calibrated})
    files = pd.read_csv(folder / "calibrated_skill_scores.csv")
    assert len(files) == 3 and set(files["path"]) == {"calibrated"} and files["category_rank"].isna().all()
    shown = TableRows("calibrated-skill-table")
    shown.feed(page)
    rows = [row for row in shown.rows if row]
    assert sorted(row[0] for row in rows) == ["coding", "math"]            # science: one family, not enough data
    coding = files.set_index("category").loc["coding"]
    assert ["coding", "newcomer", "default", f"{coding['display_mean']:.1f}"] in [row[:4] for row in rows]
    assert "2 skill scores of 1 states of models outside the fit" in page
    summary = TableRows("skill-summary-table")
    summary.feed(page)
    counts = {row[0]: row[3] for row in summary.rows if row}
    assert counts["coding"] == counts["math"] == "1" and counts["science"] == "0" and counts["reasoning"] == "0"
    for category in ("coding", "math"):
        ranked = TableRows(f"skill-{category}-table")
        ranked.feed(page)
        assert "newcomer" not in {row[0] for row in ranked.rows if row}


def test_a_rebase_publishes_its_conversion_and_the_report_says_so(tmp_path, bundle):
    """Two constructed frozen reference versions, the last publication on the older one: the publication carries the
    old->new conversion (versions, alpha, gamma, shared families) and the report tells a reader of the old numbers
    how to read them on the new scale."""
    from atlas_assets.outputs import reference_scale as rs
    from tests.outputs.test_reference_scale import two_frozen_versions

    scales = tmp_path / "reference_scales"
    in_force = two_frozen_versions(scales)
    conversions = rs.conversion_table(in_force, "2026-Q4", 10, scales).assign(fit=bundle.fit)
    folder, page = published_report(tmp_path, bundle, replace={"reference_conversions": conversions})
    files = pd.read_csv(folder / "reference_conversions.csv")
    assert files[["old_version", "new_version", "n_shared_families"]].values.tolist() == [["2026-Q4", "2027-Q2", 12]]
    assert files["since_last_publication"].tolist() == [True] and set(files["fit"]) == {bundle.fit}
    row = files.iloc[0]
    assert (f"A score published on 2026-Q4 reads as {row['alpha']:.2f} + {row['gamma']:.4f} × that score on 2027-Q2"
            in page)
    shown = TableRows("reference-conversions")
    shown.feed(page)
    assert [r for r in shown.rows if r] == [["2026-Q4", "2027-Q2", f"{row['alpha']:.3f}", f"{row['gamma']:.5f}", "12",
                                            "yes"]]
