"""Schemas of the hand-edited YAML configs, and a loader whose errors name file, key and line.

    from atlas_assets.config_schema import CleaningFile, ModelFile, load_validated
    data = load_validated(path, ModelFile)               # the YAML as a plain dict, validated
    data = load_validated(path, ModelFile, overrides)    # nested overrides merged, then validated

Every model is strict (pydantic 2, `strict=True`: no coercion, so the string "false" is not a
bool and "5" is not an int; an int is accepted where a float is expected) and closed
(`extra="forbid"`: an unknown key, i.e. a typo, is an error). Line numbers come from the YAML
node marks of `yaml.compose`; a duplicated key (which `yaml.safe_load` silently resolves to
the last one) is an error too. Errors are `ConfigError` (a ValueError), one line per problem:

    atlas_assets/config/model.yaml, line 14: sampler.chians: unknown key (extra inputs are not permitted)

To add a key: add a field to the section's model below (e.g. `DisplayConfig` for
model.yaml's `display:` block, `ReferenceState` for `display.reference.low/high`); nothing
else reads the schema.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

Number = float  # strict float accepts ints (1 for 1.0) but neither strings nor bools


class ConfigError(ValueError):
    """A config file does not match its schema; the message names file, key and line."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# --------------------------------------------------------------------------- cleaning.yaml
# Groups are for readers; the SQL sees the keys flat (DuckDB variables), so a key appears
# in exactly one group (atlas_assets.clean.config.CleaningConfig holds the flat values).


class ProtocolScreen(Strict):
    floor_guard_fraction: Number = Field(ge=0, le=1)
    floor_guard_min_items: Number = Field(ge=0)
    bounds_guard_max_share: Number = Field(gt=0, le=1)
    range_slack_fraction: Number = Field(ge=0)


VERIFICATION_CLASSES = ("independent", "community", "vendor_reported", "unverified")


