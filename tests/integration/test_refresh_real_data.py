"""The nightly refresh on real data (issue 10): three runs of the refresh chain on one Dagster instance.

1. the Epoch export of 2026-04-14 (../shared/data/snapshots/epoch-2026-04-14) beside the current SWE-bench file;
2. the mirror as it is (Epoch three days newer): what depends on the Epoch download recomputes, a new fit, a new
   publication with another data hash; the unchanged SWE-bench download keeps its data version;
3. the same mirror again: nothing expensive runs. Every step reuses its result and says why; no fit process is
   started, no cleaning SQL runs (no cleaning history row), no publication is written.

Affordable by construction: two sources (the one that changes, and one that does not), the asset chain ingest ->
clean -> fit -> four outputs and the headline gates (a publication requires them) -> publication -> report, without calibrated/predicted states, the validation folds
and their summary (each fold is a refit of its own; they use the same StepRefresh, which this test does not
exercise), a short CmdStan fit (2 chains x 60 warmup + 40 draws, tree depth 6; the refit after the data change
starts warm from the first fit, with the same 60 warmup: `main_warmup`, else it would take the shipped 300) with its
gates opened (what is tested is the refresh, not convergence), and no asset checks (they re-evaluate on every run and are tested with
their stages). The instance is a real SQLite one under a temporary DAGSTER_HOME.
"""

from pathlib import Path

import dagster as dg
import duckdb
import pytest
import yaml

from atlas_assets.defs.refresh import INPUTS, REASON, RECOMPUTED
from atlas_assets.model.stan_data import load_model_config
from atlas_assets.publish import store
from atlas_assets.resources import build_resources
from tests.conftest import MIRROR, PROJECT_ROOT, require_shared_data

pytestmark = pytest.mark.slow

OLDER_EPOCH = MIRROR.parent / "snapshots" / "epoch-2026-04-14" / "benchmark_data.zip"
EPOCH_IN_MIRROR = MIRROR / "epoch.ai" / "data" / "benchmark_data.zip"
SOURCES = ("epoch_hub_scores", "swe_bench_scores")
CHAIN = dg.AssetSelection.assets(
    "registry_benchmarks", *SOURCES, "raw_scores", "registry_model_ids", "stan_data", "capability_fit",
    "fit_diagnostics", "capability_scores", "difficulty_bounds", "reliability_grades", "dimensionality_test",
    "cell_predictions", "headline_gates", "publication", "report") | dg.AssetSelection.groups("clean")
# steps that do real work when they recompute; each must reuse on an unchanged input
EXPENSIVE = ("oriented_scores", "screened_scores", "resolved_cells", "pooled_states", "family_observations",
             "modeled_observations", "audit_exclusions", "stan_data", "capability_fit", "fit_diagnostics",
             "capability_scores", "difficulty_bounds", "reliability_grades", "dimensionality_test", "cell_predictions",
             "headline_gates", "publication", "report")
TINY_FIT = {
    "sampler": {"chains": 2, "warmup": 60, "draws": 40, "max_treedepth": 6, "adapt_delta": 0.8,
                "precondition": {"mode": "none", "main_warmup": 60}},
    "diagnostics": {"rhat_max": 10.0, "ess_bulk_min": 1, "ess_tail_min": 1, "divergences_max": 100000,
                    "ebfmi_min": 0.0},
}


def older_mirror(root):
    """The mirror with Epoch's file replaced by the 2026-04-14 export (same URL, older content)."""
    root.mkdir()
    for host in MIRROR.iterdir():
        if host.name != "epoch.ai":
            (root / host.name).symlink_to(host)
    (root / "epoch.ai" / "data").mkdir(parents=True)
    (root / "epoch.ai" / "data" / "benchmark_data.zip").symlink_to(OLDER_EPOCH)
    return root


