"""The report's figures, each a pure function of published tables returning a matplotlib Figure.

Figures are built with the object-oriented API on an Agg canvas (`matplotlib.figure.Figure`), never
through pyplot: no global figure state exists to leak between figures or into the Dagster process,
and nothing needs a display. `render` saves a figure to PNG bytes at a given resolution.
"""

from __future__ import annotations

import functools
import io

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

GRADE_COLOURS = {"A": "#1b7837", "B": "#5aae61", "C": "#f1a340", "D": "#d6604d", None: "#9e9e9e"}
METHOD_COLOURS = {"atlas": "#2166ac", "eci_form": "#d6604d", "eci_form_residual": "#f4a582",
                  "family_mean": "#7f7f7f", "model_offset": "#b8860b", "mean_standardized": "#7f7f7f",
                  "pinned_state": "#762a83", "pinned_plus_shared": "#5aae61"}
INK, FAINT = "#222222", "#bbbbbb"
STYLE = {"font.size": 9, "axes.spines.top": False, "axes.spines.right": False, "axes.titlesize": 10,
         "axes.titleweight": "bold", "axes.labelsize": 9, "legend.fontsize": 8, "legend.frameon": False}


def _styled(draw):
    """Run a figure function under the report's style (text and axes read rcParams when created)."""
    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(STYLE):
            return draw(*args, **kwargs)
    return wrapper


def _figure(width: float, height: float, cols: int = 1) -> tuple[Figure, list]:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, cols, squeeze=False)[0]
    for ax in axes:
        ax.tick_params(labelsize=8)
    return fig, list(axes)


def render(fig: Figure, dpi: int) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def shrink(png: bytes, factor: float) -> bytes:
    """A smaller copy of a PNG (Pillow, which matplotlib depends on): drawing the figure again would cost
    as much as the first time."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as picture:
        size = (max(1, round(picture.width * factor)), max(1, round(picture.height * factor)))
        small = picture.convert("RGB").resize(size, Image.LANCZOS).quantize(colors=64)
    buffer = io.BytesIO()
    small.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def expected_score(x: np.ndarray, floor: float, b: float, beta: float) -> np.ndarray:
    """The capability curve c + (1 - c) inv_logit(beta (x - b)) on the display scale."""
    return floor + (1 - floor) / (1 + np.exp(-beta * (x - b)))


# --------------------------------------------------------------------------------------------- leaderboard


@_styled
def leaderboard(rows: pd.DataFrame, other_states: pd.DataFrame, units: str) -> Figure:
    """rows: model, headline_state, display_mean/lower/upper, note (best first); other_states: model,
    reasoning_state, display_mean of the model's other eligible states; units: the x-axis label."""
    n = len(rows)
    fig, (ax,) = _figure(8.0, 1.0 + 0.2 * n)
    y = np.arange(n)[::-1]
    position = dict(zip(rows["model"], y))
    ax.hlines(y, rows["display_lower"], rows["display_upper"], color="#9ecae1", linewidth=3.2, zorder=1)
    ax.plot(rows["display_mean"], y, "o", color="#08519c", markersize=4.5, zorder=3)
    others = other_states[other_states["model"].isin(position)]
    if len(others):
        ax.plot(others["display_mean"], others["model"].map(position), "|", color=INK, markersize=9,
                markeredgewidth=1.2, zorder=2)
    reference = rows["note"].notna() if "note" in rows else pd.Series(False, index=rows.index)
    labels = [f"{m}  ({s}){'  [reference]' if r else ''}"
              for m, s, r in zip(rows["model"], rows["headline_state"], reference)]
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_ylim(-0.8, n - 0.2)
    ax.set_xlabel(units)
    ax.grid(axis="x", color="#eeeeee", zorder=0)
    ax.legend(handles=[
        Line2D([], [], color="#08519c", marker="o", linestyle="", label="best reasoning state (posterior mean)"),
        Line2D([], [], color="#9ecae1", linewidth=3.2, label="90% interval"),
        Line2D([], [], color=INK, marker="|", linestyle="", markersize=9, label="other eligible reasoning states"),
    ], loc="lower right")
    return fig


