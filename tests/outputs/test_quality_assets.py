"""family_quality and comparability_verdicts through a Dagster instance, from a small DuckDB file shaped like the
cleaning chain's tables (the SQL that traces observations to raw rows runs on it) and a fit folder that names
that data; the checks beside them pass; a fit whose data is not DuckDB's modeled_observations is refused."""

from __future__ import annotations

import json

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest
from dagster_duckdb import DuckDBResource

from atlas_assets.defs.outputs import quality, quality_checks
from atlas_assets.model.fit_process import write_table
from atlas_assets.spec import frame_hash

SPEC = "7" * 64
FAMILIES = {"hard": ("private", 120.0), "swe": ("static", 500.0)}


def _tables(n_models: int = 8) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(3)
    obs, raw, screened = [], [], []
    for i in range(n_models):
        model = f"m{i}"
        for family in FAMILIES:
            key = f"src/{family}.csv#{i}/{family}"
            u = float(np.round(0.9 - 0.08 * i + 0.01 * rng.standard_normal(), 3))
            obs.append({"model": model, "reasoning_state": "default", "family": family, "kind": "bounded", "u": u,
                        "correct": np.nan, "items": np.nan, "floor": 0.0, "n_components": 1,
                        "released_on": pd.Timestamp("2025-06-01"), "selection": "primary", "benchmarks": [family],
                        "n_configs": 1, "row_keys": [key],
                        "verification_class": "vendor_reported" if (family == "hard" and i == 1) else "independent"})
            raw.append({"row_key": key, "source": "src", "file": f"{family}.csv", "benchmark": family,
                        "score_column": "Score", "harness": ("OpenHands" if i % 2 else "SWE-agent") if family == "swe" else None,
                        "shots": None, "evaluated_on": pd.Timestamp("2026-03-01") + pd.Timedelta(days=i)})
            screened.append({"row_key": key, "effective_protocol": "single"})
    return {
        "modeled_observations": pd.DataFrame(obs), "raw_scores": pd.DataFrame(raw),
        "screened_scores": pd.DataFrame(screened),
        "registry_files": pd.DataFrame({"source": ["src", "src"], "file": ["hard.csv", "swe.csv"],
                                        "harness_columns": [[], ["Agent"]]}),
        "registry_benchmarks": pd.DataFrame({"benchmark": list(FAMILIES), "family": list(FAMILIES),
                                             "role": "primary", "kind": "bounded", "unit": "fraction",
                                             "contamination": [c for c, _ in FAMILIES.values()],
                                             "items": [n for _, n in FAMILIES.values()], "category": "coding"}),
        "capability_state_scores": pd.DataFrame({"model": [f"m{i}" for i in range(n_models)],
                                                 "reasoning_state": "default", "eligible": True}),
        "model_index_families": pd.DataFrame({"family": list(FAMILIES)}),
    }


def _home(tmp_path, fit_data: str | None = None):
    home = tmp_path / "home"
    home.mkdir()
    tables = _tables()
    with duckdb.connect(str(home / "atlas.duckdb")) as conn:
        for name, frame in tables.items():
            conn.register("frame", frame)
            conn.execute(f"CREATE TABLE {name} AS SELECT * FROM frame")
            conn.unregister("frame")
        data = frame_hash(conn.execute("SELECT * FROM modeled_observations").df(), ["model", "reasoning_state", "family"])
    data = fit_data or data
    fit_dir = home / "model" / "fits" / f"{data[:16]}-{SPEC[:16]}-c2w10d10s1"
    fit_dir.mkdir(parents=True)
    (fit_dir / "fingerprint.json").write_text(json.dumps({"data_sha256": data, "spec_sha256": SPEC}))
    gates = {g: True for g in ("rhat", "ess_bulk", "ess_tail", "divergences", "ebfmi")}
    (fit_dir / "diagnostics.json").write_text(json.dumps({
        "passes": True, "checks": gates, "max_rhat": 1.001, "min_ess_bulk": 900.0, "min_ess_tail": 900.0,
        "divergences": 0, "min_ebfmi": 0.8,
        "thresholds": {"rhat_max": 1.01, "ess_bulk_min": 400, "ess_tail_min": 400, "divergences_max": 0,
                       "ebfmi_min": 0.3}}))
    (fit_dir / "fit_summary.json").write_text("{}")
    (fit_dir / "posterior.nc").write_bytes(b"not read here")
    states = tables["capability_state_scores"].assign(display_mean=[150.0 - 3 * i for i in range(8)])
    write_table(states, fit_dir / "state_scores")
    grades = pd.DataFrame({"family": list(FAMILIES), "kind": "bounded", "grade": ["B", "D"],
                           "reliability_mean": [0.8, 0.4], "reliability_lower": [0.72, 0.2],
                           "reliability_upper": [0.88, 0.6], "n_models": 8, "fit": fit_dir.name})
    with duckdb.connect(str(home / "atlas.duckdb")) as conn:
        conn.register("frame", grades)
        conn.execute("CREATE TABLE reliability_grades AS SELECT * FROM frame")
    return home, fit_dir