@pytest.fixture
def refresh_env(tmp_path, monkeypatch):
    require_shared_data()
    if not OLDER_EPOCH.exists():
        pytest.skip(f"older Epoch export not found at {OLDER_EPOCH}")
    assert OLDER_EPOCH.read_bytes() != EPOCH_IN_MIRROR.read_bytes()
    home, dagster_home = tmp_path / "atlas_home", tmp_path / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text((PROJECT_ROOT / "dagster.yaml").read_text())
    model_yaml = tmp_path / "model.yaml"
    model_yaml.write_text(yaml.safe_dump(load_model_config(overrides=TINY_FIT)))
    monkeypatch.setenv("ATLAS_HOME", str(home))
    monkeypatch.delenv("ATLAS_DUCKDB", raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    monkeypatch.setenv("ATLAS_MODEL_CONFIG", str(model_yaml))
    return home, dagster_home, older_mirror(tmp_path / "older_mirror")


def refresh(instance, mirror, monkeypatch) -> dg.ExecuteInProcessResult:
    from atlas_assets.definitions import stage_assets

    monkeypatch.setenv("ATLAS_MIRROR", str(mirror))
    result = dg.materialize(stage_assets, instance=instance, resources=build_resources(), selection=CHAIN,
                            raise_on_error=False)
    assert result.success, [str(e.event_specific_data) for e in result.get_step_failure_events()]
    stats = instance.get_run_stats(result.run_id)
    print(f"refresh run {result.run_id[:8]} on {mirror.name}: {stats.end_time - stats.start_time:.1f} s")
    return result


def materializations(result) -> dict[str, dg.AssetMaterialization]:
    return {event.asset_key.to_user_string(): event.step_materialization_data.materialization
            for event in result.get_asset_materialization_events()}


def meta(materialization, key):
    return materialization.metadata[key].value


def version(materialization) -> str:
    return materialization.tags["dagster/data_version"]


def log_messages(instance, run_id) -> list[str]:
    return [entry.user_message for entry in instance.all_logs(run_id)]


def cleaning_history_runs(home) -> set[str]:
    with duckdb.connect(str(home / "atlas.duckdb"), read_only=True) as conn:
        return {row[0] for row in conn.execute("SELECT DISTINCT run_id FROM audit_stage_history").fetchall()}


def test_refresh_recomputes_exactly_what_changed(refresh_env, monkeypatch):
    home, dagster_home, older = refresh_env
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        first = materializations(refresh(instance, older, monkeypatch))
        second_result = refresh(instance, MIRROR, monkeypatch)
        second = materializations(second_result)
        second_log = log_messages(instance, second_result.run_id)
        third_result = refresh(instance, MIRROR, monkeypatch)
        third = materializations(third_result)
        third_log = log_messages(instance, third_result.run_id)

    # 2. the newer Epoch export is a new download with a new staged version; SWE-bench is unchanged
    assert meta(second["epoch_hub_scores"], "sha256") != meta(first["epoch_hub_scores"], "sha256")
    assert version(second["epoch_hub_scores"]) != version(first["epoch_hub_scores"])
    assert version(second["swe_bench_scores"]) == version(first["swe_bench_scores"])
    # every step recomputed exactly when one of its inputs has another data version than in the first run
    for name in EXPENSIVE:
        inputs = meta(second[name], INPUTS)["upstream"]
        moved = [up for up, v in inputs.items() if up in first and version(first[up]) != v]
        assert meta(second[name], RECOMPUTED) is bool(moved), (name, moved, meta(second[name], REASON))
        if moved:
            assert all(up in meta(second[name], REASON) for up in moved), meta(second[name], REASON)
    assert meta(second["capability_fit"], "reused") is False  # a new fit was sampled
    assert meta(second["capability_fit"], "fit_dir") != meta(first["capability_fit"], "fit_dir")
    # the refit after a data change starts from the last good fit (warm_start: previous_fit), not from scratch
    first_fit = Path(meta(first["capability_fit"], "fit_dir")).name
    assert any(message.startswith(f"fit start: warm from {first_fit}") for message in second_log), second_log
    assert meta(second["publication"], "new_version") is True
    assert meta(second["publication"], "data_sha256") != meta(first["publication"], "data_sha256")
    assert meta(second["publication"], "data_sha256") == meta(second["stan_data"], "data_sha256")

    # 3. the same data again: every expensive step reused its result, with the same data version, and says why
    for name in EXPENSIVE:
        assert meta(third[name], RECOMPUTED) is False, (name, meta(third[name], REASON))
        assert meta(third[name], REASON).startswith("skipped: ") and f"since run {second_result.run_id[:8]}" in \
            meta(third[name], REASON), (name, meta(third[name], REASON))
        assert version(third[name]) == version(second[name]), name
    fit_reason = meta(third["capability_fit"], REASON)
    data, spec = meta(second["stan_data"], "data_sha256"), meta(second["stan_data"], "spec_sha256")
    assert f"modeled_observations data hash {data[:12]} and specification {spec[:12]}" in fit_reason
    assert meta(third["publication"], "publication") == meta(second["publication"], "publication")
    # ... and did none of the work: no cleaning SQL (no history row), no fit process, no new publication
    assert third_result.run_id not in cleaning_history_runs(home)
    assert second_result.run_id in cleaning_history_runs(home)
    assert not any("fit in a subprocess" in message for message in third_log)
    fits = [p.name for p in (home / "model" / "fits").iterdir()]
    assert len(fits) == 2, fits
    assert len(store.list_versions(home / "publications")) == 2
    assert (home / "publications" / "CURRENT").read_text().strip() == meta(second["publication"], "publication")
    # the downloads themselves were still made and recorded (a skip is never a missed scrape), but bytes already
    # staged are not parsed again: the SWE-bench file in runs 2 and 3, the Epoch export in run 3
    assert meta(third["epoch_hub_scores"], "changed_since_last_run") is False
    assert meta(third["epoch_hub_scores"], "sha256") == meta(second["epoch_hub_scores"], "sha256")
    assert meta(second["epoch_hub_scores"], RECOMPUTED) is True
    for run, source in ((second, "swe_bench_scores"), (third, "swe_bench_scores"), (third, "epoch_hub_scores")):
        assert meta(run[source], RECOMPUTED) is False, (source, meta(run[source], REASON))
        assert meta(run[source], REASON).startswith(f"skipped: download {meta(run[source], 'sha256')[:12]}")
    with duckdb.connect(str(home / "atlas.duckdb"), read_only=True) as conn:
        attempts = conn.execute("SELECT run_id, status FROM source_snapshots WHERE source = 'epoch_hub'").fetchall()
    assert (third_result.run_id, "parsed") in attempts and len(attempts) == 3
