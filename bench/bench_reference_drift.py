"""How far the scores of states with no new results move between two fits, on the fit's own anchored display
scale and on a frozen reference scale (issue 12; atlas_assets/outputs/reference_scale.py).

    .venv/bin/python bench/bench_reference_drift.py OLD_FIT_DIR NEW_FIT_DIR [--reference 2026-Q4] [--min-shared 10]
        [--reference-dir DIR]   # e.g. a reference frozen from OLD_FIT_DIR (`reference_scale freeze --directory`)

Prints, for the reference fit (when it is one of the two) how adopting the reference moves its own scores, then
per scale: untouched states, mean / median |move| / max |move| and the share within the new 90% interval's
half-width. "Untouched": identical modeled observations (family, score, items) in both fits.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from atlas_assets.model.fit_process import load_fit  # noqa: E402
from atlas_assets.model.scores import state_scores  # noqa: E402
from atlas_assets.outputs import reference_scale as rs  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("old_fit")
    parser.add_argument("new_fit")
    parser.add_argument("--reference", default="2026-Q4")
    parser.add_argument("--min-shared", type=int, default=10)
    parser.add_argument("--reference-dir", default=None, help="where reference files are (default: the package's)")
    args = parser.parse_args(argv)
    reference = rs.load_reference(args.reference, Path(args.reference_dir) if args.reference_dir else None)
    old, new = load_fit(args.old_fit), load_fit(args.new_fit)
    untouched = rs.untouched_states(pd.read_csv(Path(args.old_fit) / "modeled_observations.csv"),
                                    pd.read_csv(Path(args.new_fit) / "modeled_observations.csv"))
    print(f"reference {reference.version} (fit {reference.fit}); old {Path(args.old_fit).name}, "
          f"new {Path(args.new_fit).name}; untouched states: {len(untouched)}")
    anchored = {name: state_scores(fit.idata, fit.stan_input, fit.config) for name, fit in (("old", old), ("new", new))}
    frozen = {name: rs.scores_on_reference(fit, reference, args.min_shared)["state_scores"]
              for name, fit in (("old", old), ("new", new))}
    for name, fit in (("old", old), ("new", new)):
        _, link = rs.fit_on_reference(fit, reference, args.min_shared)
        a, f = anchored[name], frozen[name]
        move = (f["display_mean"] - a["display_mean"]).abs()
        width_a = (a["display_upper"] - a["display_lower"]).median()
        width_f = (f["display_upper"] - f["display_lower"]).median()
        print(f"  {name}: link on {len(link.families)} families, B mean {link.B.mean():.3f} (sd {link.B.std():.3f}), "
              f"A mean {link.A.mean():.3f}; reference vs anchored display: median |diff| {move.median():.2f}, "
              f"max {move.max():.2f}; median 90% width {width_f:.2f} vs {width_a:.2f}")
    for label, tables in (("anchored (fit's own anchors)", anchored), (f"reference {reference.version}", frozen)):
        summary = rs.drift_summary(rs.scale_drift(tables["old"], tables["new"], untouched))
        print(f"  drift on {label}: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                                  for k, v in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
