"""The frozen reference scale (atlas_assets/outputs/reference_scale.py) on constructed fits with known links."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlas_assets.outputs import reference_scale as rs


def reference_of(b: np.ndarray, n_obs: int = 30, offset: float = 100.0, scale: float = 25.0,
                 version: str = "T1") -> rs.ReferenceScale:
    families = pd.DataFrame({"family": [f"f{j}" for j in range(len(b))], "b": b, "beta": 1.0, "n_obs": n_obs})
    return rs.ReferenceScale(version=version, created_on="2026-12-01", fit="ref-fit", display_offset=offset,
                             display_scale=scale, min_family_obs=10, families=families)


def fit_families(n: int, n_obs: int = 30) -> pd.DataFrame:
    return pd.DataFrame({"family": [f"f{j}" for j in range(n)], "n_obs": n_obs})


def test_link_recovers_a_known_shift_and_stretch_of_the_latent_scale():
    rng = np.random.default_rng(1)
    b_ref = rng.normal(0, 1, 20)
    reference = reference_of(b_ref)
    # a later fit whose latent scale is theta_fit = (theta_ref - 0.4) / 1.3, draw by draw with its own noise
    true_A, true_B = 0.4, 1.3
    b_fit = (b_ref - true_A) / true_B + rng.normal(0, 0.02, (500, 20))
    link = rs.link(b_fit, fit_families(20), reference, min_shared=10)
    assert abs(link.A.mean() - true_A) < 0.01 and abs(link.B.mean() - true_B) < 0.01
    # a state at theta_ref = 1.0 reads 100 + 25 x 1.0 on the reference, whatever the fit's own units
    offset, scale = rs.reference_display(link, reference)
    theta_fit = (1.0 - true_A) / true_B
    assert np.mean(offset + scale * theta_fit) == pytest.approx(125.0, abs=0.3)


def test_only_well_measured_shared_families_link_and_too_few_is_an_error():
    b_ref = np.linspace(-2, 2, 12)
    reference = reference_of(b_ref)
    fams = fit_families(14)
    fams.loc[[0, 1], "n_obs"] = 3          # thin in the new fit: left out of the link
    b_fit = np.tile(np.r_[b_ref, 5.0, -5.0], (4, 1))  # f12, f13 are new families: not in the reference
    link = rs.link(b_fit, fams, reference, min_shared=10)
    assert link.families == [f"f{j}" for j in range(2, 12)]
    assert np.allclose(link.A, 0) and np.allclose(link.B, 1)
    with pytest.raises(rs.ReferenceScaleError, match="shares 10 well-measured families.*fewer than the 11"):
        rs.link(b_fit, fams, reference, min_shared=11)


def test_freezing_a_fit_keeps_its_anchored_display_units_on_average():
    rng = np.random.default_rng(2)
    D, J, S = 400, 15, 30
    b_mean = rng.normal(0, 1, J)
    jitter_A, jitter_B = rng.normal(0, 0.05, D), np.exp(rng.normal(0, 0.03, D))  # the scale's draw-to-draw wobble
    b = (b_mean[None, :] - jitter_A[:, None]) / jitter_B[:, None]
    theta = (rng.normal(0, 1, S)[None, :] - jitter_A[:, None]) / jitter_B[:, None]
    anchor_scale = 20.0 * jitter_B           # an anchored map that follows the wobble
    anchor_offset = 130.0 + 20.0 * jitter_A
    reference = rs.freeze(b, fit_families(J), anchor_offset, anchor_scale, version="T", fit="f", min_family_obs=10)
    offset, scale = rs.reference_display(rs.link(b, fit_families(J), reference, 10), reference)
    anchored = anchor_offset[:, None] + anchor_scale[:, None] * theta
    frozen = offset[:, None] + scale[:, None] * theta
    assert np.abs(frozen.mean(axis=0) - anchored.mean(axis=0)).max() < 0.2


def test_rebase_conversion_maps_old_display_onto_new_exactly():
    b_old = np.linspace(-1.5, 2.0, 12)
    old = reference_of(b_old, offset=100.0, scale=25.0, version="A")
    # the new reference's latent scale: theta_new = (theta_old - 0.3) / 0.8, displayed as 120 + 20 theta_new
    new = reference_of((b_old - 0.3) / 0.8, offset=120.0, scale=20.0, version="B")
    alpha, gamma, shared = rs.conversion(old, new, min_shared=10)
    assert len(shared) == 12
    theta_old = np.array([-1.0, 0.0, 2.5])
    display_old = 100.0 + 25.0 * theta_old
    display_new = 120.0 + 20.0 * (theta_old - 0.3) / 0.8
    assert np.allclose(alpha + gamma * display_old, display_new)


def two_frozen_versions(directory):
    """Reference A (display 100 + 25 theta_A) and, a rebase later, B: theta_B = (theta_A - 0.3) / 0.8 on the same 12
    families, displayed as 120 + 20 theta_B. Written as frozen files; B is the version in force."""
    b_old = np.linspace(-1.5, 2.0, 12)
    rs.write_reference(reference_of(b_old, offset=100.0, scale=25.0, version="2026-Q4"), directory)
    rs.write_reference(reference_of((b_old - 0.3) / 0.8, offset=120.0, scale=20.0, version="2027-Q2"), directory)
    return rs.load_reference("2027-Q2", directory)


def test_a_rebase_since_the_last_publication_carries_its_conversion(tmp_path):
    new = two_frozen_versions(tmp_path)
    table = rs.conversion_table(new, published_version="2026-Q4", min_shared=10, directory=tmp_path)
    assert list(table.columns) == rs.CONVERSION_COLUMNS and len(table) == 1
    row = table.iloc[0]
    assert (row["old_version"], row["new_version"], row["since_last_publication"]) == ("2026-Q4", "2027-Q2", True)
    assert row["n_shared_families"] == 12 and row["shared_families"].split(", ")[:2] == ["f0", "f1"]
    # a score published on 2026-Q4 converts to what the new reference displays for the same latent capability
    theta_old = np.array([-1.0, 0.0, 2.5])
    assert np.allclose(row["alpha"] + row["gamma"] * (100.0 + 25.0 * theta_old), 120.0 + 20.0 * (theta_old - 0.3) / 0.8)
    assert "last good publication" in row["basis"] and row["formula"].startswith("display on 2027-Q2 = ")


def test_every_other_frozen_version_converts_even_without_a_rebase(tmp_path):
    """The last publication used the version in force, but another frozen version exists: its conversion is
    published too (here back to the older scale: the inverse of the rebase's map)."""
    two_frozen_versions(tmp_path)
    old = rs.load_reference("2026-Q4", tmp_path)
    back = rs.conversion_table(old, published_version="2026-Q4", min_shared=10, directory=tmp_path).iloc[0]
    forward = rs.conversion_table(rs.load_reference("2027-Q2", tmp_path), "2027-Q2", 10, tmp_path).iloc[0]
    assert (back["old_version"], back["new_version"], back["since_last_publication"]) == ("2027-Q2", "2026-Q4", False)
    assert back["gamma"] == pytest.approx(1 / forward["gamma"]) and \
        back["alpha"] == pytest.approx(-forward["alpha"] / forward["gamma"])
    # one version only, and the last publication on it (or nothing published): nothing to convert
    (tmp_path / "2027-Q2.yaml").unlink()
    assert rs.conversion_table(old, "2026-Q4", 10, tmp_path).empty
    assert rs.conversion_table(old, None, 10, tmp_path).empty


def test_a_rebase_that_cannot_be_converted_is_an_error_naming_the_versions(tmp_path):
    new = two_frozen_versions(tmp_path)
    # the last publication's version is no longer frozen: its numbers could not be converted
    with pytest.raises(rs.ReferenceScaleError, match=r"no conversion 2025-Q1 -> 2027-Q2 \(the last good publication "
                       r"is on reference 2025-Q1.*2025-Q1.yaml: reference scale '2025-Q1' does not exist"):
        rs.conversion_table(new, published_version="2025-Q1", min_shared=10, directory=tmp_path)
    # too few shared families to link the two versions
    with pytest.raises(rs.ReferenceScaleError, match=r"no conversion 2026-Q4 -> 2027-Q2 .*shares 12 well-measured "
                       r"families.*fewer than the 13"):
        rs.conversion_table(new, published_version="2026-Q4", min_shared=13, directory=tmp_path)


def test_reference_files_round_trip_and_are_never_rewritten(tmp_path):
    reference = reference_of(np.linspace(-1, 1, 5), version="2026-Q4")
    path = rs.write_reference(reference, tmp_path)
    loaded = rs.load_reference("2026-Q4", tmp_path)
    assert loaded.display_offset == 100.0 and loaded.families["b"].tolist() == pytest.approx(np.linspace(-1, 1, 5))
    with pytest.raises(rs.ReferenceScaleError, match="exists; versions are frozen"):
        rs.write_reference(reference, tmp_path)
    path.write_text(path.read_text().replace("scale: 25.0", "scael: 25.0"))
    with pytest.raises(rs.ReferenceScaleError, match=r"2026-Q4.yaml: field 'display.scale' is missing"):
        rs.load_reference("2026-Q4", tmp_path)
    with pytest.raises(rs.ReferenceScaleError, match="'2027-Q1' does not exist"):
        rs.load_reference("2027-Q1", tmp_path)


def test_drift_counts_only_states_whose_observations_did_not_change():
    old_obs = pd.DataFrame({"model": ["m1", "m1", "m2", "m3"], "reasoning_state": "default",
                            "family": ["a", "b", "a", "a"], "u": [0.5, 0.6, 0.7, 0.1], "items": [100, None, 100, 100]})
    new_obs = old_obs.copy()
    new_obs.loc[2, "u"] = 0.75                                                     # m2 has a new result
    new_obs = pd.concat([new_obs, pd.DataFrame({"model": ["m3"], "reasoning_state": ["default"], "family": ["b"],
                                                "u": [0.2], "items": [50]})])        # m3 a new family
    untouched = rs.untouched_states(old_obs, new_obs)
    assert untouched == {("m1", "default")}
    scores = pd.DataFrame({"model": ["m1", "m2", "m3"], "reasoning_state": "default", "display_mean": [130.0, 140, 150],
                           "display_lower": [125.0, 135, 145], "display_upper": [135.0, 145, 155]})
    moved = scores.assign(display_mean=[136.0, 150, 150])
    drift = rs.scale_drift(scores, moved, untouched)
    assert drift[["model", "move", "within_interval"]].values.tolist() == [["m1", 6.0, False]]
    assert rs.drift_summary(drift)["share_within_interval"] == 0.0


@pytest.mark.slow
def test_reference_scores_asset_links_the_fit_and_measures_drift_since_the_published_fit(tmp_path, monkeypatch):
    """A real Dagster run of `reference_scores` and its checks: a reference frozen from the published fit, a new
    fit of the same panel (other draws): every state scored on the reference; untouched states' moves measured on
    both scales; the last publication was on an older frozen version, so the old->new conversion is written; an
    unknown version fails the asset, naming the file."""
    import json

    import dagster as dg
    import duckdb
    import yaml

    from atlas_assets.defs.outputs import reference as reference_defs
    from atlas_assets.model.fit_process import load_fit
    from atlas_assets.model.scores import draws_of
    from atlas_assets.resources import build_resources
    from atlas_assets.spec import specification_fingerprint
    from tests.outputs.fixtures import synthetic_fit
    from tests.outputs.test_outputs_assets import write_fit_folder

    home, scales = tmp_path / "atlas_home", tmp_path / "reference_scales"
    monkeypatch.setenv("ATLAS_HOME", str(home))
    monkeypatch.delenv("ATLAS_DUCKDB", raising=False)
    monkeypatch.setenv("ATLAS_REFERENCE_SCALES", str(scales))
    si, idata, _, cfg = synthetic_fit(seed=3, n_models=40, n_families=12, target_obs=420)
    model_yaml = tmp_path / "model.yaml"
    model_yaml.write_text(yaml.safe_dump(cfg))
    monkeypatch.setenv("ATLAS_MODEL_CONFIG", str(model_yaml))
    fits = home / "model" / "fits"
    published = write_fit_folder(fits / "published", si, idata, cfg, "unused")
    si2, idata2, _, _ = synthetic_fit(seed=3, n_models=40, n_families=12, target_obs=420, noise=0.12)
    current = write_fit_folder(fits / "current2", si2, idata2, cfg, "")
    # the current fit is made under the specification now in force (reference file included: written first)
    old = load_fit(published)
    families = old.stan_input.families.assign(beta_mean=draws_of(old.idata, "beta").mean(axis=0))
    rs.write_reference(rs.freeze(draws_of(old.idata, "b"), families, old.scale.offset, old.scale.scale,
                                 version="2026-Q4", fit="published", min_family_obs=10), scales)
    # the scale the current publication used: an older version, its units 10 points higher and 1.2x as wide
    earlier = rs.load_reference("2026-Q4", scales)
    rs.write_reference(rs.ReferenceScale("2026-Q2", "2026-06-01", "published", earlier.display_offset + 10.0,
                                         earlier.display_scale * 1.2, 10, earlier.families), scales)
    (current / "fingerprint.json").write_text(json.dumps({"spec_sha256": specification_fingerprint()}))
    publication = home / "publications" / "v1"
    publication.mkdir(parents=True)
    (publication / "manifest.json").write_text(json.dumps({"stamps": {"fit": "published"}}))
    (publication / "methodology.json").write_text(json.dumps({"rules": {"reference_scale": "2026-Q2"}}))
    (home / "publications" / "CURRENT").write_text("v1")

    def run():
        instance = dg.DagsterInstance.ephemeral()
        instance.report_runless_asset_event(
            dg.AssetMaterialization("capability_fit", metadata={"fit_dir": dg.MetadataValue.path(str(current))}))
        return dg.materialize([reference_defs.reference_scores, reference_defs.reference_scores_complete,
                               reference_defs.reference_drift_within_intervals],
                              resources=build_resources(), instance=instance, raise_on_error=False)

    result = run()
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks["reference_scores_complete"]
    with duckdb.connect(str(home / "atlas.duckdb"), read_only=True) as conn:
        states = conn.execute("SELECT * FROM reference_state_scores").df()
        drift = conn.execute("SELECT * FROM reference_scale_drift").df()
        conversions = conn.execute("SELECT * FROM reference_conversions").df()
    assert len(states) == len(si2.states) and set(states["reference_version"]) == {"2026-Q4"}
    assert set(states["fit"]) == {"current2"} and not states["is_reference"].any()
    # the same panel: every state is untouched, measured on both scales against the published fit
    assert set(drift["scale"]) == {"reference 2026-Q4", "anchored"}
    assert (drift.groupby("scale").size() == len(si2.states)).all() and set(drift["previous_fit"]) == {"published"}
    assert checks["reference_drift_within_intervals"] == bool(drift.query("scale != 'anchored'")["within_interval"].all())
    # the rebase since the last publication: the same latent positions, so a score x on 2026-Q2 is
    # c0 + (x - c0 - 10) / 1.2 on 2026-Q4 (c0: 2026-Q4's display offset)
    assert conversions[["old_version", "new_version", "since_last_publication"]].values.tolist() == [
        ["2026-Q2", "2026-Q4", True]]
    row, c0, x = conversions.iloc[0], earlier.display_offset, np.array([100.0, 150.0])
    assert row["alpha"] + row["gamma"] * x == pytest.approx(c0 + (x - c0 - 10.0) / 1.2, rel=1e-6)
    assert row["n_shared_families"] == len(si2.families) and set(conversions["fit"]) == {"current2"}

    (scales / "2026-Q4.yaml").rename(scales / "2025-Q1.yaml")
    failed = run()
    assert not failed.success
    assert "reference scale '2026-Q4' does not exist" in failed.failure_data_for_node("reference_scores").error.message
