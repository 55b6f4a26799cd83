"""What one publication holds, gathered from ONE fit and stamped with that fit's identity, or refused.

A publication is the score tables of a fit (read from its folder: the DuckDB copies carry no fit
stamp), the outputs computed from it (DuckDB tables carrying `fit`), the validation results that
validated it (DuckDB tables carrying `fit` = the production fit they refit) and a methodology
record. Every table is stamped with three columns, `fit`, `data_sha256` and `spec_sha256`, taken
from the fit folder's fingerprint.json, so a file taken out of its folder still says what it is.

`collect_publication` refuses (`PublicationRefused`, listing every problem and naming each artifact)
when a table's `fit` disagrees with the fit being published, when a required table is missing,
empty or lacks a column readers rely on, or when the fit folder's fingerprint disagrees with its
name. Whether the fit may be published at all (gates, specification) is asked of
`publishable.require_publishable_fit` by the caller first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import yaml

from atlas_assets import settings
from atlas_assets.spec import NUMERIC_DISTRIBUTIONS, manifest_fingerprint, specification_manifest

SQL = Path(__file__).resolve().parent / "sql"
STAMP_COLUMNS = ("fit", "data_sha256", "spec_sha256")
METHODOLOGY = "methodology"
# Beside the numeric libraries of the specification: orchestration, checks, and CRPS of the validation.
# (matplotlib is left out: it draws the report, which is not part of the publication.)
OTHER_DISTRIBUTIONS = ("dagster", "dagster-duckdb", "great-expectations", "scoringrules")


class PublicationRefused(RuntimeError):
    """The artifacts do not make one consistent publication; `problems` names each artifact and why."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("publication refused, nothing published (the current publication stays): "
                         + "; ".join(problems))


@dataclass(frozen=True)
class Stamps:
    fit: str
    data_sha256: str
    spec_sha256: str

    def as_dict(self) -> dict[str, str]:
        return {"fit": self.fit, "data_sha256": self.data_sha256, "spec_sha256": self.spec_sha256}


@dataclass(frozen=True)
class Artifact:
    """One published table. `source`: "fit_folder" (a score table of the fit, `<name>.parquet`), "table" (a
    DuckDB table that must carry `fit`) or "cost_table" (a DuckDB table of the cost fit: it carries `cost_fit`
    instead, one value, the same in every table that names a cost fit). `columns`: what readers rely on (for an optional
    table, its whole schema: an absent one is published empty with exactly these columns and types)."""

    name: str
    source: str
    description: str
    columns: dict[str, str]
    required: bool = True
    order_by: tuple[str, ...] = ()


def _cols(spec: str) -> dict[str, str]:
    """'a b:float c:bool' -> {a: str, b: float, c: bool}; the type only matters for an empty stand-in."""
    out = {}
    for item in spec.split():
        name, _, kind = item.partition(":")
        out[name] = kind or "str"
    return out


