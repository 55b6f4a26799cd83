"""The end-of-run summary reads the publication's own files and says what a user looks for first."""

import json

import pandas as pd

from atlas_assets.publish.summary import summary_text


def test_summary_names_sources_fit_leaders_grades_validation_and_the_report(tmp_path):
    folder = tmp_path / "20261201T000000Z-aaaa-bbbb"
    (folder / "report").mkdir(parents=True)
    (folder / "report" / "index.html").write_text("<html></html>")
    (folder / "methodology.json").write_text(json.dumps({
        "stamps": {"data_sha256": "d" * 64, "spec_sha256": "s" * 64},
        "sources": [{"source": "epoch_hub", "sha256": "9ef49bb5" + "0" * 56, "bytes": 323524, "origin": "mirror",
                     "url": "https://epoch.ai/data/benchmark_data.zip"}],
        "cleaning_stages": [{"stage": "modeled_observations", "rows_out": 2293}],
        "fit": {"engine": "cmdstanpy", "diagnostics": {"max_rhat": 1.0047, "min_ess_bulk": 1611, "min_ess_tail": 1885,
                                                       "divergences": 0, "n_gradient_evals": 460242,
                                                       "sample_seconds": 300}}}))
    pd.DataFrame({"model": ["b", "a", "c"], "headline_state": ["high", "default", "default"],
                  "headline_status": ["published", "published", "no eligible state"],
                  "display_mean": [150.0, 160.0, None], "display_lower": [148.0, 158.0, None],
                  "display_upper": [152.0, 162.0, None]}).to_csv(folder / "model_scores.csv", index=False)
    pd.DataFrame({"grade": ["A", "B", None]}).to_csv(folder / "reliability_grades.csv", index=False)
    pd.DataFrame({"study": ["forward", "forward"], "method": ["atlas", "eci_form"], "n_cells": [343, 343],
                  "rmse": [0.105, 0.146], "rmse_points": [10.5, 14.6], "crps": [0.0536, 0.0706],
                  "coverage_90": [0.889, 0.656]}).to_csv(folder / "validation_metrics.csv", index=False)
    text = summary_text(folder, top=5)
    assert "epoch_hub: sha256 9ef49bb50000" in text and "modeled_observations 2,293" in text
    assert "cmdstanpy, max R-hat 1.0047" in text and "460,242 leapfrog" in text
    lines = text.splitlines()
    leaders = [l for l in lines if l.startswith("     ") or l.startswith("    1")]
    assert leaders[0].strip().startswith("160.0 [158.0, 162.0]  a (default)")  # best first, unranked left out
    assert "top 2 of 3 models" in text and "A 1, B 1, C 0, D 0, ungraded 1" in text
    assert "RMSE 10.50 points (ECI form 14.60, ratio 0.72)" in text and "90% coverage 88.9% (65.6%)" in text
    assert str(folder / "report" / "index.html") in text
