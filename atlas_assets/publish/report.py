"""The report: one static HTML page and its PNGs, built only from the files of one publication.

Nothing here reads DuckDB or the fit: every number shown comes from a published CSV or
methodology.json of the version folder it is given, so the page says exactly what was published.
Sections (each a heading, one sentence and a figure and/or table): leaderboard, reasoning effects,
difficulty curves, reliability, calibration, forward-in-time errors, the one-number question, what it
costs (or why no cost table is published), how it was made. A section whose tables are empty (a
validation study that did not run) shows a visible note instead of its figure. The page is plain HTML and CSS with images as relative files
and no scripts; it links the published CSVs beside it (`../<artifact>.csv`).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from atlas_assets.publish import figures
from atlas_assets.publish.artifacts import ARTIFACTS_BY_NAME, METHODOLOGY

REPORT_FILE = "index.html"
REPORT_RECORD = "report.json"
DASH = "–"


@dataclass
class ReportResult:
    publication: str
    sections: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    images: dict[str, bytes] = field(default_factory=dict)   # name -> small PNG for the asset's metadata
    leaderboard: list[dict[str, Any]] = field(default_factory=list)


class PublishedVersion:
    """The files of one version folder, read on demand (CSV: the canonical rendering)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.manifest = json.loads((self.folder / "manifest.json").read_text())
        self.methodology = json.loads((self.folder / f"{METHODOLOGY}.json").read_text())
        self._tables: dict[str, pd.DataFrame] = {}

    @property
    def name(self) -> str:
        return self.manifest["name"]

    def table(self, name: str) -> pd.DataFrame:
        if name not in self._tables:
            self._tables[name] = pd.read_csv(self.folder / f"{name}.csv")
        return self._tables[name]

    def optional_table(self, name: str) -> pd.DataFrame:
        """An artifact the publication may lack (calibrated, predicted, unknown-setting states): empty when absent."""
        return self.table(name) if (self.folder / f"{name}.csv").exists() else pd.DataFrame()


# ------------------------------------------------------------------------------------------- selections


def leaderboard_rows(model_scores: pd.DataFrame, top: int) -> pd.DataFrame:
    """The `top` models with a published headline, best first (ties by name)."""
    ranked = model_scores[model_scores["headline_status"] == "published"]
    ranked = ranked.sort_values(["display_mean", "model"], ascending=[False, True], kind="mergesort")
    return ranked.head(top).reset_index(drop=True)