ARTIFACTS: tuple[Artifact, ...] = (
    Artifact("state_scores", "fit_folder", "Capability per reasoning state on the display scale (mean, median, "
             "90% interval), latent values, evidence, eligibility.",
             _cols("model reasoning_state eligible:bool display_mean:float display_lower:float display_upper:float")),
    Artifact("model_scores", "fit_folder", "Capability per model: the headline (best eligible) state with its "
             "interval, P(rank 1), P(top k), expected rank; models without a headline say why.",
             _cols("model headline_state headline_status display_mean:float display_lower:float "
                   "display_upper:float p_rank1:float")),
    Artifact("reasoning_effects", "fit_folder", "Shared effect of each reasoning setting relative to default, "
             "with P(step helps) along the ladder.",
             _cols("setting setting_kind display_mean:float display_lower:float display_upper:float")),
    Artifact("family_parameters", "fit_folder", "Difficulty, discrimination and dispersion per benchmark family.",
             _cols("family kind floor:float b_display_mean:float b_display_lower:float b_display_upper:float "
                   "beta_display_mean:float")),
    Artifact("difficulty_bounds", "table", "Difficulty per family with the bound flag (≳ / ≲), saturation point and "
             "frontier expected score.",
             _cols("family kind floor:float difficulty_median:float difficulty_lower:float difficulty_upper:float "
                   "difficulty_display bound evaluated_low:float evaluated_high:float bound_rule"),
             order_by=("family",)),
    Artifact("reliability_grades", "table", "Reliability per family (among the states scored and over every state) "
             "and its grade.",
             _cols("family grade n_models:int reliability_mean:float reliability_lower:float "
                   "reliability_upper:float reliability_all_mean:float grade_rule"),
             order_by=("family",)),
    Artifact("dimensionality_test", "table", "Residual-correlation test of one capability against posterior "
             "predictive replicates.",
             _cols("n_pairs:int statistic:float replicate_mean:float tail_probability:float rule")),
    Artifact("dimensionality_pairs", "table", "The family pairs of the residual-correlation test.",
             _cols("family_a family_b n_shared_states:int r_mean:float"), order_by=("family_a", "family_b")),
    Artifact("cell_predictions", "table", "Posterior predictive summaries of every eligible state x family cell; "
             "observed cells with their p-value.",
             _cols("model reasoning_state family observed:bool u_observed:float pred_mean:float "
                   "lower_90:float upper_90:float verification_class"),
             order_by=("model", "reasoning_state", "family")),
    Artifact("headline_gates", "table", "Publication gate per fitted state: its families, categories, lineages and "
             "interval width, whether its headline is published (publish.yaml headline_gate) and why not. Applied to "
             "state_scores (headline_gate, headline_gate_reason) and model_scores (headline_status 'not enough "
             "evidence').",
             _cols("model reasoning_state eligible:bool headline_state:bool n_families:int n_categories:int "
                   "n_lineages:int interval_width:float gate_pass:bool status reason gate_rule"),
             order_by=("model", "reasoning_state")),
    Artifact("skill_scores", "table", "Skill score per state x category on the display scale of state_scores: the "
             "state's capability from that category's families, with its interval and its deviation from the "
             "general capability; 'not enough data' (no number) below the configured number of families.",
             _cols("model reasoning_state category status n_families:int families display_mean:float "
                   "display_lower:float display_upper:float general_display_mean:float deviation_mean:float"),
             required=False, order_by=("category", "model", "reasoning_state")),
    Artifact("skill_deviations", "table", "Per category: the learned sd of a state's category skill around its "
             "general capability (latent units) and what chose it.",
             _cols("category deviation_sd:float basis n_states:int"), required=False, order_by=("category",)),
    Artifact("calibrated_states", "table", "States of models outside the fit (below its coverage filter, or new), "
             "calibrated onto the fitted scale from their own results: display posterior, status (thin evidence).",
             _cols("model reasoning_state path status display_mean:float display_lower:float display_upper:float "
                   "n_obs:int"),
             required=False, order_by=("model", "reasoning_state")),
    Artifact("calibrated_skill_scores", "table", "Skill score per calibrated state x category (models outside the "
             "fit): as skill_scores, with calibrate-in's prior and draws in place of the fit's and the fitted states' "
             "deviation sd; path 'calibrated', not ranked; 'not enough data' (no number) below the configured number "
             "of families.",
             _cols("model reasoning_state category path status n_families:int families display_mean:float "
                   "display_lower:float display_upper:float general_display_mean:float deviation_mean:float"),
             required=False, order_by=("category", "model", "reasoning_state")),
    Artifact("calibrated_cell_predictions", "table", "Cells of the calibrated states, predicted from the fit.",
             _cols("model reasoning_state family observed:bool pred_mean:float lower_90:float upper_90:float path"),
             required=False, order_by=("model", "reasoning_state", "family")),
    Artifact("predicted_states", "table", "Reasoning settings of fitted models that nobody measured, predicted from "
             "the reasoning structure (never a headline).",
             _cols("model reasoning_state status display_mean:float display_lower:float display_upper:float"),
             required=False, order_by=("model", "reasoning_state")),
    Artifact("predicted_state_cells", "table", "Cells of the predicted reasoning settings.",
             _cols("model reasoning_state family pred_mean:float lower_90:float upper_90:float"),
             required=False, order_by=("model", "reasoning_state", "family")),
    Artifact("unknown_setting_states", "table", "Runs of fitted models whose reasoning setting is not known, placed "
             "as a mixture over the model's settings weighted by the run's own scores (never a headline).",
             _cols("model reasoning_state status n_obs:int candidates most_probable_setting most_probable_share:float "
                   "setting_probabilities display_mean:float display_lower:float display_upper:float"),
             required=False, order_by=("model",)),
    Artifact("unknown_setting_cells", "table", "Cells of the unknown-setting runs.",
             _cols("model reasoning_state family pred_mean:float lower_90:float upper_90:float"),
             required=False, order_by=("model", "family")),
    Artifact("active_panel", "table", "Per family: newest result date (own date, else the model's release), "
             "whether it is in the active panel and why.",
             _cols("family n_obs:int last_result_on as_of window_days:int active:bool reason"),
             required=False, order_by=("family",)),
    Artifact("active_panel_scores", "table", "Each state's score in the active-panel refit (validation fold "
             "active_panel) beside its all-history score; the headline uses the all-history fit.",
             _cols("model reasoning_state display_mean_all_history:float display_mean_active:float change:float "
                   "in_active_fit:bool"),
             required=False, order_by=("model", "reasoning_state")),
    Artifact("reference_state_scores", "table", "Capability per reasoning state on the frozen reference scale "
             "(outputs.yaml reference_scale): the fit linked onto the reference version's family positions.",
             _cols("model reasoning_state reference_version eligible:bool display_mean:float display_lower:float "
                   "display_upper:float"),
             required=False, order_by=("model", "reasoning_state")),
    Artifact("reference_model_scores", "table", "Capability per model (headline state) on the frozen reference scale.",
             _cols("model headline_state reference_version display_mean:float display_lower:float "
                   "display_upper:float"),
             required=False, order_by=("model",)),
    Artifact("reference_scale_drift", "table", "States whose modeled results are unchanged since the previously "
             "published fit: how far each moved, on the reference scale and on the fits' own anchors.",
             _cols("model reasoning_state scale previous_fit display_mean_old:float display_mean_new:float "
                   "move:float within_interval:bool"),
             required=False, order_by=("scale", "model", "reasoning_state")),
    Artifact("reference_conversions", "table", "Old->new conversions of the reference scale: display on new_version "
             "= alpha + gamma x display on old_version, linked through the two versions' shared families; from the "
             "last good publication's version when the scale changed since (since_last_publication) and from every "
             "other frozen version.",
             _cols("old_version new_version alpha:float gamma:float n_shared_families:int shared_families "
                   "since_last_publication:bool basis formula"),
             required=False, order_by=("old_version", "new_version")),
    Artifact("validation_metrics", "table", "Per study and method: RMSE, MAE, CRPS, Spearman and interval coverage "
             "of held-out cells.",
             _cols("study method n_cells:int n_folds:int rmse:float mae:float rmse_points:float mae_points:float "
                   "crps:float spearman:float coverage_50:float coverage_90:float coverage_95:float"),
             required=False, order_by=("study", "method")),
    Artifact("validation_predictions", "table", "Every held-out cell's prediction per study, fold and method.",
             _cols("study fold:int method model reasoning_state family released_on:date u:float pred_mean:float "
                   "pred_median:float lower_50:float upper_50:float lower_90:float upper_90:float lower_95:float "
                   "upper_95:float crps:float"),
             required=False, order_by=("study", "fold", "method", "model", "reasoning_state", "family")),
    Artifact("validation_family_skill", "table", "Per held-out family: CRPS of the model against the family-mean "
             "baseline.",
             _cols("study family n_cells:int crps_atlas:float crps_family_mean:float skill:float "
                   "reliability_mean:float"),
             required=False, order_by=("study", "family")),
    Artifact("validation_family_ranks", "table", "Rank prediction of held-out families.",
             _cols("fold:int family method n_models:int spearman:float rmse_std:float mae_std:float"),
             required=False, order_by=("fold", "family", "method")),
    Artifact("validation_folds", "table", "Sampler diagnostics of every validation refit.",
             _cols("study fold:int n_train:int n_heldout:int n_scored:int max_rhat:float min_ess_bulk:float "
                   "divergences:int sample_seconds:float leapfrog:float"),
             required=False, order_by=("study", "fold")),
    Artifact("validation_sensitivity", "table", "Largest top-20 rank shift when each well-covered family is dropped.",
             _cols("dropped_family n_observations_dropped:int max_top20_rank_shift:float model"),
             required=False, order_by=("dropped_family", "model")),
    Artifact("family_quality", "table", "Measured quality per family (seed 002) from its live pool: headroom (top-5 "
             "vs the ceiling), discrimination (sd of the top 15), contamination class, item count, their weights and "
             "product, with the inputs; the reliability grade beside it.",
             _cols("family kind n_live_models:int headroom_points:float discrimination_points:float contamination "
                   "items:float quality:float quality_band grade reliability_mean:float rule"),
             required=False, order_by=("family",)),
    Artifact("family_quality_agreement", "table", "How far measured quality and the model-based reliability agree: "
             "Spearman of each measure against reliability, and a grade x quality-band cross-tab.",
             _cols("statistic measure grade band n_families:int value:float p_value:float"),
             required=False, order_by=("statistic", "measure", "grade", "band")),
    Artifact("comparability_verdicts", "table", "Seed 002's comparability verdict, rule and reason for the leaderboard "
             "neighbours: adjacent eligible states (per family they share) and adjacent scores on each family.",
             _cols("scope rank_a:int rank_b:int model_a state_a model_b state_b family_a family_b rule:int rule_name "
                   "verdict reason"),
             required=False, order_by=("scope", "rank_a", "family_a")),
    Artifact("cost_index", "cost_table", "Relative cost per reasoning state (x GPT-5 high, median and 90% interval) "
             "and typical US dollars per task on the configured workloads, from the cost fit named in cost_fit.",
             _cols("model reasoning_state cost_index_median:float cost_index_lower:float cost_index_upper:float "
                   "n_runs:int cost_fit"),
             required=False, order_by=("model", "reasoning_state")),
    Artifact("cost_frontier", "table", "Capability vs cost: Pareto-optimal states on the medians and P(on the "
             "frontier) from paired draws of the capability fit (fit) and the cost fit (cost_fit).",
             _cols("model reasoning_state capability_median:float cost_index_median:float pareto_optimal:bool "
                   "p_frontier:float cost_fit"),
             required=False, order_by=("model", "reasoning_state")),
)
ARTIFACTS_BY_NAME = {a.name: a for a in ARTIFACTS}
VALIDATION_ARTIFACTS = tuple(a.name for a in ARTIFACTS if a.name.startswith("validation_"))

