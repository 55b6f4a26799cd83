"""The short summary `make run` ends with, read from the current publication only (what was published, not
what a table happens to hold now): sources and snapshot hashes, rows per cleaning stage, engine and
diagnostics, the top models with intervals, grade counts, the headline validation metrics, where the report is.

    python -m atlas_assets.publish.summary [--top 10]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd


def _csv(folder: Path, name: str) -> pd.DataFrame:
    path = folder / f"{name}.csv"
    return pd.read_csv(path) if path.exists() else pd.DataFrame()


def summary_text(folder: Path, top: int = 10) -> str:
    record = json.loads((folder / "methodology.json").read_text())
    lines = [f"publication {folder.name}  (data {record['stamps']['data_sha256'][:16]}, "
             f"specification {record['stamps']['spec_sha256'][:16]})"]
    for source in record.get("sources") or []:
        if isinstance(source, dict):
            lines.append(f"  source {source['source']}: sha256 {source['sha256'][:16]}, {source['bytes']:,} bytes, "
                         f"{source.get('origin', '')} {source['url']}")
    stages = record.get("cleaning_stages")
    if isinstance(stages, list) and stages:
        lines.append("  rows per stage: " + ", ".join(f"{s['stage']} {s['rows_out']:,}" for s in stages))
    fit = record["fit"]
    d = fit.get("diagnostics") or {}
    lines.append(f"  fit: {fit.get('engine')}, max R-hat {d.get('max_rhat', float('nan')):.4f}, min bulk / tail ESS "
                 f"{d.get('min_ess_bulk', 0):.0f} / {d.get('min_ess_tail', 0):.0f}, {d.get('divergences')} divergences, "
                 f"{d.get('n_gradient_evals', 0):,} leapfrog steps, {d.get('sample_seconds', 0):.0f} s sampling")
    models = _csv(folder, "model_scores")
    if len(models):
        ranked = models[models["headline_status"] == "published"].sort_values("display_mean", ascending=False).head(top)
        lines.append(f"  top {len(ranked)} of {len(models)} models (display units; 90% interval):")
        for _, m in ranked.iterrows():
            lines.append(f"    {m['display_mean']:6.1f} [{m['display_lower']:.1f}, {m['display_upper']:.1f}]  "
                         f"{m['model']} ({m['headline_state']})")
    grades = _csv(folder, "reliability_grades")
    if len(grades):
        counts = grades["grade"].fillna("ungraded").value_counts()
        lines.append("  reliability grades: " + ", ".join(f"{g} {int(counts.get(g, 0))}" for g in
                                                          ("A", "B", "C", "D", "ungraded")))
    metrics = _csv(folder, "validation_metrics")
    if len(metrics):
        for study in ("forward", "forward_thin", "masked"):
            rows = metrics[metrics["study"] == study].set_index("method")
            if {"atlas", "eci_form"} <= set(rows.index):
                a, e = rows.loc["atlas"], rows.loc["eci_form"]
                lines.append(f"  validation {study}: {int(a['n_cells'])} held-out cells, RMSE {a['rmse_points']:.2f} "
                             f"points (ECI form {e['rmse_points']:.2f}, ratio {a['rmse'] / e['rmse']:.2f}), CRPS "
                             f"{a['crps']:.4f} ({e['crps']:.4f}), 90% coverage {100 * a['coverage_90']:.1f}% "
                             f"({100 * e['coverage_90']:.1f}%)")
    else:
        lines.append("  validation: not in this publication")
    report = folder / "report" / "index.html"
    lines.append(f"  report: {report if report.exists() else '(not built yet)'}")
    return "\n".join(lines)


def main(argv=None) -> int:
    from atlas_assets.publish.store import current_folder

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    try:
        folder = current_folder()
    except Exception as exc:  # nothing published yet: say so, do not fail the run that printed it
        print(f"no publication yet: {exc}")
        return 0
    print(summary_text(folder, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
