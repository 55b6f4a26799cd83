"""When a capability fit starts from the last good fit instead of a pilot (model/warm_start.py)."""

import json

from atlas_assets.model.warm_start import warm_start_source
from atlas_assets.spec import changed_files


def earlier_fit(tmp_path, name="aaaa-bbbb-c4w1000d750s1", passes=True):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "fit_summary.json").write_text(json.dumps({"passes": passes}))
    (folder / "posterior.nc").write_bytes(b"x")
    return folder


DATA_ONLY = {"sql": ["sql/03_resolved_cells.sql"], "config": ["atlas_assets/config/benchmarks.yaml"]}


def test_a_data_change_starts_from_the_last_good_fit(tmp_path):
    folder = earlier_fit(tmp_path)
    assert warm_start_source(folder, DATA_ONLY, "previous_fit") == (folder, f"warm from {folder.name}")
    assert warm_start_source(folder, {}, "previous_fit")[0] == folder  # same inputs, other sampler settings
    new_data = tmp_path / "cccc-bbbb-c4w1000d750s1"
    assert warm_start_source(folder, DATA_ONLY, "previous_fit", target=new_data)[0] == folder


def test_a_refit_of_the_same_inputs_and_settings_takes_the_reproducible_cold_route(tmp_path):
    folder = earlier_fit(tmp_path)
    source, reason = warm_start_source(folder, {}, "previous_fit", target=folder)
    assert source is None and reason.startswith(f"cold: same inputs and settings as {folder.name}")


def test_a_changed_model_a_failed_or_missing_fit_or_the_switch_off_start_cold(tmp_path):
    folder = earlier_fit(tmp_path)
    program = warm_start_source(folder, {**DATA_ONLY, "stan": ["stan/atlas.stan"]}, "previous_fit")
    assert program[0] is None and "stan: stan/atlas.stan" in program[1]
    priors = warm_start_source(folder, {"config": ["model_config", "atlas_assets/config/models.yaml"]}, "previous_fit")
    assert priors[0] is None and "config: model_config" in priors[1] and "models.yaml" not in priors[1]
    assert warm_start_source(folder, changed_files(None, {}), "previous_fit")[0] is None

    failed = earlier_fit(tmp_path, "aaaa-bbbb-c4w1000d750s1.failed", passes=False)
    assert warm_start_source(failed, DATA_ONLY, "previous_fit") == (None, f"cold: the earlier fit {failed.name} failed its gates")
    assert warm_start_source(tmp_path / "gone", DATA_ONLY, "previous_fit")[1].endswith("is not on disk")
    assert warm_start_source(None, DATA_ONLY, "previous_fit") == (None, "cold: no earlier fit")
    assert warm_start_source(folder, DATA_ONLY, "none")[0] is None