_EMPTY_DTYPES = {"str": "string", "float": "float64", "int": "Int64", "bool": "boolean", "date": "datetime64[s]"}


@dataclass
class Collected:
    """One stamped table ready to write; `note` says why an optional one is empty."""

    frame: pd.DataFrame
    note: str | None = None


@dataclass
class Publication:
    stamps: Stamps
    tables: dict[str, Collected]
    methodology: dict[str, Any]
    notes: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------- stamps


def fit_stamps(fit_dir: Path) -> Stamps:
    """The fit's identity from its folder: fingerprint.json, checked against the folder's name
    (`<data[:16]>-<spec[:16]>-<settings>`, capability_fit's naming)."""
    fit_dir = Path(fit_dir)
    path = fit_dir / "fingerprint.json"
    try:
        fingerprint = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise PublicationRefused([f"fit {fit_dir.name}: fingerprint.json unreadable ({error})"]) from None
    data, spec = fingerprint.get("data_sha256"), fingerprint.get("spec_sha256")
    if not (isinstance(data, str) and isinstance(spec, str) and len(data) == 64 and len(spec) == 64):
        raise PublicationRefused([f"fit {fit_dir.name}: fingerprint.json lacks a 64-hex data_sha256 and spec_sha256 "
                                  f"(has {sorted(fingerprint)})"])
    if not fit_dir.name.startswith(f"{data[:16]}-{spec[:16]}"):
        raise PublicationRefused([f"fit {fit_dir.name}: its fingerprint.json says data {data[:16]} and specification "
                                  f"{spec[:16]}, which is not the fit the folder is named for"])
    return Stamps(fit_dir.name, data, spec)


