"""What goes into a publication, and the refusals: another fit's rows, a fingerprint that is not the fit's,
a missing or empty required table. Every refusal names the artifact."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from atlas_assets.publish.artifacts import (
    ARTIFACTS,
    STAMP_COLUMNS,
    VALIDATION_ARTIFACTS,
    PublicationRefused,
    collect_publication,
)
from tests.publish.fixtures import SPEC_SHA256, make_home


def collect(home, fit_dir, required_validation=()):
    with duckdb.connect(str(home / "atlas.duckdb")) as conn:
        return collect_publication(conn, fit_dir, required_validation)


def test_every_artifact_is_stamped_with_the_one_fit_data_hash_and_specification(tmp_path, bundle):
    fit_dir = make_home(tmp_path, bundle)
    publication = collect(tmp_path, fit_dir)
    assert set(publication.tables) == {a.name for a in ARTIFACTS}
    expected = (bundle.fit, bundle.data_sha256, SPEC_SHA256)
    # the fixture home has no calibrated / predicted-state tables (their assets have tests of their own):
    # published empty with a note, still with the stamp columns
    not_in_fixture = {"calibrated_states", "calibrated_cell_predictions", "calibrated_skill_scores",
                      "predicted_states", "predicted_state_cells",
                      "unknown_setting_states", "unknown_setting_cells",
                      "reference_state_scores", "reference_model_scores", "reference_scale_drift",
                      "reference_conversions",
                      "active_panel", "active_panel_scores",
                      "cost_index", "cost_frontier",
                      "family_quality", "family_quality_agreement", "comparability_verdicts"}
    for name, item in publication.tables.items():
        assert len(item.frame) or (name in not_in_fixture and "does not exist" in item.note), name
        assert set(STAMP_COLUMNS) <= set(item.frame.columns), name
        if not len(item.frame):
            continue
        stamps = set(map(tuple, item.frame[list(STAMP_COLUMNS)].drop_duplicates().to_numpy()))
        assert stamps == {expected}, name
    assert publication.methodology["stamps"] == dict(zip(STAMP_COLUMNS, expected))
    # the methodology record: the fit's settings and diagnostics, the cleaning run, the sources
    record = publication.methodology
    assert record["fit"]["engine"] == "synthetic" and record["fit"]["sampler_settings"]["chains"] == 2
    assert record["fit"]["diagnostics"]["max_rhat"] == pytest.approx(1.004)
    assert [s["stage"] for s in record["cleaning_stages"]] == ["oriented_scores", "modeled_observations"]
    assert {s["source"]: s["first_retrieved_at"] for s in record["sources"]}["epoch_hub"].startswith("2026-11-01")
    assert record["configuration"]["model"]["display"]["reference"]
    assert record["configuration"]["publication"] == {"required_validation": []}
    assert "out_dir" not in record["fit"]["summary"] and record["libraries"]["duckdb"] == duckdb.__version__


@pytest.mark.parametrize("artifact", ["difficulty_bounds", "cell_predictions", "validation_metrics"])
def test_refuses_a_table_of_another_fit_and_names_it(tmp_path, bundle, artifact):
    other = bundle.tables[artifact].copy()
    other.loc[other.index[:2], "fit"] = "0000000000000000-1111111111111111-c4w1000d750s1"
    fit_dir = make_home(tmp_path, bundle, replace={artifact: other})
    with pytest.raises(PublicationRefused) as refused:
        collect(tmp_path, fit_dir)
    message = str(refused.value)
    assert artifact in message and "0000000000000000-1111111111111111" in message and bundle.fit in message
    assert len(refused.value.problems) == 1  # only the mismatching table is blamed


def test_refuses_a_table_without_a_fit_stamp(tmp_path, bundle):
    unstamped = bundle.tables["reliability_grades"].drop(columns="fit")
    fit_dir = make_home(tmp_path, bundle, replace={"reliability_grades": unstamped})
    with pytest.raises(PublicationRefused, match="reliability_grades carries no fit stamp"):
        collect(tmp_path, fit_dir)


def test_refuses_missing_and_empty_required_tables_naming_each(tmp_path, bundle):
    empty = bundle.tables["reliability_grades"].iloc[:0]
    fit_dir = make_home(tmp_path, bundle, replace={"reliability_grades": empty}, drop=("cell_predictions",))
    (fit_dir / "reasoning_effects.parquet").unlink()
    (fit_dir / "reasoning_effects.csv").unlink()
    with pytest.raises(PublicationRefused) as refused:
        collect(tmp_path, fit_dir)
    problems = refused.value.problems
    assert any(p.startswith("cell_predictions is missing") for p in problems)
    assert "reliability_grades is empty" in problems
    assert any(p.startswith("reasoning_effects is missing (not in fit folder") for p in problems)


def test_refuses_a_fingerprint_that_is_not_the_fit_the_folder_is_named_for(tmp_path, bundle):
    fit_dir = make_home(tmp_path, bundle, fingerprint={"data_sha256": "9" * 64, "spec_sha256": SPEC_SHA256})
    with pytest.raises(PublicationRefused, match="not the fit the folder is named for"):
        collect(tmp_path, fit_dir)


def test_refuses_a_table_lacking_a_column_readers_rely_on(tmp_path, bundle):
    fit_dir = make_home(tmp_path, bundle,
                        replace={"difficulty_bounds": bundle.tables["difficulty_bounds"].drop(columns="bound")})
    with pytest.raises(PublicationRefused, match=r"difficulty_bounds lacks columns \['bound'\]"):
        collect(tmp_path, fit_dir)


def test_absent_or_empty_validation_is_published_empty_with_a_note(tmp_path, bundle):
    empty_metrics = bundle.tables["validation_metrics"].iloc[:0]
    absent = tuple(v for v in VALIDATION_ARTIFACTS if v != "validation_metrics")
    fit_dir = make_home(tmp_path, bundle, replace={"validation_metrics": empty_metrics}, drop=absent)
    publication = collect(tmp_path, fit_dir)
    for name in VALIDATION_ARTIFACTS:
        item = publication.tables[name]
        assert item.frame.empty and item.note, name
        declared = next(a for a in ARTIFACTS if a.name == name).columns
        assert set(declared) | set(STAMP_COLUMNS) <= set(item.frame.columns), name
    assert "does not exist yet" in publication.notes["validation_predictions"]
    assert "is empty" in publication.notes["validation_metrics"]
    # ...unless publish.yaml requires it
    with pytest.raises(PublicationRefused, match="validation_metrics is empty"):
        collect(tmp_path, fit_dir, required_validation=["validation_metrics"])


def test_rows_are_published_in_a_canonical_order(tmp_path, bundle):
    shuffled = bundle.tables["cell_predictions"].sample(frac=1.0, random_state=3)
    fit_dir = make_home(tmp_path, bundle, replace={"cell_predictions": shuffled})
    frame = collect(tmp_path, fit_dir).tables["cell_predictions"].frame
    keys = frame[["model", "reasoning_state", "family"]]
    pd.testing.assert_frame_equal(keys, keys.sort_values(list(keys.columns)).reset_index(drop=True))


def _cost_tables(bundle, cost_fit="aaaa-cost", frontier_cost_fit=None, frontier_fit=None):
    index = pd.DataFrame({"model": ["m001", "m002"], "reasoning_state": ["default", "high"],
                          "cost_index_median": [1.0, 0.4], "cost_index_lower": [1.0, 0.3], "cost_index_upper": [1.0, 0.5],
                          "n_runs": [2, 1], "cost_fit": [cost_fit, cost_fit]})
    frontier = pd.DataFrame({"model": ["m001"], "reasoning_state": ["default"], "capability_median": [150.0],
                             "cost_index_median": [1.0], "pareto_optimal": [True], "p_frontier": [0.9],
                             "fit": [frontier_fit or bundle.fit], "cost_fit": [frontier_cost_fit or cost_fit]})
    return {"cost_index": index, "cost_frontier": frontier}


def test_cost_tables_are_published_with_their_cost_fit(tmp_path, bundle):
    fit_dir = make_home(tmp_path, bundle, replace=_cost_tables(bundle))
    publication = collect(tmp_path, fit_dir)
    assert len(publication.tables["cost_index"].frame) == 2
    assert set(publication.tables["cost_frontier"].frame.cost_fit) == {"aaaa-cost"}
    assert publication.methodology["cost_fit"]["name"] == "aaaa-cost"


@pytest.mark.parametrize("change, fragment", [
    ({"frontier_cost_fit": "bbbb-cost"}, "different cost fits"),
    ({"frontier_fit": "0000000000000000-1111111111111111-c4w1000d750s1"}, "cost_frontier is stamped fit"),
])
def test_cost_tables_of_another_fit_are_refused(tmp_path, bundle, change, fragment):
    fit_dir = make_home(tmp_path, bundle, replace=_cost_tables(bundle, **change))
    with pytest.raises(PublicationRefused, match=fragment):
        collect(tmp_path, fit_dir)
