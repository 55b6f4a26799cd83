"""The measured effect of a method change: compare two publication folders (var/publications/<version>).

    python -m atlas_assets.publish.compare_publications OLD NEW [--top 20]

Reads only the published CSVs and methodology.json of each folder (store.py's format) and prints:
states added and removed; states gaining or losing a headline (a `headline` column of state_scores, n/a
when either publication lacks it) and models gaining or losing a published headline (model_scores
`headline_status`); the largest change of a state's score (display_mean) among states in both; the top-N
leaderboard order (models entering, leaving, moving; Kendall's tau over the models in both); the forward
study's RMSE (points) of the model before and after (validation_metrics). The text is what a CHANGES.md
entry's "Effect" quotes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from atlas_assets.publish.report import leaderboard_rows

STATE_KEY = ["model", "reasoning_state"]


def _table(folder: Path, name: str) -> pd.DataFrame | None:
    path = folder / f"{name}.csv"
    return pd.read_csv(path) if path.exists() else None


def _method_version(folder: Path) -> str | None:
    path = folder / "methodology.json"
    if not path.exists():
        return None
    return ((json.loads(path.read_text()).get("method_version")) or {}).get("version")


def _headline_states(states: pd.DataFrame) -> set[tuple[str, str]]:
    flag = states["headline"].astype(str).str.lower().isin(["true", "1", "published", "yes"])
    return set(map(tuple, states.loc[flag, STATE_KEY].to_numpy()))


def compare(old: Path, new: Path, top: int = 20) -> dict[str, Any]:
    old, new = Path(old), Path(new)
    for folder in (old, new):
        if not (folder / "manifest.json").exists() or not (folder / "state_scores.csv").exists():
            raise FileNotFoundError(f"{folder}: not a publication folder (manifest.json and state_scores.csv needed)")
    out: dict[str, Any] = {"old": old.name, "new": new.name,
                           "method_version": {"old": _method_version(old), "new": _method_version(new)}}
    so, sn = _table(old, "state_scores"), _table(new, "state_scores")
    ko, kn = set(map(tuple, so[STATE_KEY].to_numpy())), set(map(tuple, sn[STATE_KEY].to_numpy()))
    out["states"] = {"old": len(ko), "new": len(kn), "added": len(kn - ko), "removed": len(ko - kn)}

    if "headline" in so.columns and "headline" in sn.columns:
        ho, hn = _headline_states(so), _headline_states(sn)
        out["state_headlines"] = {"old": len(ho), "new": len(hn), "gained": sorted(hn - ho), "lost": sorted(ho - hn)}
    else:
        out["state_headlines"] = "n/a: state_scores has no headline column in " + " and ".join(
            f.name for f, s in ((old, so), (new, sn)) if "headline" not in s.columns)
    mo, mn = _table(old, "model_scores"), _table(new, "model_scores")
    if mo is not None and mn is not None:
        po = set(mo.loc[mo["headline_status"] == "published", "model"])
        pn = set(mn.loc[mn["headline_status"] == "published", "model"])
        out["model_headlines"] = {"old": len(po), "new": len(pn), "gained": sorted(pn - po), "lost": sorted(po - pn)}

    both = so.merge(sn, on=STATE_KEY, suffixes=("_old", "_new"))
    change = both["display_mean_new"] - both["display_mean_old"]
    if len(both):
        i = int(np.argmax(np.abs(change.to_numpy())))
        width = (both["display_upper_old"] - both["display_lower_old"]).to_numpy()
        out["score_change"] = {
            "states_in_both": len(both), "largest": float(change.iloc[i]),
            "largest_state": f"{both['model'].iloc[i]} {both['reasoning_state'].iloc[i]}",
            "largest_old": float(both["display_mean_old"].iloc[i]), "largest_new": float(both["display_mean_new"].iloc[i]),
            "median_abs": float(np.median(np.abs(change))),
            "share_within_old_interval": float(np.mean(np.abs(change.to_numpy()) <= width / 2)),
        }
    if mo is not None and mn is not None:
        to, tn = leaderboard_rows(mo, top), leaderboard_rows(mn, top)
        ro, rn = {m: i + 1 for i, m in enumerate(to["model"])}, {m: i + 1 for i, m in enumerate(tn["model"])}
        common = [m for m in tn["model"] if m in ro]
        moved = [(m, ro[m], rn[m]) for m in common if ro[m] != rn[m]]
        tau = kendalltau([ro[m] for m in common], [rn[m] for m in common]).statistic if len(common) > 1 else float("nan")
        out["top"] = {"n": top, "entered": sorted(set(rn) - set(ro)), "left": sorted(set(ro) - set(rn)),
                      "moved": moved, "same_order": not moved and set(ro) == set(rn), "kendall_tau_common": float(tau)}
    out["forward_rmse_points"] = {label: _forward(folder) for label, folder in (("old", old), ("new", new))}
    return out


def _forward(folder: Path) -> dict[str, float] | str:
    metrics = _table(folder, "validation_metrics")
    if metrics is None or metrics.empty:
        return "n/a: no validation_metrics"
    atlas = metrics[(metrics["method"] == "atlas") & metrics["study"].isin(["forward", "forward_strict"])]
    return {r.study: float(r.rmse_points) for r in atlas.itertuples()} or "n/a: no forward study"


def render(result: dict[str, Any]) -> str:
    lines = [f"Publications {result['old']} -> {result['new']} "
             f"(method version {result['method_version']['old']} -> {result['method_version']['new']})"]
    s = result["states"]
    lines.append(f"- states: {s['old']} -> {s['new']} ({s['added']} added, {s['removed']} removed)")
    h = result["state_headlines"]
    lines.append(f"- states gaining/losing a headline: {h}" if isinstance(h, str) else
                 f"- state headlines: {h['old']} -> {h['new']}; gained {len(h['gained'])}, lost {len(h['lost'])}"
                 + (f" (lost: {', '.join(' '.join(k) for k in h['lost'][:8])})" if h["lost"] else ""))
    if "model_headlines" in result:
        m = result["model_headlines"]
        lines.append(f"- models with a published headline: {m['old']} -> {m['new']}; gained {len(m['gained'])}, "
                     f"lost {len(m['lost'])}" + (f" (lost: {', '.join(m['lost'][:8])})" if m["lost"] else ""))
    if "score_change" in result:
        c = result["score_change"]
        lines.append(f"- largest score change among {c['states_in_both']} states in both: {c['largest']:+.1f} "
                     f"({c['largest_state']}: {c['largest_old']:.1f} -> {c['largest_new']:.1f}); median |change| "
                     f"{c['median_abs']:.2f}; {100 * c['share_within_old_interval']:.0f}% moved less than half their "
                     "old 90% interval")
    if "top" in result:
        t = result["top"]
        moved = ", ".join(f"{m} {a}->{b}" for m, a, b in t["moved"][:10])
        lines.append(f"- top {t['n']}: " + ("same models in the same order" if t["same_order"] else
                     f"{len(t['entered'])} entered ({', '.join(t['entered'])}), {len(t['left'])} left "
                     f"({', '.join(t['left'])}), {len(t['moved'])} of the others moved ({moved}); Kendall tau "
                     f"{t['kendall_tau_common']:.2f}"))
    f = result["forward_rmse_points"]
    shown = {k: v if isinstance(v, str) else ", ".join(f"{study} {rmse:.2f}" for study, rmse in sorted(v.items()))
             for k, v in f.items()}
    lines.append(f"- forward-study RMSE (points) of the model: before {shown['old']}; after {shown['new']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Measured effect of a method change between two publications.")
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = parser.parse_args(argv)
    try:
        result = compare(args.old, args.new, args.top)
    except FileNotFoundError as missing:
        print(f"error: {missing}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=1, default=str) if args.json else render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