def stamp(frame: pd.DataFrame, stamps: Stamps) -> pd.DataFrame:
    return frame.assign(**stamps.as_dict())


def fit_stamp_problems(name: str, frame: pd.DataFrame, fit: str) -> list[str]:
    """Why the rows of a `fit`-stamped table are not (all) of `fit`; [] when they are."""
    if "fit" not in frame.columns:
        return [f"{name} carries no fit stamp (column fit), so it cannot be shown to come from fit {fit}"]
    stamped = frame["fit"]
    others = sorted({str(v) for v in stamped.dropna().unique()} - {fit})
    problems = []
    if others:
        problems.append(f"{name} is stamped fit {others} but the fit being published is {fit}")
    if stamped.isna().any():
        problems.append(f"{name} has {int(stamped.isna().sum())} rows without a fit stamp")
    return problems


# ---------------------------------------------------------------------------------------------- tables


def empty_frame(artifact: Artifact) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=_EMPTY_DTYPES[kind]) for c, kind in artifact.columns.items()})


def existing_tables(conn: duckdb.DuckDBPyConnection) -> set[str]:
    return {row[0] for row in conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()}


def _read_fit_table(fit_dir: Path, name: str) -> pd.DataFrame | None:
    from atlas_assets.model.fit_process import read_table

    for path in (fit_dir / f"{name}.parquet", fit_dir / f"{name}.csv"):
        if path.exists():
            return read_table(path)
    return None