class Resolution(Strict):
    consensus_span_fraction: Number = Field(ge=0, le=1)
    stderr_multiplier: Number = Field(ge=0)
    verification_order: list[Literal["independent", "community", "vendor_reported", "unverified"]]
    source_trust_order: list[str] = Field(min_length=1)

    @field_validator("verification_order")
    @classmethod
    def _every_class_once(cls, value: list[str]) -> list[str]:
        if sorted(value) != sorted(VERIFICATION_CLASSES):
            raise ValueError(f"must list each of {list(VERIFICATION_CLASSES)} exactly once, best first")
        return value

    @field_validator("source_trust_order")
    @classmethod
    def _sources_once(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("lists a source twice")
        return value


class Pooling(Strict):
    conflict_blocks_state: bool
    harness_pooling: Literal["median_all", "most_models_setup"]


class Families(Strict):
    primary_min_models: int = Field(ge=1)
    primary_min_share: Number = Field(ge=0, le=1)


class Coverage(Strict):
    min_models_per_family: int = Field(ge=1)
    min_families_per_model: int = Field(ge=1)
    zero_variance_epsilon: Number = Field(ge=0)
    max_iterations: int = Field(ge=1)


class Drift(Strict):
    conflict_share_jump: Number = Field(ge=0, le=1)
    kept_share_drop: Number = Field(ge=0, le=1)


class CleaningFile(Strict):
    protocol_screen: ProtocolScreen
    resolution: Resolution
    pooling: Pooling
    families: Families
    coverage: Coverage
    drift: Drift


CLEANING_GROUPS: dict[str, type[Strict]] = {
    name: field.annotation for name, field in CleaningFile.model_fields.items()  # type: ignore[misc]
}


# --------------------------------------------------------------------------- model.yaml


class WarmFixedStep(Strict):
    burn_in: int = Field(default=25, ge=0)
    accept_within: Number = Field(default=0.1, gt=0, lt=1)
    max_factor: Number = Field(default=1.25, ge=1)


class ColdFixedStep(Strict):
    tuning_draws: int = Field(default=50, ge=1)
    max_factor: Number = Field(default=1.25, ge=1)


class MainAdapt(Strict):
    # unit_e: the whitened coordinates keep the identity metric, warmup adapts the step size only (CmdStan;
    # PyStan has diag_e only); diag_e: Stan's windows, shaped by the three numbers
    metric: Literal["diag_e", "unit_e"] = "diag_e"
    init_buffer: int | None = Field(default=None, ge=0)
    window: int | None = Field(default=None, ge=1)
    term_buffer: int | None = Field(default=None, ge=0)
    step_size_from_earlier_fit: bool = False
    # a warm start keeps the earlier fit's step size (no adaptation, `burn_in` iterations before the draws) when
    # the earlier fit's draws accepted within `accept_within` of the target (CmdStan, unit_e); absent: adapted
    warm_fixed_step: WarmFixedStep | None = None
    # a cold main fit: its warmup and `tuning_draws` draws in one run, then the draws in another at that run's step
    # size moved to the acceptance target (CmdStan, unit_e); absent: one run, adapted
    cold_fixed_step: ColdFixedStep | None = None


class Stiffness(Strict):
    draws: int = Field(ge=0)
    max_rank: int = Field(default=50, ge=1)
    max_shrink: Number = Field(default=2.0, ge=1)
    clip_quantile: Number = Field(default=0.95, gt=0, le=1)
    # draws whose gradients' mean carries more than this share of their second moment are not typical
    max_mean_share: Number = Field(default=0.05, gt=0, le=1)
    # ... and a pilot chain whose own gradients' mean carries more than this is left out of the map (None: kept)
    chain_max_mean_share: Number | None = Field(default=None, gt=0, le=1)


class PreconditionerMap(Strict):
    """The form of the affine map (precondition.build_preconditioner): dense, or diagonal plus low rank."""

    form: Literal["dense", "low_rank"] = "dense"
    max_rank: int = Field(default=50, ge=0)           # low_rank: at most this many correlated directions
    min_eigenvalue: Number = Field(default=2.0, ge=1)  # low_rank: ... whose correlation eigenvalue exceeds this


class PilotPreconditioner(Strict):
    """A short pilot fit whose posterior preconditions the main fit (atlas_assets/model/precondition.py)."""

    mode: Literal["none", "pilot"]
    pilot_chains: int = Field(ge=1)
    pilot_warmup: int = Field(ge=0)
    # ... for a program of up to this many sampled coordinates; a larger one warms up proportionally longer
    pilot_warmup_coordinates: int | None = Field(default=None, ge=1)
    pilot_draws: int = Field(ge=2)
    pilot_adapt_delta: Number | None = Field(default=None, gt=0, lt=1)   # default: the sampler's
    pilot_max_treedepth: int | None = Field(default=None, ge=1)         # default: the sampler's
    # at most this many pilot rounds: another one (through the last one's map) while the pilot's draws are not
    # typical of the posterior (their gradients have a mean; CmdStan only, where the gradients are computed)
    pilot_rounds: int = Field(default=1, ge=1)
    round_step_size: Number = Field(default=0.2, gt=0)   # first step size of a pilot round through a map
    main_warmup: int = Field(ge=0)
    # with coordinates the earlier posterior cannot inform, the main fit adapts a diagonal metric over this warmup
    main_warmup_unmatched: int = Field(default=300, ge=0)
    # a warm start with more coordinates new since the earlier fit than this takes the pilot route instead
    warm_max_new: int | None = Field(default=0, ge=0)
    # ... unless they are at most this many: then they are placed by their conditional posterior first
    # (model/placement.py, CmdStan) and the warm start goes ahead; 0: off
    warm_place_max: int = Field(default=0, ge=0)
    # a main fit that fails its gates is followed by another, warm from its own draws, at most this many times
    # (the last one is gated); 0: off
    refit_on_failure: int = Field(default=0, ge=0)
    shrinkage: Number = Field(ge=0, le=1)
    # at most this many earlier draws estimate the map's covariance (evenly spaced over the chains)
    max_draws: int = Field(default=1000, ge=2)
    # previous_fit: a refit after a data change starts from the last good fit instead of a pilot
    warm_start: Literal["none", "previous_fit"] = "none"
    # the main fit's warmup, already whitened: Stan's adaptation windows, and (warm starts) the earlier fit's
    # step size as the first one
    main_adapt: MainAdapt | None = None
    # gradients at this many earlier draws shrink the map along directions stiffer than the draws' covariance
    # (precondition.stiffness_correction); absent or 0: off
    stiffness: Stiffness | None = None
    map: PreconditionerMap | None = None



class Sampler(Strict):
    chains: int = Field(ge=1)
    warmup: int = Field(ge=0)
    draws: int = Field(ge=1)
    seed: int
    adapt_delta: Number = Field(gt=0, lt=1)
    max_treedepth: int = Field(ge=1)
    engine: Literal["auto", "cmdstanpy", "pystan"]
    init_radius: Number = Field(ge=0)
    emit_observation_draws: bool
    # per-observation draws (mu_obs, log_lik, u_rep) saved with the fit, for the outputs' posterior predictive
    # checks; a validation fold's fit does without them (validation/folds.refit_config)
    observation_draws: bool = True
    precondition: PilotPreconditioner | None = None


class Reasoning(Strict):
    ladder: list[str]
    off_ladder: list[str]
    default: str
    pin_preference: list[str]


class Preconditioning(Strict):
    capability: Number = Field(gt=0)
    b: Number = Field(gt=0)
    # `lambda` is a Python keyword: the field is lambda_ and reads/writes the key "lambda"
    lambda_: Number = Field(gt=0, alias="lambda")
    logkappa: Number = Field(gt=0)
    shared_effect: Number = Field(gt=0)


Centering = Literal["centered", "noncentered"]


class Parametrization(Strict):
    b: Literal["centered", "noncentered", "shifted"]
    b_centre: Literal["mean", "information"]
    lambda_: Centering = Field(alias="lambda")
    logkappa: Centering
    radial_sd: Number = Field(ge=0)
    preconditioning: Preconditioning
    # the positive scales' coordinate under the affine preconditioner: log | softplus (docs/model.md)
    scale_link: Literal["log", "softplus"] = "log"
    # under the affine preconditioner, the per-model ladder terms and off-ladder deviations are sampled conditionally
    # centred on the earlier posterior (stan/atlas.stan amp_hat; docs/model.md); false = plainly non-centred
    conditional_centring: bool = False


class Likelihood(Strict):
    one_censor_eps: Number = Field(ge=0, lt=1)
    # the bounded families' dispersion saturates smoothly at this (stan/atlas.stan kappa); None: no cap
    kappa_max: Number | None = Field(default=None, gt=1)


class LocScale(Strict):
    loc: Number
    scale: Number = Field(gt=0)


class Scale(Strict):
    scale: Number = Field(gt=0)


class Priors(Strict):
    b_mu: LocScale
    b_sd: Scale
    lambda_mu: LocScale
    lambda_sd: Scale
    logkappa_mu: LocScale
    logkappa_sd: Scale
    rating_sd: Scale
    hurdle_a: LocScale
    hurdle_b: Scale
    shared_effect_sd: Scale
    amplitude_sd: Scale
    curvature_sd: Scale
    off_ladder_sd: Scale


class ReferenceState(Strict):
    """display.reference.low / .high: a named (model, reasoning state) and its display value."""

    model: str | None = None
    reasoning_state: str | None = None
    value: Number
    fallback_quantile: Number | None = Field(default=None, ge=0, le=1)


class References(Strict):
    low: ReferenceState
    high: ReferenceState


class DisplayConfig(Strict):
    """model.yaml `display:`. Add display keys here."""

    reference: References
    interval: Number = Field(gt=0, lt=1)
    top_k: int = Field(ge=1)


class Eligibility(Strict):
    min_families: int = Field(ge=1)
    min_observations: int = Field(ge=1)
    exclude_settings: list[str]


class Diagnostics(Strict):
    rhat_max: Number = Field(gt=1)
    ess_bulk_min: int = Field(ge=0)
    ess_tail_min: int = Field(ge=0)
    divergences_max: int = Field(ge=0)
    ebfmi_min: Number = Field(ge=0)


class ModelFile(Strict):
    version: int
    stan_file: str
    sampler: Sampler
    reasoning: Reasoning
    parametrization: Parametrization
    likelihood: Likelihood
    priors: Priors
    display: DisplayConfig
    eligibility: Eligibility
    diagnostics: Diagnostics


# --------------------------------------------------------------------------- outputs.yaml


class OutputDraws(Strict):
    max_draws: int = Field(ge=1)
    seed: int
    interval: Number = Field(gt=0, lt=1)


class DifficultyConfig(Strict):
    evaluated_range_percentiles: list[Number] = Field(min_length=2, max_length=2)
    saturation_share: Number = Field(gt=0.5, lt=1)

    @field_validator("evaluated_range_percentiles")
    @classmethod
    def _ordered(cls, value: list[float]) -> list[float]:
        if not 0 <= value[0] < value[1] <= 100:
            raise ValueError("needs [low, high] with 0 <= low < high <= 100")
        return value


class Grades(Strict):
    A: Number = Field(gt=0, lt=1)
    B: Number = Field(gt=0, lt=1)
    C: Number = Field(gt=0, lt=1)

    @model_validator(mode="after")
    def _descending(self) -> "Grades":
        if not self.A > self.B > self.C:
            raise ValueError("grade thresholds must fall from A to C")
        return self


class ReliabilityConfig(Strict):
    grades: Grades
    probability: Number = Field(gt=0, lt=1)
    min_models: int = Field(ge=2)
    logit_clip: Number = Field(gt=0, lt=0.5)


class DimensionalityConfig(Strict):
    min_shared_states: int = Field(ge=3)
    replicates: int = Field(ge=200)
    min_replicates: int = Field(ge=200)
    top_pairs: int = Field(ge=1)


class CellPredictionsConfig(Strict):
    intervals: list[Number] = Field(min_length=1)
    ppp_tail: Number = Field(gt=0, lt=0.5)
    max_extreme_share: Number = Field(ge=0, le=1)

    @field_validator("intervals")
    @classmethod
    def _inside(cls, value: list[float]) -> list[float]:
        if any(not 0 < x < 1 for x in value) or len(set(value)) != len(value):
            raise ValueError("intervals must be distinct values in (0, 1)")
        return value


class CalibrateConfig(Strict):
    # "release_trend": a calibrated model's theta prior is the fitted models' theta regressed on release date, per
    # draw (its prediction and predictive sd at the model's date); "program": the program's N(0, 1).
    theta_prior: Literal["release_trend", "program"]
    min_dated_models: int = Field(ge=3)
    bandwidth_years: Number | None = Field(gt=0)  # None: one line over all dated models


class ResultDatesConfig(Strict):
    # the one window of "recent" results (outputs/sql/result_dates.sql), read by active_panel and family_quality
    window_days: int = Field(ge=1)


class ContaminationWeights(Strict):
    live: Number = Field(gt=0, le=1)
    private: Number = Field(gt=0, le=1)
    static: Number = Field(gt=0, le=1)


class QualityBands(Strict):
    high: Number = Field(gt=0, le=1)
    medium: Number = Field(gt=0, le=1)

    @model_validator(mode="after")
    def _descending(self) -> "QualityBands":
        if not self.high > self.medium:
            raise ValueError("quality band high must lie above medium")
        return self


class FamilyQualityConfig(Strict):
    min_live_models: int = Field(ge=2)
    top_headroom: int = Field(ge=1)
    top_discrimination: int = Field(ge=2)
    headroom_full_points: Number = Field(gt=0)
    headroom_floor: Number = Field(gt=0, le=1)
    discrimination_full_points: Number = Field(gt=0)
    discrimination_floor: Number = Field(gt=0, le=1)
    contamination_weights: ContaminationWeights
    size_weights: list[list[Number]] = Field(min_length=1)
    quality_bands: QualityBands

    @field_validator("size_weights")
    @classmethod
    def _rising(cls, value: list[list[float]]) -> list[list[float]]:
        if any(len(pair) != 2 for pair in value):
            raise ValueError("size_weights: pairs [item limit, weight]")
        limits = [limit for limit, _ in value]
        if limits != sorted(set(limits)) or any(not 0 < w <= 1 for _, w in value):
            raise ValueError("size_weights: item limits strictly rising, weights in (0, 1]")
        return value


class ComparabilityConfig(Strict):
    elo_max_days_apart: int = Field(ge=0)
    self_reported: list[str] = Field(min_length=1)
    external: list[str] = Field(min_length=1)
    harness_columns: dict[str, Literal["agent", "version", "setting"]]

    @model_validator(mode="after")
    def _disjoint(self) -> "ComparabilityConfig":
        if set(self.self_reported) & set(self.external):
            raise ValueError("a verification class cannot be both self_reported and external")
        return self


class ReferenceScaleConfig(Strict):
    version: str | None
    min_shared_families: int = Field(ge=3)


class SkillDeviationConfig(Strict):
    grid: list[Number] = Field(min_length=1)
    draws: int = Field(ge=20)
    min_states: int = Field(ge=1)

    @field_validator("grid")
    @classmethod
    def _positive(cls, value: list[float]) -> list[float]:
        if any(v <= 0 for v in value):
            raise ValueError("every deviation sd must be > 0 (0 is the general capability: no category skill)")
        return value


class SkillScoresConfig(Strict):
    min_families: int = Field(ge=1)
    max_draws: int = Field(ge=20)
    deviation_sd: SkillDeviationConfig
    also_in: dict[str, list[str]]


class OutputsFile(Strict):
    version: int
    reference_scale: ReferenceScaleConfig
    result_dates: ResultDatesConfig
    draws: OutputDraws
    calibrate: CalibrateConfig
    skill_scores: SkillScoresConfig
    difficulty: DifficultyConfig
    reliability: ReliabilityConfig
    dimensionality: DimensionalityConfig
    cell_predictions: CellPredictionsConfig
    family_quality: FamilyQualityConfig
    comparability: ComparabilityConfig


# --------------------------------------------------------------------------- validation.yaml


class RefitSampler(Strict):
    chains: int = Field(ge=2)
    warmup: int = Field(ge=50)
    draws: int = Field(ge=50)
    adapt_delta: Number = Field(gt=0.5, lt=1)
    rhat_warn: Number = Field(gt=1)
    # the main fit's metric in a fold (model.yaml `main_adapt.metric` otherwise): a fold's data differ from the
    # production fit's by far more than a nightly refresh's, which the identity metric cannot absorb
    metric: Literal["diag_e", "unit_e"] | None = None


class ForwardStudy(Strict):
    newest_share: Number = Field(gt=0, lt=1)
    hide_share: Number = Field(gt=0, lt=1)
    thin_evidence_cells: int = Field(default=2, ge=1)
    thin_share: Number = Field(default=0.5, gt=0, le=1)


class MaskedStudy(Strict):
    folds: int = Field(ge=2)


class FamilyStudy(Strict):
    folds: int = Field(ge=2)
    groups: dict[str, list[str]] = Field(default_factory=dict)
    min_states: int = Field(ge=3)

    @model_validator(mode="after")
    def _disjoint(self) -> "FamilyStudy":
        seen: dict[str, str] = {}
        for group, families in self.groups.items():
            for family in families:
                if family in seen:
                    raise ValueError(f"family {family!r} is in groups {seen[family]!r} and {group!r}")
                seen[family] = group
        return self


class SensitivityStudy(Strict):
    families: int = Field(ge=1)
    top: int = Field(ge=2)


class ActivePanelStudies(Strict):
    # the folds `active_panel` (the production specification refitted on the active families) and
    # `forward_active` (the forward study on them); the active families come from the outputs' `active_panel`
    studies: bool


class EciFormBaseline(Strict):
    bootstrap: int = Field(ge=10)
    l2: Number = Field(ge=0)


class Baselines(Strict):
    eci_form: EciFormBaseline


class ValidationChecks(Strict):
    coverage_tolerance: Number = Field(gt=0, lt=0.5)


class ValidationFile(Strict):
    version: int
    seed: int
    refit: RefitSampler
    intervals: list[Number] = Field(min_length=1)
    forward: ForwardStudy
    masked: MaskedStudy
    family: FamilyStudy
    sensitivity: SensitivityStudy
    active_panel: ActivePanelStudies
    baselines: Baselines
    checks: ValidationChecks

    @field_validator("intervals")
    @classmethod
    def _inside(cls, value: list[float]) -> list[float]:
        if any(not 0 < x < 1 for x in value) or len(set(value)) != len(value):
            raise ValueError("intervals must be distinct values in (0, 1)")
        return sorted(value)


# --------------------------------------------------------------------------- loader


def _key_lines(node: yaml.Node, path: tuple = (), lines: dict | None = None, duplicates: list | None = None):
    """(key path -> 1-based line) for every mapping key and sequence item of a composed YAML tree;
    duplicated mapping keys are collected as (path, first line, second line)."""
    lines = {} if lines is None else lines
    duplicates = [] if duplicates is None else duplicates
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            here = (*path, key)
            line = key_node.start_mark.line + 1
            if here in lines:
                duplicates.append((here, lines[here], line))
            else:
                lines[here] = line
            _key_lines(value_node, here, lines, duplicates)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[(*path, i)] = item.start_mark.line + 1
            _key_lines(item, (*path, i), lines, duplicates)
    return lines, duplicates


def _dotted(path: tuple) -> str:
    return ".".join(str(part) for part in path) or "(top level)"


def deep_update(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict:
    out = copy.deepcopy(dict(base))
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_update(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _override_paths(overrides: Mapping[str, Any], path: tuple = ()) -> set[tuple]:
    paths: set[tuple] = set()
    for key, value in overrides.items():
        paths.add((*path, key))
        if isinstance(value, Mapping):
            paths |= _override_paths(value, (*path, key))
    return paths


def _display_path(path: Path) -> str:
    try:
        from atlas_assets.settings import PROJECT_ROOT

        return str(path.resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)


def validate_data(
    data: Any,
    schema: type[BaseModel],
    *,
    source: str,
    lines: Mapping[tuple, int] | None = None,
    overridden: set[tuple] | None = None,
) -> BaseModel:
    """Validate `data` against `schema`; a ConfigError lists every problem with key and line."""
    lines = lines or {}
    overridden = overridden or set()
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            # the line of the deepest key of the location the file has (a missing key: its parent)
            known = next((loc[:n] for n in range(len(loc), -1, -1) if loc[:n] in lines), ())
            where = f"line {lines[known]}" if known in lines else "no line"
            if loc in overridden or (loc and loc[:-1] in overridden and loc not in lines):
                where = "override"
            message = error["msg"]
            if error["type"] == "extra_forbidden":
                message = f"unknown key ({message.lower()})"
            elif error["type"] != "missing":
                message = f"{message} (got {error.get('input')!r})"
            problems.append(f"{source}, {where}: {_dotted(loc)}: {message}")
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems)) from None


def load_validated(
    path: Path | str, schema: type[BaseModel], overrides: Mapping[str, Any] | None = None
) -> dict:
    """Read a YAML file, merge nested `overrides`, validate against `schema`, return the plain dict."""
    path = Path(path)
    source = _display_path(path)
    text = path.read_text()
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    lines, duplicates = _key_lines(root) if root is not None else ({}, [])
    if duplicates:
        raise ConfigError(
            "invalid config:\n  "
            + "\n  ".join(f"{source}, line {second}: {_dotted(key)}: duplicated key (first at line {first})"
                          for key, first, second in duplicates)
        )
    if data is None:
        data = {}
    if overrides:
        data = deep_update(data, overrides)
    validate_data(data, schema, source=source, lines=lines, overridden=_override_paths(overrides or {}))
    return data


# --------------------------------------------------------------------------- publish.yaml

ValidationTable = Literal[
    "validation_metrics", "validation_predictions", "validation_family_skill", "validation_family_ranks",
    "validation_folds", "validation_sensitivity",
]


class PublishReport(Strict):
    leaderboard_models: int = Field(ge=1, le=500)
    difficulty_families: list[str] = Field(max_length=6)
    image_dpi: int = Field(ge=50, le=300)
    metadata_image_dpi: int = Field(ge=30, le=200)
    skill_rows: int = Field(ge=1, le=100)
    cost_rows: int = Field(ge=1, le=100)


class GateRoute(Strict):
    min_families: int = Field(ge=1)
    min_categories: int | None = Field(default=None, ge=1)
    one_of_categories: list[str] = Field(default_factory=list)
    max_interval_width: Number | None = Field(default=None, gt=0)

    @field_validator("one_of_categories")
    @classmethod
    def _known_categories(cls, value: list[str]) -> list[str]:
        from atlas_assets.registry.benchmarks import CATEGORIES

        unknown = sorted(set(value) - CATEGORIES)
        if unknown:
            raise ValueError(f"unknown categories {unknown} (the registry's: {sorted(CATEGORIES)})")
        return value


class HeadlineGate(Strict):
    min_lineages: int = Field(ge=1)
    routes: dict[str, GateRoute] = Field(min_length=1)
    lineages: dict[str, str]


class PublishFile(Strict):
    version: int
    required_validation: list[ValidationTable]
    headline_gate: HeadlineGate
    report: PublishReport


# --------------------------------------------------------------------------- cost.yaml


class CostReference(Strict):
    model: str = Field(min_length=1)
    reasoning_state: str = Field(min_length=1)


class CostEvaluator(Strict):
    pattern: str = Field(min_length=1)    # '<source>/<file>' glob
    evaluator: str = Field(min_length=1)


class CostAgentFile(Strict):
    pattern: str = Field(min_length=1)
    standard_harness: str = Field(min_length=1)  # regex (RE2, as DuckDB reads it)

    @field_validator("standard_harness")
    @classmethod
    def _compiles(cls, value: str) -> str:
        import re

        try:
            re.compile(value)
        except re.error as error:
            raise ValueError(f"not a regular expression: {error}") from None
        return value


class CostObservations(Strict):
    same_run_relative_tolerance: Number = Field(ge=0, lt=1)
    evaluators: list[CostEvaluator]
    agent_files: list[CostAgentFile]


class CostReasoning(Strict):
    ladder: list[str] = Field(min_length=1)
    off_ladder: list[str]
    default: str
    pin_preference: list[str]

    @model_validator(mode="after")
    def _disjoint(self) -> "CostReasoning":
        names = [*self.ladder, *self.off_ladder, self.default]
        if len(set(names)) != len(names):
            raise ValueError(f"ladder, off_ladder and default must not share a setting: {names}")
        return self


class CostParametrization(Strict):
    base: Literal["anchored", "centered"]
    benchmark_centred_min_runs: int = Field(ge=0)


class CostLikelihood(Strict):
    student_t_df: Number = Field(ge=1)


class CostPriors(Strict):
    ref_mu: LocScale
    ref_suite_sd: Scale
    ref_within_sd: Scale
    loglambda_suite_sd: Scale
    loglambda_within_sd: Scale
    base_mu: Scale
    base_sd: Scale
    setting_effect: Scale
    dev_sd: Scale
    harness_sd: Scale
    sigma: Scale


class CostSampler(Strict):
    chains: int = Field(ge=1)
    warmup: int = Field(ge=0)
    draws: int = Field(ge=1)
    seed: int
    adapt_delta: Number = Field(gt=0, lt=1)
    max_treedepth: int = Field(ge=1)
    engine: Literal["auto", "cmdstanpy", "pystan"]
    init_radius: Number = Field(ge=0)


class CostFrontier(Strict):
    max_draws: int = Field(ge=10)
    seed: int


class CostOutputs(Strict):
    interval: Number = Field(gt=0, lt=1)
    max_draws: int = Field(ge=10)
    workloads: dict[str, list[str]]
    frontier: CostFrontier


class CostValidationSampler(Strict):
    chains: int = Field(ge=1)
    warmup: int = Field(ge=0)
    draws: int = Field(ge=1)


class CostValidation(Strict):
    folds: int = Field(ge=2)
    seed: int
    sampler: CostValidationSampler


class CostFile(Strict):
    version: int
    stan_file: str
    reference: CostReference
    observations: CostObservations
    reasoning: CostReasoning
    parametrization: CostParametrization
    likelihood: CostLikelihood
    priors: CostPriors
    sampler: CostSampler
    diagnostics: Diagnostics
    outputs: CostOutputs
    validation: CostValidation