# --------------------------------------------------------------------------------------------- difficulty


@_styled
def difficulty_curves(families: pd.DataFrame, cells: pd.DataFrame, capability_range: tuple[float, float]) -> Figure:
    """families: one row per family drawn (family, role, floor, b_display_mean/lower/upper, beta_display_mean,
    difficulty_median, difficulty_display, evaluated_low, evaluated_high); cells: family, capability, u."""
    fig, axes = _figure(3.4 * len(families), 3.6, cols=len(families))
    lo, hi = capability_range
    x = np.linspace(lo, hi, 300)
    for ax, (_, fam) in zip(axes, families.iterrows()):
        floor, beta = float(fam["floor"]), float(fam["beta_display_mean"])
        ax.axvspan(fam["evaluated_low"], fam["evaluated_high"], color="#f0f0f0", zorder=0,
                   label="capability range evaluated (5th-95th pct)")
        ax.fill_between(x, expected_score(x, floor, fam["b_display_lower"], beta),
                        expected_score(x, floor, fam["b_display_upper"], beta), color="#c6dbef", zorder=1,
                        label="difficulty 90% interval")
        ax.plot(x, expected_score(x, floor, fam["b_display_mean"], beta), color="#08519c", zorder=2,
                label="expected score")
        mine = cells[cells["family"] == fam["family"]]
        ax.plot(mine["capability"], mine["u"], "o", color=INK, markersize=3, alpha=0.7, zorder=3,
                label="evaluated states")
        ax.axvline(fam["difficulty_median"], color="#d6604d", linestyle="--", linewidth=1, zorder=2,
                   label="difficulty (posterior median)")
        if floor > 0:
            ax.axhline(floor, color=FAINT, linewidth=0.8, linestyle=":", label="guessing floor")
        ax.set_title(f"{fam['family']}: {fam['role']}\ndifficulty {fam['difficulty_display']}", fontsize=9)
        ax.set_xlim(lo, hi)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("capability")
    axes[0].set_ylabel("score (share of the declared range)")
    handles, labels = {}, {}
    for ax in axes:  # one legend for all panels, each entry once
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=3, fontsize=7.5)
    return fig


# --------------------------------------------------------------------------------------------- reliability


@_styled
def reliability(table: pd.DataFrame, thresholds: dict[str, float]) -> Figure:
    """table: family, grade, reliability_mean/lower/upper, reliability_all_mean (drawn in the given order,
    first at the top)."""
    n = len(table)
    fig, (ax,) = _figure(7.0, 1.8 + 0.17 * n)
    y = np.arange(n)[::-1]
    grades = table["grade"].where(table["grade"].notna(), None)
    colours = [GRADE_COLOURS.get(g, GRADE_COLOURS[None]) for g in grades]
    ax.hlines(y, table["reliability_lower"], table["reliability_upper"], colors=colours, linewidth=2.4, alpha=0.6)
    ax.scatter(table["reliability_mean"], y, c=colours, s=18, zorder=3)
    ax.scatter(table["reliability_all_mean"], y, facecolors="none", edgecolors=INK, s=34, linewidths=0.9, zorder=4)
    for grade, value in sorted(thresholds.items(), key=lambda kv: kv[1]):
        ax.axvline(value, color=FAINT, linestyle=":", linewidth=1)
        ax.text(value, n - 0.3, f" {grade} ≥ {value:g}", fontsize=7, color="#777777", va="bottom")
    ax.set_yticks(y, table["family"], fontsize=7)
    ax.set_ylim(-0.8, n + 0.6)
    ax.set_xlim(0, 1)
    ax.set_xlabel("reliability (share of score variance that is capability)")
    handles = [Line2D([], [], color=GRADE_COLOURS[g], marker="o", linestyle="", label=f"grade {g}") for g in "ABCD"]
    handles += [Line2D([], [], color=GRADE_COLOURS[None], marker="o", linestyle="", label="ungraded (few models)"),
                Line2D([], [], color=INK, marker="o", markerfacecolor="none", linestyle="",
                       label="if every model had been scored")]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=7.5)
    return fig