def _ordered(frame: pd.DataFrame, keys: tuple[str, ...]) -> pd.DataFrame:
    """A canonical row order, so the same content renders to the same files (and is not published twice)."""
    keys = [k for k in keys if k in frame.columns]
    if not keys or frame.empty:
        return frame.reset_index(drop=True)
    return frame.sort_values(keys, kind="mergesort", na_position="last").reset_index(drop=True)


def collect_tables(conn: duckdb.DuckDBPyConnection, fit_dir: Path, stamps: Stamps,
                   required_validation: list[str] | tuple[str, ...] = ()) -> dict[str, Collected]:
    """Every artifact of ARTIFACTS, stamped; raises PublicationRefused listing every problem found."""
    present = existing_tables(conn)
    problems: list[str] = []
    collected: dict[str, Collected] = {}
    for artifact in ARTIFACTS:
        required = artifact.required or artifact.name in required_validation
        if artifact.source == "fit_folder":
            frame = _read_fit_table(fit_dir, artifact.name)
            where = f"fit folder {fit_dir.name}"
        elif artifact.name in present:
            frame = conn.execute(f'SELECT * FROM "{artifact.name}"').df()
            where = "DuckDB"
        else:
            frame, where = None, "DuckDB"
        if frame is None:
            if required:
                problems.append(f"{artifact.name} is missing (not in {where})")
            else:
                collected[artifact.name] = Collected(stamp(empty_frame(artifact), stamps),
                                                     f"{artifact.name} does not exist yet")
            continue
        if frame.empty:
            if required:
                problems.append(f"{artifact.name} is empty")
                continue
            note = f"{artifact.name} is empty (the study produced no rows)"
        else:
            note = None
        if artifact.source == "table" and not frame.empty:
            found = fit_stamp_problems(artifact.name, frame, stamps.fit)
            if found:
                problems.extend(found)
                continue
        if artifact.source == "cost_table" and not frame.empty and "cost_fit" in frame.columns:
            if frame["cost_fit"].isna().any() or frame["cost_fit"].nunique() != 1:
                problems.append(f"{artifact.name} is not from one cost fit (cost_fit: "
                                f"{sorted(map(str, frame['cost_fit'].dropna().unique()))})")
                continue
        lacking = [c for c in artifact.columns if c not in frame.columns]
        if lacking:
            problems.append(f"{artifact.name} lacks columns {lacking}")
            continue
        collected[artifact.name] = Collected(stamp(_ordered(frame, artifact.order_by), stamps), note)
    problems += apply_headline_gates(collected)
    cost_fits = {name: sorted(map(str, item.frame["cost_fit"].dropna().unique()))
                 for name, item in collected.items() if "cost_fit" in item.frame.columns and len(item.frame)}
    if len({fit for fits in cost_fits.values() for fit in fits}) > 1:
        problems.append(f"the cost tables come from different cost fits: {cost_fits}")
    if problems:
        raise PublicationRefused(problems)
    return collected


GATED_COLUMNS = {"state_scores": ("headline_gate", "headline_gate_reason"), "model_scores": ("headline_gate_reason",)}