def other_states(state_scores: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Each leaderboard model's eligible states other than its headline."""
    headline = dict(zip(rows["model"], rows["headline_state"]))
    mine = state_scores[state_scores["model"].isin(headline) & state_scores["eligible"].astype(bool)]
    mine = mine[mine["reasoning_state"] != mine["model"].map(headline)]
    return mine.sort_values(["model", "display_mean"], ascending=[True, False])


def display_units(methodology: dict[str, Any]) -> str:
    """'display units: <low state> = 130, <high state> = 150' from the fit's recorded display references."""
    reference = (methodology.get("fit") or {}).get("display_reference") or \
        (((methodology.get("configuration") or {}).get("model") or {}).get("display") or {}).get("reference") or {}
    parts = [f"{r.get('model')} {r.get('reasoning_state')} = {r.get('value'):g}"
             for r in (reference.get("low"), reference.get("high")) if isinstance(r, dict) and "value" in r]
    return "display units: " + ", ".join(parts) if parts else "display units"


def difficulty_families(bounds: pd.DataFrame, parameters: pd.DataFrame, chosen: list[str]) -> pd.DataFrame:
    """Up to three contrasting bounded families with a `role`: the easiest (preferably flagged ≲, i.e.
    saturated), the hardest measured without a bound, one reported as a bound (preferably ≳); or the
    families named in publish.yaml."""
    merged = bounds.drop(columns=["kind", "floor"]).merge(parameters[[
        "family", "kind", "floor", "b_display_mean", "b_display_lower", "b_display_upper", "beta_display_mean"]],
        on="family")
    bounded = merged[merged["kind"] == "bounded"]
    picks: list[tuple[str, str]] = []

    def take(candidates: pd.DataFrame, role: str) -> None:
        for family in candidates["family"]:
            if family not in {f for f, _ in picks}:
                picks.append((family, role))
                return

    if chosen:
        for family in chosen:
            row = bounded[bounded["family"] == family]
            if len(row):
                flag = row["bound"].iloc[0]
                picks.append((family, f"reported as a bound ({flag})" if isinstance(flag, str) else "measured"))
    else:
        by_difficulty = bounded.sort_values("difficulty_median", kind="mergesort")
        take(pd.concat([by_difficulty[by_difficulty["bound"] == "≲"], by_difficulty]), "easy, saturated")
        unflagged = by_difficulty[by_difficulty["bound"].isna()]
        take(unflagged.iloc[::-1], "frontier: hardest measured")
        flagged = by_difficulty[by_difficulty["bound"].notna()].iloc[::-1]
        take(pd.concat([flagged[flagged["bound"] == "≳"], flagged]), "reported as a bound")
    roles = dict(picks)
    out = bounded[bounded["family"].isin(roles)].copy()
    out["role"] = out["family"].map(roles)
    out["order"] = out["family"].map({f: i for i, (f, _) in enumerate(picks)})
    return out.sort_values("order").drop(columns="order").reset_index(drop=True)


# ---------------------------------------------------------------------------------------------- html bits


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def num(value: Any, digits: int = 1) -> str:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return DASH
    return DASH if not np.isfinite(value) else f"{value:.{digits}f}"


def sig(value: Any, digits: int = 3) -> str:
    """Significant digits (dollars per task span 1e-4 to 1e2)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return DASH
    return DASH if not np.isfinite(value) else f"{value:.{digits}g}"


def interval(lower: Any, upper: Any, digits: int = 1) -> str:
    return f"{num(lower, digits)} – {num(upper, digits)}"


def table(headers: Iterable[str], rows: Iterable[Iterable[Any]], table_id: str | None = None,
          numeric_from: int = 1, row_keys: Iterable[str] | None = None) -> str:
    """An HTML table of already formatted cells; columns from `numeric_from` on are right-aligned."""
    head = "".join(f"<th{' class=n' if i >= numeric_from else ''}>{esc(h)}</th>" for i, h in enumerate(headers))
    keys = list(row_keys) if row_keys is not None else None
    body = []
    for r, row in enumerate(rows):
        cells = "".join(f"<td{' class=n' if i >= numeric_from else ''}>{esc(c)}</td>" for i, c in enumerate(row))
        key = f' data-key="{esc(keys[r])}"' if keys is not None else ""
        body.append(f"<tr{key}>{cells}</tr>")
    ident = f' id="{table_id}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def image(name: str, alt: str) -> str:
    return f'<img src="{name}.png" alt="{esc(alt)}">'


CSS = """
body { font: 15px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #222; margin: 0; background: #fafafa; }
main { max-width: 980px; margin: 0 auto; padding: 24px 28px 60px; background: #fff; }
h1 { font-size: 28px; margin: 8px 0 4px; }
h2 { font-size: 20px; margin: 40px 0 4px; border-bottom: 1px solid #e5e5e5; padding-bottom: 4px; }
p.lede { margin: 0 0 12px; color: #444; }
p.stamp { font-size: 12px; color: #777; margin: 0 0 18px; }
p.note { background: #fff8e1; border-left: 4px solid #f1a340; padding: 8px 12px; }
nav a { margin-right: 14px; font-size: 13px; }
img { max-width: 100%; height: auto; display: block; margin: 8px 0 12px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 16px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
th { background: #f5f5f5; font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
details summary { cursor: pointer; color: #08519c; margin: 6px 0; }
code { font-size: 12px; }
"""


# -------------------------------------------------------------------------------------------- sections


class _Builder:
    """Collects sections, figures and notes for one report."""

    def __init__(self, version: PublishedVersion, out_dir: Path, cfg: dict[str, Any]):
        self.version, self.out_dir, self.cfg = version, Path(out_dir), cfg
        self.result = ReportResult(version.name)
        self.parts: list[str] = []

    def section(self, ident: str, title: str, lede: str, body: str) -> None:
        self.result.sections.append(ident)
        self.parts.append(f'<section id="{ident}"><h2>{esc(title)}</h2><p class="lede">{esc(lede)}</p>{body}</section>')

    def figure(self, name: str, fig) -> str:
        png = figures.render(fig, int(self.cfg["image_dpi"]))
        (self.out_dir / f"{name}.png").write_bytes(png)
        self.result.images[name] = figures.shrink(png, self.cfg["metadata_image_dpi"] / self.cfg["image_dpi"])
        return name

    def empty(self, text: str) -> str:
        self.result.notes.append(text)
        return note(text)


def _leaderboard(b: _Builder) -> None:
    v = b.version
    rows = leaderboard_rows(v.table("model_scores"), int(b.cfg["leaderboard_models"]))
    if rows.empty:
        b.section("leaderboard", "Leaderboard", "Capability of each model's best reasoning state.",
                  b.empty("No model has a rank-eligible state in this publication."))
        return
    others = other_states(v.table("state_scores"), rows)
    b.figure("leaderboard", figures.leaderboard(rows, others, f"capability\n({display_units(v.methodology)})"))
    listed = others.groupby("model").apply(
        lambda g: ", ".join(f"{s} {num(m)}" for s, m in zip(g["reasoning_state"], g["display_mean"])),
        include_groups=False).to_dict() if len(others) else {}
    body = image("leaderboard", "leaderboard with intervals") + table(
        ["#", "model", "best state", "capability", "90% interval", "P(rank 1)", "other eligible states"],
        [[i + 1, r.model, r.headline_state + (" (display reference)" if isinstance(r.note, str) else ""),
          num(r.display_mean), interval(r.display_lower, r.display_upper),
          num(r.p_rank1, 2), listed.get(r.model, "")] for i, r in enumerate(rows.itertuples())],
        table_id="leaderboard-table", numeric_from=3, row_keys=rows["model"])
    b.result.leaderboard = [
        {"model": r.model, "headline_state": r.headline_state, "display_mean": float(r.display_mean),
         "display_lower": float(r.display_lower), "display_upper": float(r.display_upper)}
        for r in rows.itertuples()]
    b.section("leaderboard", "Leaderboard",
              f"The top {len(rows)} models by the capability of their best eligible reasoning state, with 90% "
              "credible intervals; ticks on a row are the same model's other eligible reasoning states.", body)


def _score_paths(v, calibrated: pd.DataFrame, predicted: pd.DataFrame, unknown: pd.DataFrame) -> list[list[Any]]:
    """How many published capabilities come from each path: the fit itself, calibrate-in (at a measured setting or
    at a setting without results), the structure for settings of fitted models, the unknown-setting mixture."""
    rows = []
    fitted = v.optional_table("state_scores")
    if len(fitted):
        rows.append(["fitted (the main fit's posterior)", len(fitted)])
    if len(calibrated):
        measured = calibrated["n_obs"].astype(int) > 0
        rows.append(["calibrated onto the fit from the model's own results", int(measured.sum())])
        if (~measured).any():
            rows.append(["calibrated model, setting without results (reasoning structure)", int((~measured).sum())])
    if len(predicted):
        rows.append(["fitted model, setting without results (reasoning structure)", len(predicted)])
    if len(unknown):
        rows.append(["fitted model, unknown setting (mixture over its settings)", len(unknown)])
    return rows


def _beyond_the_fit(b: _Builder) -> None:
    """Models outside the fit calibrated onto it, and reasoning settings nobody measured (never a headline)."""
    v = b.version
    parts = []
    calibrated = v.optional_table("calibrated_states")
    if len(calibrated):
        top = calibrated.sort_values("display_mean", ascending=False).head(int(b.cfg["leaderboard_models"]) // 2)
        parts.append(f"<p>{len(calibrated)} states of {calibrated['model'].nunique()} models outside the fit (too few "
                     "families for it, or new) are placed on its scale from their own results, without a refit. "
                     "Their intervals are wide by the evidence, and they are not ranked.</p>")
        parts.append(table(["model", "state", "capability", "90% interval", "results", "families"],
                           [[r.model, r.reasoning_state, num(r.display_mean), interval(r.display_lower, r.display_upper),
                             int(r.n_obs), getattr(r, "families", "")] for r in top.itertuples()],
                           table_id="calibrated-table", numeric_from=2))
    predicted = v.optional_table("predicted_states")
    if len(predicted):
        parts.append(f"<p>{len(predicted)} reasoning settings of {predicted['model'].nunique()} fitted models were "
                     "never measured; their capability is predicted from the shared effect of the setting and the "
                     "model's own reasoning terms.</p>")
        top = predicted.sort_values("display_mean", ascending=False).head(10)
        parts.append(table(["model", "setting", "capability", "90% interval"],
                           [[r.model, r.reasoning_state, num(r.display_mean), interval(r.display_lower, r.display_upper)]
                            for r in top.itertuples()], table_id="predicted-table", numeric_from=2))
    unknown = v.optional_table("unknown_setting_states")
    if len(unknown):
        parts.append(f"<p>{len(unknown)} runs of fitted models were published without their reasoning setting "
                     "(Epoch's <code>_unknown</code>, web-app runs). Each is placed as a mixture over the model's "
                     "settings, weighted by how well each setting explains the run's own scores.</p>")
        top = unknown.sort_values("display_mean", ascending=False).head(10)
        parts.append(table(["model", "capability", "90% interval", "results", "most probable setting", "its weight"],
                           [[r.model, num(r.display_mean), interval(r.display_lower, r.display_upper), int(r.n_obs),
                             r.most_probable_setting, num(r.most_probable_share, 2)] for r in top.itertuples()],
                           table_id="unknown-setting-table", numeric_from=1))
    paths = _score_paths(v, calibrated, predicted, unknown)
    if paths:
        parts.insert(0, table(["where the capability comes from", "states"], paths, table_id="paths-table",
                              numeric_from=1))
    # optional artifacts: their absence is not a gap in what was asked of the run, so no report note
    body = "".join(parts) or note("This publication has no calibrated models and no predicted settings.")
    b.section("beyond", "Beyond the fit", "Scores for models with too little evidence for the fit, and for "
              "reasoning settings nobody measured.", body)


def _headline_gates(b: _Builder) -> None:
    """Which states have a published headline under publish.yaml's gate, and why the others do not."""
    gates = b.version.optional_table("headline_gates")
    if gates.empty:
        b.section("gates", "Publication gate", "Which models have enough evidence for a published headline.",
                  b.empty("This publication carries no headline_gates table: no gate was applied."))
        return
    from atlas_assets.publish.gates import reason_counts

    passed = gates["gate_pass"].astype(bool)
    heads = gates[gates["headline_state"].astype(bool)]
    withheld = heads[~heads["gate_pass"].astype(bool)].sort_values(["n_families", "model"], ascending=[False, True])
    body = (f"<p>{int(passed.sum())} of {len(gates)} fitted states pass the gate; of the {len(heads)} models' "
            f"headline states {int(heads['gate_pass'].astype(bool).sum())} pass and {len(withheld)} are listed as "
            "<em>not enough evidence</em> (they stay in the fit and in the cell predictions, and are not ranked). "
            f"Rule: {esc(gates['gate_rule'].iloc[0])}.</p>")
    counts = reason_counts(gates)
    if len(counts):
        body += table(["requirement missed (failing states)", "states"], counts.to_numpy().tolist(),
                      table_id="gate-reasons-table")
    if len(withheld):
        shown = withheld.head(int(b.cfg["leaderboard_models"]))
        body += table(["model", "state", "families", "categories", "lineages", "90% width", "why not published"],
                      [[r.model, r.reasoning_state, int(r.n_families), r.categories, int(r.n_lineages),
                        num(r.interval_width), r.reason] for r in shown.itertuples()],
                      table_id="gate-withheld-table", numeric_from=2, row_keys=shown["model"])
    b.section("gates", "Publication gate", "A score from a handful of results looks more precise than it is: a "
              "headline needs enough families, categories and independent benchmark lineages.", body)


def _skill_scores(b: _Builder) -> None:
    """Per category, the strongest states by their skill score (capability from that category's families), and the
    skills of the calibrated states (models outside the fit, not ranked)."""
    skills = b.version.optional_table("skill_scores")
    if skills.empty:
        b.section("skills", "Skill scores", "Capability per category.",
                  b.empty("This publication carries no skill scores."))
        return
    deviations = b.version.optional_table("skill_deviations")
    tau = dict(zip(deviations.get("category", []), deviations.get("deviation_sd", [])))
    published = skills[skills["status"] == "published"]
    calibrated = b.version.optional_table("calibrated_skill_scores")
    calibrated = calibrated[calibrated["status"] == "published"] if len(calibrated) else calibrated
    summary = []
    for category, rows in skills.groupby("category"):
        mine = published[published["category"] == category]
        summary.append([category, len(mine), int((rows["n_families"] == 1).sum()),
                        int((calibrated["category"] == category).sum()) if len(calibrated) else 0,
                        num(tau.get(category), 2), num((mine["display_upper"] - mine["display_lower"]).mean())])
    body = (f"<p>{len(published)} skill scores of {published[['model', 'reasoning_state']].drop_duplicates().shape[0]} "
            "states are published; a state with fewer families in a category is listed as <em>not enough data</em>. "
            "A skill reads the category's results against the state's capability from its other results, allowed "
            "to differ by the category's learned deviation; same display scale as the capability.</p>")
    body += table(["category", "skills published", "1 family only (not enough data)", "calibrated states' skills",
                   "deviation sd (latent)", "mean 90% width"], summary, table_id="skill-summary-table")
    n = int(b.cfg.get("skill_rows", 10))
    for category, rows in published.groupby("category"):
        top = rows.sort_values(["display_mean", "model"], ascending=[False, True]).head(n)
        body += f"<h3>{esc(category)}</h3>" + table(
            ["model", "state", "skill", "90% interval", "capability", "families"],
            [[r.model, r.reasoning_state, num(r.display_mean), interval(r.display_lower, r.display_upper),
              num(r.general_display_mean), r.families] for r in top.itertuples()],
            table_id=f"skill-{category}-table", numeric_from=2)
    if len(calibrated):
        shown = calibrated.sort_values(["category", "display_mean", "model"], ascending=[True, False, True])
        shown = shown.groupby("category").head(n)
        body += (f"<h3>Calibrated models</h3><p>{len(calibrated)} skill scores of "
                 f"{calibrated[['model', 'reasoning_state']].drop_duplicates().shape[0]} states of models outside the "
                 "fit (calibrated onto it from their own results): the same reading of the category, against the "
                 "state's calibrated capability; wide by their thin evidence, and not ranked.</p>")
        body += table(["category", "model", "state", "skill", "90% interval", "capability (calibrated)", "families"],
                      [[r.category, r.model, r.reasoning_state, num(r.display_mean),
                        interval(r.display_lower, r.display_upper), num(r.general_display_mean), r.families]
                       for r in shown.itertuples()], table_id="calibrated-skill-table", numeric_from=3)
    b.section("skills", "Skill scores", "Capability per category: the category's benchmark families read against "
              "the state's capability from its other results, on the display scale of the leaderboard.", body)


def _reasoning(b: _Builder) -> None:
    effects = b.version.table("reasoning_effects")
    rows = [[r.setting, r.setting_kind, num(r.display_mean), interval(r.display_lower, r.display_upper),
             num(getattr(r, "p_step_helps", np.nan), 2)] for r in effects.itertuples()]
    b.section("reasoning", "Reasoning effects",
              "What each reasoning setting adds to a model's default capability, shared across models (display units).",
              table(["setting", "kind", "effect", "90% interval", "P(step up helps)"], rows, numeric_from=2))


def _difficulty(b: _Builder) -> None:
    v = b.version
    bounds, parameters, states = v.table("difficulty_bounds"), v.table("family_parameters"), v.table("state_scores")
    picked = difficulty_families(bounds, parameters, list(b.cfg.get("difficulty_families") or []))
    lede = ("Expected score against capability for contrasting benchmark families, with the states evaluated "
            "on them as dots; a difficulty outside the evaluated range is only a bound.")
    if picked.empty:
        b.section("difficulty", "How hard the benchmarks are", lede,
                  b.empty("No bounded family in this publication to draw."))
        return
    cells = v.table("cell_predictions")
    cells = cells[cells["observed"].astype(bool) & cells["family"].isin(picked["family"])]
    cells = cells.merge(states[["model", "reasoning_state", "display_mean"]], on=["model", "reasoning_state"])
    cells = cells.rename(columns={"display_mean": "capability", "u_observed": "u"})
    span = [states["display_mean"].min(), states["display_mean"].max(),
            picked["b_display_lower"].min(), picked["b_display_upper"].max()]
    lo, hi = float(np.nanmin(span)), float(np.nanmax(span))
    pad = 0.06 * (hi - lo or 1.0)
    b.figure("difficulty", figures.difficulty_curves(picked, cells, (lo - pad, hi + pad)))
    rows = [[r.family, r.role, r.difficulty_display, interval(r.difficulty_lower, r.difficulty_upper),
             num(getattr(r, "saturation_mean", np.nan)), num(getattr(r, "frontier_expected_mean", np.nan), 2),
             int(getattr(r, "n_states_evaluated", 0) or 0)] for r in picked.itertuples()]
    body = image("difficulty", "difficulty curves") + table(
        ["family", "why shown", "difficulty", "90% interval", "saturates at", "frontier expected score",
         "states evaluated"], rows, numeric_from=2)
    flagged = bounds[bounds["bound"].notna()]
    body += f"<p>{len(flagged)} of {len(bounds)} families are reported as bounds (rule: " \
            f"{esc(bounds['bound_rule'].iloc[0]) if len(bounds) else DASH}).</p>"
    b.section("difficulty", "How hard the benchmarks are", lede, body)


def _reliability(b: _Builder) -> None:
    grades = b.version.table("reliability_grades").copy()
    thresholds = (b.version.methodology.get("configuration", {}).get("outputs", {}) or {}) \
        .get("reliability", {}).get("grades", {"A": 0.85, "B": 0.70, "C": 0.50})
    grades["grade_order"] = grades["grade"].fillna("Z")
    ordered = grades.sort_values(["grade_order", "reliability_mean"], ascending=[True, False], kind="mergesort")
    b.figure("reliability", figures.reliability(ordered, thresholds))
    counts = grades["grade"].fillna("ungraded").value_counts()
    count_table = table(["grade", "families"], [[g, int(counts.get(g, 0))] for g in ("A", "B", "C", "D", "ungraded")])
    family_table = table(
        ["family", "grade", "models", "reliability", "90% interval", "if every model scored"],
        [[r.family, r.grade if isinstance(r.grade, str) else "ungraded", int(r.n_models), num(r.reliability_mean, 2),
          interval(r.reliability_lower, r.reliability_upper, 2), num(r.reliability_all_mean, 2)]
         for r in ordered.itertuples()], numeric_from=2)
    rule = grades["grade_rule"].iloc[0] if len(grades) else ""
    body = (image("reliability", "reliability by family") + count_table
            + f"<p>Rule: {esc(rule)}.</p><details><summary>Every family</summary>{family_table}</details>")
    b.section("reliability", "Which benchmarks measure capability",
              "The share of a benchmark's score variance that is capability rather than noise, by grade; the "
              "ring is the value if every model in the fit had been scored on it.", body)


def _quality(b: _Builder) -> None:
    """Measured benchmark quality (seed 002) beside the reliability grade (seed 003), and how far they agree."""
    v = b.version
    quality, agree = v.optional_table("family_quality"), v.optional_table("family_quality_agreement")
    lede = ("What each benchmark family is worth as evidence today, measured from its live results: room left at "
            "the top, spread among the leaders, exposure to training data, size; beside it the model-based grade.")
    if quality.empty:
        b.section("quality", "Benchmark quality", lede,
                  note("This publication has no family_quality rows (it predates them, or they were not computed)."))
        return
    measured = quality[quality["quality"].notna()]
    rho = agree[(agree["statistic"] == "spearman_vs_reliability") & (agree["measure"] == "quality")]
    parts = [f"<p>{len(measured)} of {len(quality)} families have all four measures (the rest: too few live models, "
             "a rating scale, or no declared item count). Live results: dated from "
             f"{esc(quality['live_from'].iloc[0])} to {esc(quality['snapshot_date'].iloc[0])}.</p>"]
    if len(rho):
        r = rho.iloc[0]
        parts.append(f"<p>Agreement with the reliability grade: Spearman ρ = {num(r['value'], 2)} between quality and "
                     f"posterior-mean reliability over {int(r['n_families'])} families (p = {num(r['p_value'], 3)}). "
                     "A saturated benchmark can still rank the whole field reliably: reliability is measured over "
                     "every model scored, headroom only at the frontier.</p>")
    if len(measured) >= 2:
        b.figure("quality", figures.quality_vs_reliability(measured))
        parts.append(image("quality", "measured quality against reliability"))
    cross = agree[agree["statistic"] == "crosstab"]
    if len(cross):
        bands = ["high", "medium", "low", "not measured"]
        pivot = cross.pivot_table(index="grade", columns="band", values="n_families", aggfunc="sum").reindex(
            index=[g for g in ("A", "B", "C", "D", "ungraded") if g in set(cross["grade"])], columns=bands).fillna(0)
        parts.append(table(["grade"] + [f"quality {band}" for band in bands],
                           [[g] + [int(pivot.at[g, band]) for band in bands] for g in pivot.index],
                           table_id="quality-crosstab"))
    ordered = quality.sort_values(["quality", "family"], ascending=[False, True], na_position="last", kind="mergesort")
    parts.append("<details><summary>Every family, with its inputs</summary>" + table(
        ["family", "live models", "headroom (points)", "top-15 sd (points)", "contamination", "items", "quality",
         "grade", "reliability", "not measured because"],
        [[r.family, int(r.n_live_models), num(r.headroom_points), num(r.discrimination_points), r.contamination or DASH,
          num(r.items, 0), num(r.quality, 2), r.grade if isinstance(r.grade, str) else "ungraded",
          num(r.reliability_mean, 2), (r.pool_note if isinstance(r.pool_note, str) else "")
          or (f"missing {r.quality_missing}" if isinstance(r.quality_missing, str) else "")]
         for r in ordered.itertuples()], table_id="quality-table", numeric_from=1) + "</details>")
    parts.append(f"<p>Rule: {esc(quality['rule'].iloc[0])}.</p>")
    b.section("quality", "Benchmark quality", lede, "".join(parts))


def _scale_and_panel(b: _Builder) -> None:
    """The frozen reference scale (scores on it, how far unchanged states moved) and the active panel (which
    families count as current, the active-panel variant of the scores)."""
    v = b.version
    reference, drift = v.optional_table("reference_state_scores"), v.optional_table("reference_scale_drift")
    panel, variant = v.optional_table("active_panel"), v.optional_table("active_panel_scores")
    conversions = v.optional_table("reference_conversions")
    lede = ("Scores on a frozen reference scale, so a model's number moves mainly when its own results change; and "
            "the benchmarks new models are still tested on.")
    if reference.empty and panel.empty and conversions.empty:
        b.section("scale", "Frozen scale and active panel", lede,
                  note("This publication has neither reference-scale scores nor an active panel (it predates them)."))
        return
    parts = []
    if len(reference):
        version = reference["reference_version"].iloc[0]
        eligible = reference[reference["eligible"].astype(bool)].sort_values("display_mean", ascending=False)
        parts.append(f"<p>Reference scale <b>{esc(version)}</b>: every fit is linked onto the family positions "
                     "frozen in that version (mean-sigma linking per posterior draw); the headline tables use the "
                     "fit's own anchors, these sit beside them.</p>")
        parts.append(table(["model", "state", "reference score", "90% interval"],
                           [[r.model, r.reasoning_state, num(r.display_mean), f"{num(r.display_lower)} – {num(r.display_upper)}"]
                            for r in eligible.head(10).itertuples()], table_id="reference-top"))
    if len(conversions):
        rebased = conversions[conversions["since_last_publication"].astype(bool)]
        for r in rebased.itertuples():
            parts.append(f"<p><b>Rebase since the last publication</b>: its scores were on reference "
                         f"<b>{esc(r.old_version)}</b>, these are on <b>{esc(r.new_version)}</b>. A score published on "
                         f"{esc(r.old_version)} reads as {num(r.alpha, 2)} + {num(r.gamma, 4)} × that score on "
                         f"{esc(r.new_version)} (linked through {int(r.n_shared_families)} shared families).</p>")
        parts.append(f"<p>Conversions between frozen reference versions (<code>reference_conversions.csv</code>): "
                     "display on the new version = α + γ × display on the old one.</p>")
        parts.append(table(["old version", "new version", "α", "γ", "shared families", "since the last publication"],
                           [[r.old_version, r.new_version, num(r.alpha, 3), num(r.gamma, 5), int(r.n_shared_families),
                             "yes" if r.since_last_publication else "no"] for r in conversions.itertuples()],
                           table_id="reference-conversions", numeric_from=2))
    if len(drift):
        rows = []
        for scale, moved in drift.groupby("scale", sort=True):
            within = moved["within_interval"].astype(bool)
            rows.append([scale, len(moved), num(moved["move"].abs().median(), 2), num(moved["move"].abs().max(), 2),
                         f"{100 * within.mean():.0f}%"])
        parts.append(f"<p>States whose results did not change since the previously published fit "
                     f"<code>{esc(drift['previous_fit'].iloc[0])}</code>:</p>")
        parts.append(table(["scale", "states", "median |move|", "max |move|", "within their 90% interval"], rows,
                           table_id="reference-drift"))
    if len(panel):
        active = panel[panel["active"].astype(bool)]
        inactive = panel[~panel["active"].astype(bool)].sort_values("last_result_on")
        parts.append(f"<p>Active panel as of {esc(str(panel['as_of'].iloc[0])[:10])} (a result within "
                     f"{int(panel['window_days'].iloc[0])} days): {len(active)} of {len(panel)} families. Out of it: "
                     + esc(", ".join(f"{r.family} ({str(r.last_result_on)[:10]})" for r in inactive.itertuples()))
                     + ".</p>")
    if len(variant):
        both = variant[variant["in_active_fit"].astype(bool)]
        change = both["change"].abs()
        parts.append(f"<p>The active-panel variant (the model refitted on the active families only): "
                     f"{len(both)} states scored, median |change| {num(change.median(), 2)}, largest "
                     f"{num(change.max(), 2)} points; headlines use the all-history fit.</p>")
    b.section("scale", "Frozen scale and active panel", lede, "".join(parts))


def _comparability(b: _Builder) -> None:
    """Seed 002's verdicts for the leaderboard neighbours, counted per rule."""
    pairs = b.version.optional_table("comparability_verdicts")
    lede = ("Whether two published results may be set side by side: seed 002's ten rules applied to the neighbours "
            "on the leaderboard (per family both were scored on) and on each family's own ranking.")
    if pairs.empty:
        b.section("comparability", "Which results compare", lede,
                  note("This publication has no comparability_verdicts rows (it predates them, or they were not "
                       "computed)."))
        return
    overall = pairs["scope"] == "overall"
    counts = pairs.assign(where=np.where(overall, "overall", "per family")).pivot_table(
        index=["rule", "rule_name", "verdict"], columns="where", values="reason", aggfunc="count", fill_value=0)
    rows = [[int(rule), name, verdict, int(counts.at[(rule, name, verdict), "overall"]) if "overall" in counts else 0,
             int(counts.at[(rule, name, verdict), "per family"]) if "per family" in counts else 0]
            for rule, name, verdict in counts.index]
    top = pairs[overall & (pairs["rank_a"] <= 10)]
    parts = [f"<p>{int(overall.sum())} rows for {pairs.loc[overall, 'rank_a'].nunique()} adjacent pairs of the state "
             f"leaderboard, {int((~overall).sum())} adjacent pairs on {pairs.loc[~overall, 'scope'].nunique()} family "
             "leaderboards.</p>",
             table(["rule", "when", "verdict", "overall rows", "per-family pairs"], rows, table_id="verdict-counts",
                   numeric_from=3),
             "<details><summary>The top of the leaderboard</summary>" + table(
                 ["rank", "state", "next state", "family", "verdict", "reason"],
                 [[int(r.rank_a), f"{r.model_a} {r.state_a}", f"{r.model_b} {r.state_b}", r.family_a, r.verdict,
                   r.reason] for r in top.itertuples()], table_id="verdict-top", numeric_from=9) + "</details>"]
    b.section("comparability", "Which results compare", lede, "".join(parts))


def cost_rows(cost_index: pd.DataFrame, n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The `n` cheapest and the `n` dearest states by median cost index (ties by name); the dearest dearest first."""
    ranked = cost_index.sort_values(["cost_index_median", "model", "reasoning_state"], kind="mergesort")
    return ranked.head(n).reset_index(drop=True), ranked.tail(min(n, max(len(ranked) - n, 0))).iloc[::-1].reset_index(drop=True)


def _cost_gates_text(summary: dict[str, Any]) -> str:
    if not summary:
        return ""
    return (f" (max R-hat {num(summary.get('max_rhat'), 4)}, min bulk / tail ESS {num(summary.get('min_ess_bulk'), 0)} / "
            f"{num(summary.get('min_ess_tail'), 0)}, {summary.get('divergences', DASH)} divergences, min E-BFMI "
            f"{num(summary.get('min_ebfmi'), 2)})")


def _cost(b: _Builder) -> None:
    """The cost table (top and bottom) and the capability-vs-cost frontier, or plainly why there is none."""
    v = b.version
    record = v.methodology.get("cost_fit") or {}
    latest = record.get("latest") or {}
    index, frontier = v.optional_table("cost_index"), v.optional_table("cost_frontier")
    lede = ("What each reasoning state costs per task, relative to GPT-5 high (cost index 1) and in typical US dollars "
            "on a short-answer and an agentic workload, with 90% intervals, from a second Stan model of the reported "
            "costs (stan/cost.stan).")
    failed = ""
    if latest and not latest.get("passes") and latest.get("name") != record.get("name"):
        why = "; ".join(f"{gate}: {reason}" for gate, reason in (latest.get("failing") or {}).items())
        failed = (f"The latest cost fit {latest.get('name')} failed its convergence gates ({why or 'passes is not true'}): "
                  "nothing of it was published.")
    if index.empty:
        text = failed + (" No cost table is published." if failed else
                         "No cost table is published: this publication has no cost_index rows (no cost fit passed its "
                         "gates, or none was run).")
        b.section("cost", "What it costs", lede, note(text.strip()))
        return
    n = int(b.cfg["cost_rows"])
    cheapest, dearest = cost_rows(index, n)
    workloads = [c[len("usd_"):-len("_median")] for c in index.columns if c.startswith("usd_") and c.endswith("_median")]
    headers = ["model", "state", "cost index", "90% interval"] + [f"USD/task {w.replace('_', '-')} (90%)" for w in workloads] \
        + ["runs"]

    def rows(frame: pd.DataFrame) -> list[list[Any]]:
        return [[r["model"], r["reasoning_state"], num(r["cost_index_median"], 3),
                 interval(r["cost_index_lower"], r["cost_index_upper"], 3)]
                + [f"{sig(r[f'usd_{w}_median'])} ({sig(r[f'usd_{w}_lower'])} – {sig(r[f'usd_{w}_upper'])})"
                   for w in workloads] + [int(r["n_runs"])] for _, r in frame.iterrows()]

    summary = record.get("summary") or {}
    gates = (f", which passed every convergence gate{esc(_cost_gates_text(summary))}" if summary.get("passes") is True
             else " (its gate record is not in this publication's methodology)")
    parts = [f"<p>Cost fit <code>{esc(record.get('name') or index['cost_fit'].iloc[0])}</code>{gates}; "
             f"{len(index)} states.</p>"]
    if failed:
        parts.append(note(failed + " The tables below are from the last cost fit that passed."))
    for w in workloads:
        used = index[f"usd_{w}_benchmarks"].iloc[0] if f"usd_{w}_benchmarks" in index.columns else ""
        parts.append(f"<p>{esc(w.replace('_', '-'))} workload: "
                     f"{esc(used) if isinstance(used, str) and used else 'no benchmark with costs (no figure)'}.</p>")
    parts.append("<h3>Cheapest</h3>" + table(headers, rows(cheapest), table_id="cost-cheapest", numeric_from=2))
    parts.append("<h3>Dearest</h3>" + table(headers, rows(dearest), table_id="cost-dearest", numeric_from=2))
    if frontier.empty:
        parts.append(note("No state is in both the capability fit (rank-eligible) and the cost fit: no frontier."))
    else:
        on = frontier[frontier["pareto_optimal"].astype(bool)].sort_values(
            ["capability_median", "model"], ascending=[False, True], kind="mergesort")
        parts.append(f"<h3>Capability-vs-cost frontier</h3><p>{len(on)} of {len(frontier)} states in both fits are "
                     "Pareto-optimal on the medians (no other state at least as capable and at most as costly); "
                     "P(frontier) is the share of paired posterior draws in which the state is on it.</p>")
        parts.append(table(["model", "state", "capability", "cost index", "P(frontier)"],
                           [[r["model"], r["reasoning_state"], num(r["capability_median"]),
                             num(r["cost_index_median"], 3), num(r["p_frontier"], 2)] for _, r in on.iterrows()],
                           table_id="cost-frontier", numeric_from=2))
    b.section("cost", "What it costs", lede, "".join(parts))


METRIC_COLUMNS = [("cells", "n_cells", 0), ("RMSE", "rmse", 3), ("RMSE (points)", "rmse_points", 1),
                  ("MAE", "mae", 3), ("CRPS", "crps", 3), ("Spearman", "spearman", 2),
                  ("50%", "coverage_50", 2), ("90%", "coverage_90", 2), ("95%", "coverage_95", 2)]


STUDY_ORDER = {"forward": 0, "forward_strict": 1, "masked": 2, "family": 3, "sensitivity": 4}
METHOD_ORDER = {"atlas": 0, "eci_form": 1, "eci_form_residual": 2, "model_offset": 3, "family_mean": 4}


def _metrics_table(metrics: pd.DataFrame) -> str:
    metrics = metrics.sort_values(["study", "method"], kind="mergesort", key=lambda c: c.map(
        STUDY_ORDER if c.name == "study" else METHOD_ORDER).fillna(99))
    return table(["study", "method"] + [h for h, _, _ in METRIC_COLUMNS],
                 [[r["study"], r["method"]] + [num(r[c], d) for _, c, d in METRIC_COLUMNS]
                  for _, r in metrics.iterrows()], numeric_from=2)


def _validation_note(b: _Builder, artifact: str) -> str:
    why = (b.version.manifest.get("notes") or {}).get(artifact) or f"{artifact} is empty in this publication"
    return b.empty(f"No validation results to show: {why}.")


def _calibration(b: _Builder) -> None:
    metrics = b.version.table("validation_metrics")
    lede = ("How often held-out results fell inside the predictive intervals of the model and of each baseline; "
            "honest intervals sit on the diagonal.")
    if metrics.empty:
        b.section("calibration", "Are the intervals honest?", lede, _validation_note(b, "validation_metrics"))
        return
    covered = metrics[metrics[[c for c, _ in figures.NOMINAL]].notna().any(axis=1)]
    body = ""
    if len(covered):
        b.figure("calibration", figures.calibration(covered))
        body += image("calibration", "nominal against observed coverage")
    else:
        body += b.empty("No study in validation_metrics reports interval coverage.")
    b.section("calibration", "Are the intervals honest?", lede, body + _metrics_table(metrics))


def _forward(b: _Builder) -> None:
    predictions = b.version.table("validation_predictions")
    lede = ("Errors predicting the newest models' results from a fit without them, by release date: the model "
            "against Epoch's ECI form fitted on the same split.")
    if predictions.empty:
        b.section("forward", "Predicting models not yet seen", lede, _validation_note(b, "validation_predictions"))
        return
    forward = predictions[(predictions["study"] == "forward") & predictions["method"].isin(["atlas", "eci_form"])].copy()
    if "kind" in forward:  # errors in points of a bounded score; a rating family's standardised scale is not one
        forward = forward[forward["kind"] == "bounded"]
    forward["released_on"] = pd.to_datetime(forward["released_on"], errors="coerce")
    forward["error"] = 100 * (forward["pred_mean"] - forward["u"]).abs()
    forward = forward.dropna(subset=["released_on", "error"])
    metrics = b.version.table("validation_metrics")
    body = ""
    if forward.empty:
        body += b.empty("validation_predictions holds no dated forward-study predictions of atlas or eci_form.")
    else:
        b.figure("forward", figures.forward_errors(forward))
        body += image("forward", "forward-in-time absolute errors by release date")
    forward_metrics = metrics[metrics["study"].isin(["forward", "forward_strict"])] if len(metrics) else metrics
    if len(forward_metrics):
        body += _metrics_table(forward_metrics)
    b.section("forward", "Predicting models not yet seen", lede, body)


def _dimensionality(b: _Builder) -> None:
    test = b.version.table("dimensionality_test").iloc[0]
    pairs = b.version.table("dimensionality_pairs").sort_values("r_mean", key=np.abs, ascending=False).head(8)
    verdict = ("within what one capability produces" if float(test["tail_probability"]) >= 0.01
               else "more than one capability produces: there is structure beyond one number")
    body = (f"<p>Mean squared residual correlation over {int(test['n_pairs'])} family pairs: "
            f"{num(test['statistic'], 3)} against {num(test['replicate_mean'], 3)} in replicate data "
            f"(tail probability {num(test['tail_probability'], 3)}): {esc(verdict)}.</p>"
            + table(["family", "family", "shared states", "residual correlation"],
                    [[r.family_a, r.family_b, int(r.n_shared_states), num(r.r_mean, 2)] for r in pairs.itertuples()],
                    numeric_from=2))
    b.section("dimensionality", "Is one number enough?",
              "Whether benchmark results correlate beyond what a single capability explains.", body)


def _description(artifact: str) -> str:
    return ARTIFACTS_BY_NAME[artifact].description if artifact in ARTIFACTS_BY_NAME else ""


def _method(b: _Builder) -> None:
    m, manifest = b.version.methodology, b.version.manifest
    fit = m.get("fit", {})
    diag, settings = fit.get("diagnostics") or {}, fit.get("sampler_settings") or {}
    thresholds = fit.get("thresholds") or {}
    version = m.get("method_version") or {}
    fit_rows = [
        ["method version", f"{version.get('version', DASH)} ({version.get('date', DASH)}: {version.get('title', '')}; "
                           "CHANGES.md)" if version else "not recorded (published before the change log)"],
        ["engine", fit.get("engine")],
        ["sampler", ", ".join(f"{k} {settings[k]}" for k in ("chains", "warmup", "draws", "adapt_delta", "seed")
                              if k in settings)],
        ["max R-hat", f"{num(diag.get('max_rhat'), 4)} (gate ≤ {thresholds.get('rhat_max', DASH)})"],
        ["min bulk / tail ESS", f"{num(diag.get('min_ess_bulk'), 0)} / {num(diag.get('min_ess_tail'), 0)} "
                                f"(gate ≥ {thresholds.get('ess_bulk_min', DASH)})"],
        ["divergences", f"{diag.get('divergences', DASH)} (gate ≤ {thresholds.get('divergences_max', DASH)})"],
        ["min E-BFMI", f"{num(diag.get('min_ebfmi'), 2)} (gate ≥ {thresholds.get('ebfmi_min', DASH)})"],
        ["sampling time", f"{num(diag.get('sample_seconds'), 0)} s"],
    ]
    body = table(["fit", m.get("stamps", {}).get("fit", "")], fit_rows, numeric_from=9)
    sources = m.get("sources")
    if isinstance(sources, list) and sources:
        body += "<h3>Sources</h3>" + table(["source", "url", "sha256", "first retrieved"],
                                            [[s.get("source"), s.get("url"), str(s.get("sha256"))[:16],
                                              s.get("first_retrieved_at")] for s in sources], numeric_from=9)
    else:
        body += b.empty(f"Source snapshots: {sources or 'none recorded'}.")
    stages = m.get("cleaning_stages")
    if isinstance(stages, list) and stages:
        body += "<h3>Cleaning</h3>" + table(["stage", "rows in", "rows out", "kept", "excluded"],
                                             [[s.get("stage"), s.get("rows_in"), s.get("rows_out"), s.get("rows_kept"),
                                               s.get("rows_excluded")] for s in stages])
    artifacts = manifest.get("artifacts", {})
    artifacts = {a: artifacts[a] for a in sorted(artifacts, key=lambda a: list(ARTIFACTS_BY_NAME).index(a)
                                                 if a in ARTIFACTS_BY_NAME else len(ARTIFACTS_BY_NAME))}
    body += "<h3>Published files</h3>" + "<table><thead><tr><th>artifact</th><th class=n>rows</th><th>files</th>" \
        "<th>note</th></tr></thead><tbody>" + "".join(
            f"<tr><td>{esc(a)}</td><td class=n>{int(info['rows'])}</td><td>"
            + " ".join(f'<a href="../{esc(f)}">{esc(Path(f).suffix[1:])}</a>' for f in info["files"])
            + f"</td><td>{esc(info.get('note') or _description(a))}</td></tr>" for a, info in artifacts.items()) + "</tbody></table>"
    body += ('<p><a href="../methodology.json">methodology.json</a> holds the configuration, rules, sampler '
             'settings and library versions; <a href="../manifest.json">manifest.json</a> the sha256 of every '
             "file.</p>")
    libraries = m.get("libraries") or {}
    body += "<details><summary>Library versions</summary>" + table(
        ["library", "version"], sorted(libraries.items()), numeric_from=9) + "</details>"
    b.section("method", "How this was made",
              "The fit behind every number, its convergence against the gates that allow publication, and where "
              "the data came from.", body)


def build_report(version_folder: Path, out_dir: Path, cfg: dict[str, Any]) -> ReportResult:
    """Write index.html, its PNGs and report.json into `out_dir` from the publication in `version_folder`;
    cfg: publish.yaml's `report` section."""
    version = PublishedVersion(version_folder)
    b = _Builder(version, out_dir, cfg)
    for part in (_leaderboard, _headline_gates, _skill_scores, _beyond_the_fit, _reasoning, _difficulty, _reliability,
                 _quality, _comparability, _scale_and_panel, _cost, _calibration, _forward, _dimensionality, _method):
        part(b)
    stamps = version.manifest["stamps"]
    titles = {"leaderboard": "Leaderboard", "gates": "Gate", "skills": "Skills", "beyond": "Beyond the fit",
              "reasoning": "Reasoning", "difficulty": "Difficulty", "reliability": "Reliability", "quality": "Quality",
              "comparability": "Comparability", "scale": "Scale", "cost": "Cost", "calibration": "Calibration", "forward": "Forward in time",
              "dimensionality": "One number?", "method": "Method"}
    nav = "".join(f'<a href="#{s}">{titles[s]}</a>' for s in b.result.sections)
    page = (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>Benchmark Atlas · {esc(version.name)}</title><style>{CSS}</style></head><body><main>"
        "<h1>Benchmark Atlas</h1>"
        "<p class=\"lede\">What public AI benchmark results say about each model's capability, with honest "
        "uncertainty, from a Bayesian item-response model fitted in Stan.</p>"
        f"<p class=\"stamp\">Publication {esc(version.name)} · published {esc(version.manifest.get('created_at'))} · "
        f"fit <code>{esc(stamps['fit'])}</code> · data {esc(stamps['data_sha256'][:16])} · "
        f"specification {esc(stamps['spec_sha256'][:16])}</p>"
        f"<nav>{nav}</nav>{''.join(b.parts)}</main></body></html>\n"
    )
    (Path(out_dir) / REPORT_FILE).write_text(page)
    record = {"publication": version.name, "content_sha256": version.manifest.get("content_sha256"),
              "stamps": stamps, "sections": b.result.sections, "notes": b.result.notes,
              "images": sorted(f"{name}.png" for name in b.result.images), "leaderboard": b.result.leaderboard}
    (Path(out_dir) / REPORT_RECORD).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return b.result
