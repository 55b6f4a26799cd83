"""Fit folders are replaced without a moment where neither the old nor the new one exists."""

from atlas_assets.defs.fit_folders import install, restore_replaced


def test_a_kill_between_setting_the_old_fit_aside_and_moving_the_new_one_in_loses_nothing(tmp_path):
    final, staging = tmp_path / "fit", tmp_path / "fit.partial"
    final.mkdir()
    (final / "posterior.nc").write_text("old")
    staging.mkdir()
    (staging / "posterior.nc").write_text("new")
    # the kill: the old folder was set aside, the new one never moved in
    final.rename(tmp_path / "fit.replaced")
    restore_replaced(final)
    assert (final / "posterior.nc").read_text() == "old"
    install(staging, final)
    assert (final / "posterior.nc").read_text() == "new"
    assert not staging.exists() and not (tmp_path / "fit.replaced").exists()
    restore_replaced(final)  # nothing set aside: nothing changes
    assert (final / "posterior.nc").read_text() == "new"