def apply_headline_gates(collected: dict[str, Collected]) -> list[str]:
    """The gate on the published score tables, in place: state_scores and model_scores say "not enough evidence"
    with the reason where headline_gates fails the state (publish/gates.py); problems when it cannot be applied."""
    from atlas_assets.publish.gates import apply_to_scores

    needed = ("headline_gates", "state_scores", "model_scores")
    if not all(name in collected for name in needed):
        return []  # a missing one is already a problem of its own
    try:
        states, models = apply_to_scores(collected["state_scores"].frame, collected["model_scores"].frame,
                                         collected["headline_gates"].frame)
    except ValueError as error:
        return [f"headline_gates cannot be applied to the score tables: {error}"]
    collected["state_scores"].frame, collected["model_scores"].frame = states, models
    return []


# -------------------------------------------------------------------------------------------- methodology


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def _query(conn: duckdb.DuckDBPyConnection, sql_file: str, needs: str, present: set[str]) -> list[dict] | str:
    if needs not in present:
        return f"not available: table {needs} does not exist"
    frame = conn.execute((SQL / sql_file).read_text()).df()
    return json.loads(frame.to_json(orient="records", date_format="iso"))


def _config_files(required_validation: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """The stage configurations in force (parsed); the registry YAMLs are large and sit, by hash, in the
    specification manifest instead. Of publish.yaml only what decides the publication: its report
    settings change the page, not what is published, and must not make a new version."""
    out = {}
    for stem in ("cleaning", "outputs", "validation"):
        path = settings.validation_config_path() if stem == "validation" else settings.CONFIG_DIR / f"{stem}.yaml"
        if path.exists():
            out[stem] = yaml.safe_load(path.read_text())
    out["publication"] = {"required_validation": list(required_validation)}
    return out


def library_versions() -> dict[str, str]:
    versions = {}
    for name in (*NUMERIC_DISTRIBUTIONS, *OTHER_DISTRIBUTIONS):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _first(frame: pd.DataFrame | None, column: str) -> Any:
    if frame is None or frame.empty or column not in frame.columns:
        return None
    return frame[column].iloc[0]


def methodology_record(conn: duckdb.DuckDBPyConnection, fit_dir: Path, stamps: Stamps,
                       tables: dict[str, Collected],
                       required_validation: list[str] | tuple[str, ...] = (),
                       latest_cost_fit: Path | None = None) -> dict[str, Any]:
    """How the published numbers were made: configuration, rules, fit diagnostics and settings, cleaning
    counts, sources, libraries. Deterministic for a given fit and data (no run ids or wall-clock times
    of this run), so republishing unchanged inputs reproduces it byte for byte."""
    present = existing_tables(conn)
    diagnostics = _read_json(fit_dir / "diagnostics.json") or {}
    summary = _read_json(fit_dir / "fit_summary.json") or {}
    summary.pop("out_dir", None)  # the staging path the fit was written to, not where it lives
    manifest = _read_json(fit_dir / "specification.json")
    publication_manifest = specification_manifest(scope="publication")
    downstream = {part: files for part, files in publication_manifest.items()
                  if manifest is None or files != manifest.get(part)}
    publication_fingerprint = manifest_fingerprint(publication_manifest)
    frame = lambda name: tables[name].frame if name in tables else None  # noqa: E731
    return {
        "stamps": stamps.as_dict(),
        "fit": {
            "engine": diagnostics.get("engine"),
            "sampler_settings": diagnostics.get("settings"),
            "precondition": diagnostics.get("precondition"),
            "thresholds": diagnostics.get("thresholds"),
            "gates": diagnostics.get("checks"),
            "passes": diagnostics.get("passes"),
            "diagnostics": {k: diagnostics.get(k) for k in (
                "n_chains", "n_draws", "max_rhat", "min_ess_bulk", "min_ess_tail", "divergences", "min_ebfmi",
                "mean_tree_depth", "max_tree_depth", "treedepth_hits", "mean_leapfrog_per_draw", "n_gradient_evals",
                "sample_seconds", "compile_seconds", "worst_rhat", "worst_ess_bulk", "worst_ess_tail")},
            "display_reference": diagnostics.get("display_reference"),
            "stan_sha256": diagnostics.get("stan_sha256") or summary.get("stan_sha256"),
            "summary": summary,
        },
        "configuration": {"model": _read_json(fit_dir / "model_config.json"), **_config_files(required_validation)},
        "rules": {
            "difficulty_bound": _first(frame("difficulty_bounds"), "bound_rule"),
            "reliability_grade": _first(frame("reliability_grades"), "grade_rule"),
            "dimensionality": _first(frame("dimensionality_test"), "rule"),
            "family_quality": _first(frame("family_quality"), "rule"),
            # the frozen scale the reference_* tables are on (its file is in the configuration fingerprint)
            "reference_scale": _first(frame("reference_state_scores"), "reference_version"),
            "headline_gate": _first(frame("headline_gates"), "gate_rule"),
            "skill_scores": _first(frame("skill_scores"), "rule"),
            "calibrated_skill_scores": _first(frame("calibrated_skill_scores"), "rule"),
        },
        "method_version": method_version_record(),
        "specification": {
            "sha256": stamps.spec_sha256,
            "parts": {part: manifest_fingerprint({part: files}) for part, files in manifest.items()} if manifest else None,
            "manifest": manifest,
            # the stages downstream of the fit (outputs, validation, publish) as they are now: with the fit's
            # own specification, the whole of what made these numbers (spec.py, scope "publication")
            "publication_sha256": publication_fingerprint,
            "downstream_parts": {part: manifest_fingerprint({part: files}) for part, files in downstream.items()},
        },
        "cost_fit": _cost_fit_record(tables, latest_cost_fit),
        "cleaning_stages": _query(conn, "stage_counts.sql", "audit_stage_history", present),
        "sources": _query(conn, "source_snapshots.sql", "source_snapshots", present),
        "libraries": library_versions(),
        "artifacts": {
            name: {"description": ARTIFACTS_BY_NAME[name].description, "rows": len(item.frame),
                   "source": ARTIFACTS_BY_NAME[name].source, "note": item.note}
            for name, item in tables.items()
        },
    }


def method_version_record() -> dict[str, Any]:
    """The method version in force: the newest entry of the change log (CHANGES.md at the project root)."""
    from atlas_assets.publish.changes import newest_entry

    entry = newest_entry()
    return {"version": entry.version, "date": entry.date, "title": entry.title, "change_log": "CHANGES.md"}


def _cost_fit_record(tables: dict[str, Collected], latest_cost_fit: Path | None = None) -> dict[str, Any] | None:
    """The cost fit the cost tables come from (its name and fit_summary.json), and the latest cost fit attempted
    (`latest`: name, passes, why each failing gate failed), so the report can say plainly when the newest cost
    fit failed its gates and nothing of it was published. None when there is neither."""
    frame = tables["cost_index"].frame if "cost_index" in tables else None
    record: dict[str, Any] = {}
    if frame is not None and not frame.empty and "cost_fit" in frame.columns:
        name = str(frame["cost_fit"].iloc[0])
        summary = _read_json(settings.atlas_home() / "model" / "cost_fits" / name / "fit_summary.json") or {}
        summary.pop("out_dir", None)
        record.update(name=name, summary=summary)
    if latest_cost_fit is not None:
        from atlas_assets.model.diagnostics import failure_reasons

        latest = Path(latest_cost_fit)
        diagnostics = _read_json(latest / "diagnostics.json")
        if diagnostics is None:
            record["latest"] = {"name": latest.name, "passes": False, "failing": {"diagnostics": "no diagnostics.json"}}
        else:
            record["latest"] = {"name": latest.name, "passes": diagnostics.get("passes") is True,
                                "failing": failure_reasons(diagnostics) if diagnostics.get("thresholds") else {}}
    return record or None


def collect_publication(conn: duckdb.DuckDBPyConnection, fit_dir: Path,
                        required_validation: list[str] | tuple[str, ...] = (),
                        latest_cost_fit: Path | None = None) -> Publication:
    """The whole publication of the fit in `fit_dir` (the caller has checked it is publishable); `latest_cost_fit`:
    the folder of the newest cost fit attempted (passed or `.failed`), recorded in the methodology."""
    fit_dir = Path(fit_dir)
    stamps = fit_stamps(fit_dir)
    tables = collect_tables(conn, fit_dir, stamps, required_validation)
    record = methodology_record(conn, fit_dir, stamps, tables, required_validation, latest_cost_fit)
    notes = {name: item.note for name, item in tables.items() if item.note}
    return Publication(stamps, tables, record, notes)
