"""The quality and comparability tables travel into the publication and its report: the report's numbers are the
published files' (the quality correlation, the grade x band cross-tab, the verdict counts). A publication
without them gets a visible note instead (tests/publish/test_publish_report.py, on its full report)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from atlas_assets.outputs.comparability import Observation, leaderboard_pairs
from atlas_assets.outputs.config import load_outputs_config
from atlas_assets.outputs.family_quality import agreement, family_quality
from atlas_assets.publish.config import load_publish_config
from atlas_assets.publish.report import REPORT_FILE, build_report
from tests.outputs.dated import dated
from tests.publish.test_publish_report import TableRows, published

CFG = load_outputs_config()


def _quality_tables(bundle) -> dict[str, pd.DataFrame]:
    grades = bundle.tables["reliability_grades"]
    rng = np.random.default_rng(5)
    rows = [{"model": f"m{i}", "reasoning_state": "default", "family": f, "kind": "bounded",
             "u": float(rng.uniform(0.2, 0.95)), "evaluated_on": "2026-05-01", "released_on": "2025-01-01"}
            for f in grades["family"] for i in range(8)]
    registry = pd.DataFrame({"benchmark": grades["family"], "family": grades["family"], "role": "primary",
                             "contamination": "static", "items": 500.0, "category": "math"})
    table = family_quality(dated(rows), registry, grades, CFG["family_quality"])
    observations = {(m, "default", "f"): Observation(m, "default", "f", "bounded", verification_class=v)
                    for m, v in (("a", "independent"), ("b", "vendor_reported"), ("c", "vendor_reported"))}
    states = pd.DataFrame({"model": list("abc"), "reasoning_state": "default", "display_mean": [150.0, 140.0, 130.0],
                           "eligible": True})
    cells = pd.DataFrame({"model": list("abc"), "reasoning_state": "default", "family": "f", "u": [0.9, 0.8, 0.7]})
    pairs = leaderboard_pairs(states, observations, cells, CFG["comparability"])
    fit = bundle.fit
    return {"family_quality": table.assign(fit=fit), "family_quality_agreement": agreement(table).assign(fit=fit),
            "comparability_verdicts": pairs.assign(fit=fit)}


def test_quality_and_verdicts_are_published_and_shown(tmp_path, bundle):
    tables = _quality_tables(bundle)
    folder = published(tmp_path, bundle, replace=tables)
    out = tmp_path / "report"
    out.mkdir()
    result = build_report(folder, out, load_publish_config()["report"])
    page = (out / REPORT_FILE).read_text()
    assert {"quality", "comparability"} <= set(result.sections) and result.notes == []
    published_quality = pd.read_csv(folder / "family_quality.csv")
    assert len(published_quality) == len(bundle.tables["reliability_grades"]) and set(published_quality["fit"]) == {bundle.fit}
    rho = pd.read_csv(folder / "family_quality_agreement.csv").query(
        "statistic == 'spearman_vs_reliability' and measure == 'quality'")["value"].iloc[0]
    assert f"Spearman ρ = {rho:.2f}" in page
    cross = TableRows("quality-crosstab")
    cross.feed(page)
    agree = tables["family_quality_agreement"].query("statistic == 'crosstab'")
    assert sum(int(c) for row in cross.rows for c in row[1:]) == int(agree["n_families"].sum())
    counts = TableRows("verdict-counts")
    counts.feed(page)
    # a -> b crosses the verification boundary (rule 8), b -> c is comparable (rule 10); once overall, once per family
    assert [(row[0], row[2], row[3], row[4]) for row in counts.rows if row] == [("8", "caveat", "1", "1"),
                                                                         ("10", "comparable", "1", "1")]
    assert '<img src="quality.png"' in page and (out / "quality.png").exists()