def _run(home, fit_dir):
    with dg.DagsterInstance.ephemeral() as instance:
        instance.report_runless_asset_event(dg.AssetMaterialization(
            "capability_fit", metadata={"fit_dir": dg.MetadataValue.path(str(fit_dir))}))
        return dg.materialize(
            [quality.family_quality, quality.comparability_verdicts, quality_checks.family_quality_valid,
             quality_checks.comparability_verdicts_valid], instance=instance, raise_on_error=False,
            resources={"duckdb": DuckDBResource(database=str(home / "atlas.duckdb"))})


@pytest.fixture
def pinned_spec(monkeypatch):
    monkeypatch.setattr("atlas_assets.defs.outputs.assets.specification_fingerprint", lambda: SPEC)


def test_both_assets_and_their_checks_on_a_constructed_chain(tmp_path, pinned_spec):
    home, fit_dir = _home(tmp_path)
    result = _run(home, fit_dir)
    assert result.success
    assert {e.check_name: e.passed for e in result.get_asset_check_evaluations()} == {
        "family_quality_valid": True, "comparability_verdicts_valid": True}
    with duckdb.connect(str(home / "atlas.duckdb"), read_only=True) as conn:
        q = conn.execute("SELECT * FROM family_quality").df().set_index("family")
        pairs = conn.execute("SELECT * FROM comparability_verdicts").df()
    u = _tables()["modeled_observations"].query("family == 'hard'")["u"].sort_values(ascending=False).to_numpy()
    assert q.loc["hard", "headroom_points"] == pytest.approx(100 * (1 - np.median(u[:5])))
    assert q.loc["hard", "n_live_models"] == 8 and q.loc["hard", "contamination"] == "private"
    assert set(q["fit"]) == {fit_dir.name} and q.loc["hard", "grade"] == "B"
    overall = pairs[pairs["scope"] == "overall"]
    assert sorted(set(overall["rank_a"])) == list(range(1, 8)) and len(overall) == 14  # 7 pairs x 2 shared families
    # the swe agents alternate, so every swe neighbour pair compares systems; m1's hard result is vendor-reported
    swe = pairs[pairs["scope"] == "family:swe"]
    assert set(swe["rule"]) == {9} and len(swe) == 7
    hard = pairs[(pairs["scope"] == "overall") & (pairs["family_a"] == "hard")].set_index("rank_a")["rule"]
    assert hard[1] == 8 and hard[2] == 8 and hard[3] == 10


def test_a_fit_of_other_data_is_refused(tmp_path, pinned_spec):
    home, fit_dir = _home(tmp_path, fit_data="e" * 64)
    result = _run(home, fit_dir)
    assert not result.success
    text = " ".join(str(e.event_specific_data) for e in result.get_step_failure_events())
    assert "is not the data of fit" in text
    with duckdb.connect(str(home / "atlas.duckdb"), read_only=True) as conn:
        tables = {r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert "family_quality" not in tables and "comparability_verdicts" not in tables


def test_the_verdict_for_any_two_observations_from_the_command_line(tmp_path, capsys):
    from atlas_assets.outputs.comparability_cli import main

    home, _ = _home(tmp_path)
    database = str(home / "atlas.duckdb")
    assert main(["m0", "default", "hard", "m1", "default", "hard", "--database", database]) == 0
    assert capsys.readouterr().out.strip() == ("caveat (rule 8, verification boundary): verification independent vs "
                                               "vendor_reported")
    assert main(["m0", "default", "swe", "m2", "default", "hard", "--database", database]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("not comparable (rule 2, different family): family swe vs hard")
    assert "also: 3 (agent system vs bare model), 6 (different versions)" in printed
    assert main(["m0", "default", "swe", "m9", "default", "swe", "--database", database]) == 2
    assert "no modeled observation for model 'm9'" in capsys.readouterr().err