# --------------------------------------------------------------------------------------------- validation


NOMINAL = (("coverage_50", 0.50), ("coverage_90", 0.90), ("coverage_95", 0.95))


@_styled
def calibration(metrics: pd.DataFrame) -> Figure:
    """metrics: validation_metrics rows (study, method, coverage_50/90/95); one panel per study."""
    order = {"forward": 0, "forward_strict": 1, "masked": 2, "family": 3}
    studies = sorted(dict.fromkeys(metrics["study"]), key=lambda s: (order.get(s, 9), s))
    fig, axes = _figure(2.9 * len(studies), 3.1, cols=len(studies))
    nominal = [v for _, v in NOMINAL]
    for ax, study in zip(axes, studies):
        ax.plot([0.4, 1], [0.4, 1], color=FAINT, linestyle="--", linewidth=1, label="perfect calibration")
        for _, row in metrics[metrics["study"] == study].iterrows():
            observed = [row[c] for c, _ in NOMINAL]
            if all(pd.isna(v) for v in observed):
                continue
            ax.plot(nominal, observed, "o-", color=METHOD_COLOURS.get(row["method"], INK), markersize=4,
                    label=row["method"])
        ax.set_title(study)
        ax.set_xlim(0.4, 1.0)
        ax.set_ylim(0.0, 1.02)
        ax.set_xticks(nominal, ["50", "90", "95"])
        ax.set_xlabel("nominal coverage (%)")
        ax.legend(loc="lower right", fontsize=6.5)
    axes[0].set_ylabel("held-out cells inside the interval")
    return fig


@_styled
def forward_errors(predictions: pd.DataFrame) -> Figure:
    """predictions: method, released_on (datetime), error (|prediction - observed|); per method the cells and
    the median per quarter of release."""
    fig, (ax,) = _figure(8.0, 3.4)
    for method, rows in predictions.groupby("method", sort=True):
        colour = METHOD_COLOURS.get(method, INK)
        ax.plot(rows["released_on"], rows["error"], "o", color=colour, alpha=0.25, markersize=3)
        quarterly = rows.set_index("released_on")["error"].resample("QS").median().dropna()
        ax.plot(quarterly.index + pd.Timedelta(days=45), quarterly.to_numpy(), "-", color=colour, linewidth=2,
                label=f"{method} (median per quarter)")
    ax.set_xlabel("model release date")
    ax.set_ylabel("absolute error (points of the score range)")
    # a few wild misses would flatten the rest: the axis stops at the 99th percentile (the medians are drawn)
    ax.set_ylim(0, float(predictions["error"].quantile(0.99)) * 1.05 or 1.0)
    ax.legend(loc="upper left")
    return fig


@_styled
def quality_vs_reliability(table: pd.DataFrame) -> Figure:
    """Measured quality (seed 002) against the model-based reliability (seed 003), one dot per family coloured by
    its grade; families without a measured quality are left out."""
    fig, (ax,) = _figure(6.4, 4.2)
    shown = table.dropna(subset=["quality", "reliability_mean"])
    for grade, group in shown.groupby(shown["grade"].where(shown["grade"].notna(), None), dropna=False):
        key = grade if isinstance(grade, str) else None
        ax.scatter(group["reliability_mean"], group["quality"], s=22, color=GRADE_COLOURS.get(key, FAINT),
                   label=key or "ungraded", zorder=3)
    for row in shown.itertuples():
        ax.annotate(row.family, (row.reliability_mean, row.quality), fontsize=6, color=INK, alpha=0.75,
                    xytext=(3, 2), textcoords="offset points")
    ax.set_xlabel("reliability (model-based, posterior mean)")
    ax.set_ylabel("measured quality (product of four weights)")
    ax.set_ylim(0, 1.05)
    ax.legend(title="grade", loc="lower left")
    return fig
