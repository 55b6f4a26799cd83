"""Model registry: published model identifiers -> canonical model + normalized reasoning state.

Pure functions, no Dagster. The rules live in ``config/reasoning_rules.yaml`` (how identifiers are
read) and ``config/models.yaml`` (curated facts where a rule cannot decide); ``docs/reasoning_states.md``
explains them in prose. Output tables follow ``sql/00_source_tables.sql``: ``registry_model_ids``,
``registry_models`` and ``audit_registry``.

A published identifier is read in one fixed order (see the header of reasoning_rules.yaml):
cleanup -> exact identifier override -> provider prefix -> one setting suffix or word label ->
name rewrites -> canonical key -> alias -> residual check. The result depends on the identifier
string only, so one identifier always gets one row, whichever file published it.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd
import yaml

CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"
REASONING_RULES_PATH = CONFIG_DIR / "reasoning_rules.yaml"
MODEL_OVERRIDES_PATH = CONFIG_DIR / "models.yaml"

LADDER_STATES = ("minimal", "low", "medium", "high", "xhigh", "max")
OFF_LADDER_STATES = ("default", "disabled", "enabled")
REASONING_STATES = LADDER_STATES + OFF_LADDER_STATES

REGISTRY_MODEL_IDS_COLUMNS = ["model_id", "model", "reasoning_state", "budget_tokens", "rule"]
REGISTRY_MODELS_COLUMNS = ["model", "display_name", "organization", "released_on", "n_identifiers"]
AUDIT_REGISTRY_COLUMNS = ["kind", "subject", "source", "file", "detail"]
PUBLISHED_COLUMNS = ["model_id", "model_name", "organization", "released_on", "source", "file"]

SWE_BENCH_SOURCE = "swe_bench"

# Rule ids that are not in a YAML list (they are steps of the procedure).
RULE_BLANK = "blank_identifier"
RULE_OVERRIDE = "identifier_override"
RULE_ALIAS = "alias"
RULE_NO_SETTING = "no_setting_named"
RULE_REASONING_PRODUCT = "reasoning_product"
RULE_CONTRADICTION = "reasoning_label_on_model_without_reasoning"
# Seed 001 "Guards": no-thinking rows are kept only for models with no reasoning mode, where
# thinking off IS the model's only (default) state; see docs/reasoning_states.md.
RULE_OFF_IS_DEFAULT = "no_reasoning_mode_off_is_default"
RULE_SWE_BENCH_UNCONFIRMED = "swe_bench_unconfirmed_model"


class RegistryConfigError(ValueError):
    """A registry config file is missing, malformed, or has an invalid entry (message names file and key)."""


@dataclass(frozen=True)
class ModelIdentity:
    model: str | None  # canonical key, e.g. 'gpt-5.2-2025-12-11'; None when unknown
    reasoning_state: str | None  # one of REASONING_STATES; None when unknown
    budget_tokens: int | None  # thinking-token budget named by the identifier
    rule: str  # rule ids that decided, joined with '+', or the reason none could


# --------------------------------------------------------------------------------------------
# Config loading


@dataclass(frozen=True)
class _Substitution:
    rule_id: str
    regex: re.Pattern[str]
    replace: str
    only_after_prefix: str | None = None


@dataclass(frozen=True)
class _SettingForm:
    """A suffix or word label naming a reasoning setting. State comes from the match or `state`."""

    rule_id: str
    regex: re.Pattern[str]
    state: str | None  # fixed state when the pattern has no <state>/<kilo_tokens> group
    why: str


@dataclass(frozen=True)
class ReasoningRules:
    cleanup: tuple[_Substitution, ...]
    provider_prefix_rule: str
    provider_prefixes: tuple[str, ...]
    setting_forms: tuple[_SettingForm, ...]  # setting_suffixes then word_forms, in file order
    budget_rule: str
    tokens_per_k: int
    budget_bands: tuple[tuple[int | None, str], ...]  # (max_tokens or None for open end, state)
    name_rewrites: tuple[_Substitution, ...]
    canonical_key_rule: str
    residual_rule: str
    residual_regex: re.Pattern[str]
    swe_bench_labels: tuple[tuple[str, re.Pattern[str]], ...]
    not_settings: tuple[str, ...]
    unknown_suffix_rule: str
    unknown_suffix_regex: re.Pattern[str]  # with a (?P<label>) group
    setting_word_regex: re.Pattern[str]
    suffix_rule_ids: frozenset[str]  # ids of setting_suffixes (Epoch's '_x' / '-x' forms)
    why_by_rule: Mapping[str, str] = field(default_factory=dict)
    # ARC Prize ids (reasoning_rules.yaml arc_prize_ids): rewrites, settings (rule, regex, fixed label), name rewrites
    arc_rewrites: tuple[_Substitution, ...] = ()
    arc_settings: tuple[tuple[str, re.Pattern[str], str | None], ...] = ()
    arc_name_rewrites: tuple[_Substitution, ...] = ()


@dataclass(frozen=True)
class _IdentifierOverride:
    model: str
    reasoning_state: str
    why: str


@dataclass(frozen=True)
class ModelOverrides:
    facts_ignored_from_sources: Mapping[str, str]
    identifier_overrides: Mapping[str, _IdentifierOverride]  # lowercased published id ->
    moving_api_aliases: Mapping[str, tuple[str, str]]  # lowercased id -> (trusted_source, why)
    # sources whose names are free text: a model they alone publish must be confirmed (source -> why)
    sources_needing_confirmation: Mapping[str, str]
    aliases: Mapping[str, str]  # canonical key -> canonical model
    reasoning_products: frozenset[str]
    no_reasoning_mode: frozenset[str]
    swe_bench_models: frozenset[str]
    model_facts: Mapping[str, Mapping[str, Any]]  # model -> {display_name, organization, released_on}

    def curated_models(self) -> set[str]:
        """Models this file vouches for (used to confirm SWE-bench-only identifiers)."""
        return (
            {o.model for o in self.identifier_overrides.values()}
            | set(self.aliases.values())
            | set(self.reasoning_products)
            | set(self.no_reasoning_mode)
            | set(self.swe_bench_models)
            | set(self.model_facts)
        )


# The top-level keys each file may have: an optional section whose key is misspelt would otherwise be read
# as absent, silently (every alias, or every not-a-setting rule, gone without a word).
REASONING_RULES_KEYS = frozenset({
    "version", "states", "cleanup", "provider_prefixes", "setting_suffixes", "word_forms",
    "unrecognized_setting_suffix", "budget_bands", "name_rewrites", "canonical_key", "residual_reasoning_words",
    "not_settings", "swe_bench_labels", "arc_prize_ids"})
MODEL_OVERRIDES_KEYS = frozenset({
    "version", "facts_ignored_from_sources", "sources_needing_confirmation", "identifier_overrides",
    "moving_api_aliases", "aliases", "reasoning_products", "no_reasoning_mode", "swe_bench_models", "models"})


def _read_yaml(path: Path, allowed: frozenset[str]) -> dict[str, Any]:
    if not path.is_file():
        raise RegistryConfigError(f"{path}: file not found")
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RegistryConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise RegistryConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    unknown = [key for key in data if key not in allowed]
    if unknown:
        lines = {key.value: key.start_mark.line + 1 for key, _ in yaml.compose(text).value}
        raise RegistryConfigError("; ".join(f"{path}, line {lines.get(key, '?')}: unknown top-level key {key!r}"
                                            for key in unknown) + f" (allowed: {', '.join(sorted(allowed))})")
    return data


def _require(mapping: Any, key: str, path: Path, where: str, kind: type | tuple[type, ...] = object) -> Any:
    if not isinstance(mapping, dict) or key not in mapping:
        raise RegistryConfigError(f"{path}: {where}: missing key '{key}'")
    value = mapping[key]
    if not isinstance(value, kind):
        raise RegistryConfigError(f"{path}: {where}.{key}: expected {kind}, got {type(value).__name__}")
    return value


def _compile(pattern: str, path: Path, where: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise RegistryConfigError(f"{path}: {where}.pattern: invalid regex {pattern!r}: {exc}") from exc


def _check_state(state: Any, path: Path, where: str, allow_null: bool) -> str | None:
    if state is None and allow_null:
        return None
    if state not in REASONING_STATES:
        raise RegistryConfigError(f"{path}: {where}: state {state!r} is not one of {REASONING_STATES}")
    return state


@lru_cache(maxsize=8)
def _load_reasoning_rules_cached(path: Path) -> ReasoningRules:
    data = _read_yaml(path, REASONING_RULES_KEYS)
    why_by_rule: dict[str, str] = {}
    seen_ids: set[str] = set()

    def rule_id(entry: Any, where: str) -> str:
        rid = _require(entry, "id", path, where, str)
        if rid in seen_ids:
            raise RegistryConfigError(f"{path}: {where}: duplicate rule id '{rid}'")
        seen_ids.add(rid)
        why_by_rule[rid] = str(entry.get("why", "")).strip()
        return rid

    states = _require(data, "states", path, "top level", dict)
    if tuple(_require(states, "ladder", path, "states", list)) != LADDER_STATES:
        raise RegistryConfigError(f"{path}: states.ladder must be {list(LADDER_STATES)} (the code orders states by it)")

    def substitutions(key: str) -> tuple[_Substitution, ...]:
        out = []
        for i, entry in enumerate(_require(data, key, path, "top level", list)):
            where = f"{key}[{i}]"
            out.append(
                _Substitution(
                    rule_id=rule_id(entry, where),
                    regex=_compile(_require(entry, "pattern", path, where, str), path, where),
                    replace=str(entry.get("replace", "")),
                    only_after_prefix=entry.get("only_after_prefix"),
                )
            )
        return tuple(out)

    cleanup = substitutions("cleanup")
    name_rewrites = substitutions("name_rewrites")

    prefixes = _require(data, "provider_prefixes", path, "top level", dict)
    prefix_rule = rule_id(prefixes, "provider_prefixes")
    prefix_list = tuple(p.lower() for p in _require(prefixes, "prefixes", path, "provider_prefixes", list))

    forms: list[_SettingForm] = []
    suffix_rule_ids: set[str] = set()
    for key in ("setting_suffixes", "word_forms"):
        for i, entry in enumerate(_require(data, key, path, "top level", list)):
            where = f"{key}[{i}]"
            regex = _compile(_require(entry, "pattern", path, where, str), path, where)
            has_group = bool({"state", "kilo_tokens"} & set(regex.groupindex))
            if not has_group and "state" not in entry:
                raise RegistryConfigError(
                    f"{path}: {where}: needs a 'state' key (may be null) or a (?P<state>) / (?P<kilo_tokens>) group"
                )
            state = None if has_group else _check_state(entry["state"], path, where, allow_null=True)
            forms.append(_SettingForm(rule_id(entry, where), regex, state, why_by_rule.get(entry["id"], "")))
            if key == "setting_suffixes":
                suffix_rule_ids.add(entry["id"])

    unknown = _require(data, "unrecognized_setting_suffix", path, "top level", dict)
    unknown_rule = rule_id(unknown, "unrecognized_setting_suffix")
    unknown_regex = _compile(_require(unknown, "pattern", path, "unrecognized_setting_suffix", str), path,
                             "unrecognized_setting_suffix")
    if "label" not in unknown_regex.groupindex:
        raise RegistryConfigError(f"{path}: unrecognized_setting_suffix.pattern: needs a (?P<label>...) group")
    setting_words = _compile(_require(unknown, "setting_words", path, "unrecognized_setting_suffix", str), path,
                             "unrecognized_setting_suffix.setting_words")

    budget = _require(data, "budget_bands", path, "top level", dict)
    budget_rule = rule_id(budget, "budget_bands")
    bands = []
    for i, band in enumerate(_require(budget, "bands", path, "budget_bands", list)):
        where = f"budget_bands.bands[{i}]"
        max_tokens = _require(band, "max_tokens", path, where)
        bands.append((max_tokens, _check_state(_require(band, "state", path, where), path, where, allow_null=False)))
    if bands[-1][0] is not None:
        raise RegistryConfigError(f"{path}: budget_bands.bands: last band must have max_tokens: null (open end)")

    residual = _require(data, "residual_reasoning_words", path, "top level", dict)
    residual_rule = rule_id(residual, "residual_reasoning_words")
    swe_labels = []
    for i, entry in enumerate(_require(data, "swe_bench_labels", path, "top level", list)):
        where = f"swe_bench_labels[{i}]"
        regex = _compile(_require(entry, "pattern", path, where, str), path, where)
        if "label" not in regex.groupindex:
            raise RegistryConfigError(f"{path}: {where}.pattern: needs a (?P<label>...) group")
        swe_labels.append((rule_id(entry, where), regex))

    arc = data.get("arc_prize_ids") or {}
    if not isinstance(arc, dict):
        raise RegistryConfigError(f"{path}: arc_prize_ids: expected a mapping")

    def arc_substitutions(key: str) -> tuple[_Substitution, ...]:
        out = []
        for i, entry in enumerate(arc.get(key) or []):
            where = f"arc_prize_ids.{key}[{i}]"
            out.append(_Substitution(rule_id(entry, where),
                                     _compile(_require(entry, "pattern", path, where, str), path, where),
                                     str(entry.get("replace", ""))))
        return tuple(out)

    arc_settings = []
    for i, entry in enumerate(arc.get("settings") or []):
        where = f"arc_prize_ids.settings[{i}]"
        regex = _compile(_require(entry, "pattern", path, where, str), path, where)
        if not ({"state", "kilo_tokens"} & set(regex.groupindex)) and not isinstance(entry.get("label"), str):
            raise RegistryConfigError(f"{path}: {where}: needs a 'label' or a (?P<state>) / (?P<kilo_tokens>) group")
        arc_settings.append((rule_id(entry, where), regex, entry.get("label")))

    return ReasoningRules(
        arc_rewrites=arc_substitutions("rewrites"),
        arc_settings=tuple(arc_settings),
        arc_name_rewrites=arc_substitutions("name_rewrites"),
        cleanup=cleanup,
        provider_prefix_rule=prefix_rule,
        provider_prefixes=prefix_list,
        setting_forms=tuple(forms),
        budget_rule=budget_rule,
        tokens_per_k=int(_require(budget, "tokens_per_k", path, "budget_bands", int)),
        budget_bands=tuple(bands),
        name_rewrites=name_rewrites,
        canonical_key_rule=rule_id(_require(data, "canonical_key", path, "top level", dict), "canonical_key"),
        residual_rule=residual_rule,
        residual_regex=_compile(_require(residual, "pattern", path, "residual_reasoning_words", str), path, "residual"),
        swe_bench_labels=tuple(swe_labels),
        not_settings=tuple(e["example"] for e in data.get("not_settings", [])),
        unknown_suffix_rule=unknown_rule,
        unknown_suffix_regex=unknown_regex,
        setting_word_regex=setting_words,
        suffix_rule_ids=frozenset(suffix_rule_ids),
        why_by_rule=why_by_rule,
    )


def load_reasoning_rules(path: str | Path | None = None) -> ReasoningRules:
    """Load and validate reasoning_rules.yaml; errors name the file and the key."""
    return _load_reasoning_rules_cached(Path(path or REASONING_RULES_PATH).resolve())


@lru_cache(maxsize=8)
def _load_model_overrides_cached(path: Path) -> ModelOverrides:
    data = _read_yaml(path, MODEL_OVERRIDES_KEYS)

    def section(key: str) -> dict[str, Any]:
        value = data.get(key) or {}
        if not isinstance(value, dict):
            raise RegistryConfigError(f"{path}: {key}: expected a mapping, got {type(value).__name__}")
        return value

    overrides = {}
    for ident, entry in section("identifier_overrides").items():
        where = f"identifier_overrides.{ident}"
        overrides[str(ident).strip().lower()] = _IdentifierOverride(
            model=_require(entry, "model", path, where, str),
            reasoning_state=_check_state(_require(entry, "reasoning_state", path, where), path, where, allow_null=False),
            why=_require(entry, "why", path, where, str),
        )
    moving = {}
    for ident, entry in section("moving_api_aliases").items():
        where = f"moving_api_aliases.{ident}"
        moving[str(ident).lower()] = (
            _require(entry, "trusted_source", path, where, str),
            _require(entry, "why", path, where, str),
        )
    aliases = {}
    for key, entry in section("aliases").items():
        where = f"aliases.{key}"
        _require(entry, "why", path, where, str)
        aliases[str(key).lower()] = _require(entry, "model", path, where, str)
    facts: dict[str, dict[str, Any]] = {}
    for model, entry in section("models").items():
        where = f"models.{model}"
        if not isinstance(entry, dict):
            raise RegistryConfigError(f"{path}: {where}: expected a mapping")
        unknown = set(entry) - {"display_name", "organization", "released_on", "why"}
        if unknown:
            raise RegistryConfigError(f"{path}: {where}: unknown keys {sorted(unknown)}")
        _require(entry, "why", path, where, str)
        fact = dict(entry)
        if "released_on" in fact:
            fact["released_on"] = _as_date(fact["released_on"])
            if fact["released_on"] is None:
                raise RegistryConfigError(f"{path}: {where}.released_on: not a YYYY-MM-DD date: {entry['released_on']!r}")
        facts[str(model)] = fact
    confirmation = {str(k): str(v) for k, v in section("sources_needing_confirmation").items()}
    confirmation.setdefault(SWE_BENCH_SOURCE, "SWE-bench Model tags are free text typed by submitters.")
    return ModelOverrides(
        sources_needing_confirmation=confirmation,
        facts_ignored_from_sources={str(k): str(v) for k, v in section("facts_ignored_from_sources").items()},
        identifier_overrides=overrides,
        moving_api_aliases=moving,
        aliases=aliases,
        reasoning_products=frozenset(k.lower() for k in section("reasoning_products")),
        no_reasoning_mode=frozenset(k.lower() for k in section("no_reasoning_mode")),
        swe_bench_models=frozenset(k.lower() for k in section("swe_bench_models")),
        model_facts=facts,
    )


def load_model_overrides(path: str | Path | None = None) -> ModelOverrides:
    """Load and validate models.yaml; errors name the file and the key."""
    return _load_model_overrides_cached(Path(path or MODEL_OVERRIDES_PATH).resolve())


# --------------------------------------------------------------------------------------------
# Normalizing one identifier


def canonical_key(name: str) -> str:
    """Lowercase; '(70B)' -> '-70b'; ' + ' -> '+'; whitespace runs -> '-'."""
    key = name.strip().lower()
    key = re.sub(r"\s*\+\s*", "+", key)
    key = re.sub(r"\s*\(\s*([^()]*?)\s*\)", r"-\1", key)
    key = re.sub(r"\s+", "-", key)
    return re.sub(r"-{2,}", "-", key).strip("-")


def _budget_state(tokens: int, rules: ReasoningRules) -> str:
    for max_tokens, state in rules.budget_bands:
        if max_tokens is None or tokens <= max_tokens:
            return state
    raise AssertionError("budget_bands ends with an open band")  # guaranteed by the loader


def _apply(subs: Iterable[_Substitution], text: str, fired: list[str], prefix: str | None = None) -> str:
    for sub in subs:
        if sub.only_after_prefix and sub.only_after_prefix.lower() != prefix:
            continue
        new = sub.regex.sub(sub.replace, text)
        if new != text:
            fired.append(sub.rule_id)
            text = new
    return text


def _strip_prefix(text: str, rules: ReasoningRules, fired: list[str]) -> tuple[str, str | None]:
    lowered = text.lower()
    for prefix in rules.provider_prefixes:
        if lowered.startswith(prefix) and len(text) > len(prefix):
            fired.append(rules.provider_prefix_rule)
            return text[len(prefix):], prefix
    return text, None


def _read_setting(text: str, rules: ReasoningRules) -> tuple[str, str | None, int | None, _SettingForm] | None:
    """First setting suffix / word label at the end of `text`: (rest, state, budget, form)."""
    for form in rules.setting_forms:
        match = form.regex.search(text)
        if not match:
            continue
        groups = match.groupdict()
        budget = None
        if groups.get("kilo_tokens"):
            budget = int(groups["kilo_tokens"]) * rules.tokens_per_k
            state = _budget_state(budget, rules)
        elif groups.get("state"):
            state = groups["state"].lower()
        else:
            state = form.state
        return text[: match.start()].rstrip(" -_"), state, budget, form
    return None


def _unknown_setting_suffix(text: str, rules: ReasoningRules) -> tuple[str, str] | None:
    """(name before, label) when `text` ends in an Epoch-style '_<word>' suffix no form reads."""
    match = rules.unknown_suffix_regex.search(text)
    if not match or not text[: match.start()].strip(" -_"):
        return None
    return text[: match.start()].rstrip(" -_"), match.group("label")


def normalize_model_id(
    model_id: str,
    *,
    display_name: str | None = None,
    source: str | None = None,
    rules: ReasoningRules | None = None,
    overrides: ModelOverrides | None = None,
) -> ModelIdentity:
    """Map one published identifier to (canonical model, reasoning state, budget, rule).

    The result depends on `model_id` only: `display_name` and `source` are accepted so callers can
    pass what they have, but a display name is never used to fill in a setting the identifier does
    not state (Epoch's '_unknown' ids carry names like 'Opus 4.6 (High)' in one file and other
    names elsewhere; build_model_registry quotes them in the audit instead). SWE-bench identifiers
    are confirmed against other sources in build_model_registry, not here.
    """
    del display_name, source  # documented above: deliberately not used for the mapping
    rules = rules or load_reasoning_rules()
    overrides = overrides or load_model_overrides()
    if _is_missing(model_id) or not str(model_id).strip():
        return ModelIdentity(None, None, None, RULE_BLANK)

    fired: list[str] = []
    text = _apply(rules.cleanup, str(model_id), fired)

    override = overrides.identifier_overrides.get(text.lower())
    if override is not None:
        return ModelIdentity(override.model, override.reasoning_state, None, "+".join(fired + [RULE_OVERRIDE]))

    text, prefix = _strip_prefix(text, rules, fired)

    state: str | None = "default"
    budget: int | None = None
    setting_rule: str | None = None
    if canonical_key(_apply(rules.name_rewrites, text, [], prefix)) in overrides.reasoning_products:
        setting_rule = RULE_REASONING_PRODUCT
    else:
        setting = _read_setting(text, rules)
        if setting is not None:
            text, state, budget, form = setting
            setting_rule = form.rule_id
            if budget is not None:
                setting_rule += "+" + rules.budget_rule
        else:
            unknown = _unknown_setting_suffix(text, rules)
            if unknown is not None and rules.setting_word_regex.search(unknown[1]):
                # '_xxhigh' names a setting no rule knows: the model before it, state unknown.
                text, state, setting_rule = unknown[0], None, rules.unknown_suffix_rule

    text = _apply(rules.name_rewrites, text, fired, prefix)
    key = canonical_key(text)
    if key in overrides.aliases:
        key = overrides.aliases[key]
        fired.append(RULE_ALIAS)

    if setting_rule is None:
        if rules.residual_regex.search(key) and key not in overrides.reasoning_products:
            state, setting_rule = None, rules.residual_rule
        else:
            setting_rule = RULE_NO_SETTING
    if key in overrides.no_reasoning_mode and state == "disabled":
        # A model without a reasoning mode only ever runs with thinking off: that is its default.
        state, setting_rule = "default", f"{setting_rule}+{RULE_OFF_IS_DEFAULT}"
    elif key in overrides.no_reasoning_mode and state not in ("default", None):
        state, setting_rule = None, f"{setting_rule}+{RULE_CONTRADICTION}"
    return ModelIdentity(key, state, budget, "+".join(fired + [setting_rule]))


# --------------------------------------------------------------------------------------------
# SWE-bench: which string is the model identifier of a leaderboard result


def _swe_bench_tags(result: Mapping[str, Any]) -> list[str]:
    tags = result.get("tags") or []
    if isinstance(tags, str):  # older site data stores the list as its Python repr
        try:
            tags = ast.literal_eval(tags) if tags.strip().startswith("[") else [tags]
        except (ValueError, SyntaxError):
            tags = [tags]
    return [str(t) for t in tags]


def swe_bench_model_id(
    result: Mapping[str, Any], *, rules: ReasoningRules | None = None
) -> tuple[str | None, str | None, str | None]:
    """The model identifier of one SWE-bench leaderboard result: (model_id, reasoning_label, problem).

    - Exactly one 'Model: <id>' tag (or several spelling one canonical model): the identifier is
      that (first) tag value. The tag never carries the
      reasoning setting, the result name sometimes does ('... (medium reasoning)', 'Claude 4.5 Opus
      medium (20251101)'); then the identifier is '<tag> (<label>)', e.g.
      'gpt-5-2025-08-07 (medium reasoning)'. The label must be part of the identifier because the
      registry keys one state per identifier and the bare tag is also published without a label.
      problem is None.
    - No Model tag, or several: the identifier is the result name (a system, e.g. 'Honeycomb' or
      'Warp'), problem is 'no_model_tag' or 'several_model_tags: a; b'. Callers keep the row but
      should audit it; build_model_registry audits such names as 'unknown_model_id' unless another
      source or models.yaml confirms them as a model.
    reasoning_label is the label as published in the name ('medium reasoning', 'medium'), or None.
    """
    rules = rules or load_reasoning_rules()
    name = str(result.get("name") or "").strip()
    label = None
    for _rule_id, regex in rules.swe_bench_labels:
        match = regex.search(name)
        if match:
            label = match.group("label").strip()
            break
    models = [t.split(":", 1)[1].strip() for t in _swe_bench_tags(result) if t.split(":", 1)[0].strip() == "Model"]
    models = [m for m in models if m]
    # Two spellings of one model ('claude-3-5-sonnet-20241022', 'claude-3.5-sonnet-20241022') are one model.
    if len(models) > 1 and len({normalize_model_id(m, rules=rules).model for m in models}) == 1:
        models = models[:1]
    if len(models) == 1:
        model_id = f"{models[0]} ({label})" if label else models[0]
        return model_id, label, None
    problem = "no_model_tag" if not models else "several_model_tags: " + "; ".join(models)
    return (name or None), label, problem


# --------------------------------------------------------------------------------------------
# Identifiers of sources that publish the setting outside the name (Aider fields, tau2-bench's
# reasoning_effort) or in a style of their own (ARC Prize ids): the parser publishes '<name> (<label>)'
# in a word form the rules read, as swe_bench_model_id does.


def setting_label(*, effort: str | None = None, budget_tokens: int | None = None) -> tuple[str | None, str | None]:
    """(label, problem) for a setting published in fields: an effort level ('high'; 'none' = off;
    'enabled' = thinking on) or a thinking-token budget (0 = off). Both None: (None, None)."""
    if effort is not None:
        value = str(effort).strip().lower()
        if value in LADDER_STATES:
            return value, None
        if value in ("none", "off", "disabled"):
            return "no thinking", None
        if value in ("enabled", "on", "thinking"):
            return "thinking", None
        return None, f"reasoning effort {effort!r} is not a known setting"
    if budget_tokens is not None:
        if budget_tokens == 0:
            return "no thinking", None
        if budget_tokens < 0:
            return None, f"thinking budget {budget_tokens!r} is negative"
        return f"{max(1, round(budget_tokens / 1000))}K thinking", None
    return None, None


def with_setting(name: str, label: str | None, *, rules: ReasoningRules | None = None) -> tuple[str, str | None]:
    """The identifier of `name` run at the setting `label` (setting_label): (identifier, problem).

    A name that already states a setting keeps it ('gpt-5 (high)'); a field stating the same state adds
    nothing; a field stating another state is a contradiction (problem set, the name kept, so the caller
    audits it instead of choosing). A name without a setting gets ' (<label>)'."""
    rules = rules or load_reasoning_rules()
    name = str(name).strip()
    if label is None:
        return name, None
    own = _read_setting(_apply(rules.cleanup, name, []), rules)
    field_state = _read_setting(f"x ({label})", rules)
    if own is None:
        return f"{name} ({label})", None
    if field_state is not None and own[1] != field_state[1]:
        return name, f"the name says {own[1]!r} but the run's fields say {label!r}"
    return name, None


def arc_prize_model_id(model_id: str, *, rules: ReasoningRules | None = None) -> str:
    """The identifier an ARC Prize model id is published under: its setting (in one of ARC's styles,
    reasoning_rules.yaml arc_prize_ids) read and written as ' (<label>)', the name cleaned of ARC's
    spellings. 'gpt-5-2025-08-07-high' -> 'gpt-5-2025-08-07 (high)'; an id without a setting -> the name."""
    rules = rules or load_reasoning_rules()
    text = _apply(rules.arc_rewrites, str(model_id).strip(), [])
    label = None
    for _rule_id, regex, fixed in rules.arc_settings:
        match = regex.search(text)
        if not match:
            continue
        groups = match.groupdict()
        if groups.get("kilo_tokens"):
            label = f"{int(groups['kilo_tokens'])}K thinking"
        elif groups.get("state"):
            label = groups["state"].lower()
        else:
            label = fixed
        text = text[: match.start()].rstrip(" -_")
        break
    text = _apply(rules.arc_name_rewrites, text, [])
    return f"{text} ({label})" if label else text


# --------------------------------------------------------------------------------------------
# Building the registry tables


def _as_date(value: Any) -> date | None:
    if _is_missing(value):
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    try:
        parsed = pd.to_datetime(str(value).strip(), errors="coerce")
    except (ValueError, TypeError):
        return None
    return None if pd.isna(parsed) else parsed.date()


def _is_missing(value: Any) -> bool:
    return value is None or (not isinstance(value, (list, tuple, dict)) and bool(pd.isna(value)))


def _clean_text(value: Any) -> str | None:
    if _is_missing(value):
        return None
    text = re.sub(r"\s+", " ", str(value)).strip()
    return text or None


def _most_common(values: list[Any]) -> tuple[Any, Counter]:
    """Most common value; ties go to the smallest (earliest date, alphabetical) so runs are stable."""
    counts = Counter(values)
    best = max(counts.values())
    return min(v for v, n in counts.items() if n == best), counts


def _display_from_name(name: str, rules: ReasoningRules) -> str:
    """A published name without decoration or a trailing setting label."""
    text = _apply(rules.cleanup, name, [])
    setting = _read_setting(text, rules)
    return setting[0] if setting else text


def _display_from_id(model_id: str, rules: ReasoningRules) -> str:
    text, _ = _strip_prefix(_apply(rules.cleanup, model_id, []), rules, [])
    setting = _read_setting(text, rules)
    return setting[0] if setting else text


def build_model_registry(
    published: pd.DataFrame,
    *,
    rules: ReasoningRules | None = None,
    overrides: ModelOverrides | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Build (registry_model_ids, registry_models, audit_registry) from published identifiers.

    `published` has columns model_id, model_name, organization, released_on, source, file: one row
    per published score or per distinct identifier (duplicates are fine). Audit kinds written:
    'unknown_model_id', 'unknown_reasoning_label', 'ambiguous_model_id', 'conflicting_model_fact'.
    """
    rules = rules or load_reasoning_rules()
    overrides = overrides or load_model_overrides()
    missing = [c for c in PUBLISHED_COLUMNS if c not in published.columns]
    if missing:
        raise ValueError(f"build_model_registry: published is missing columns {missing}")
    pub = published[PUBLISHED_COLUMNS].copy()
    pub["model_id"] = [None if _is_missing(v) else str(v) for v in pub["model_id"]]
    audit: list[dict[str, Any]] = []

    blank = pub["model_id"].isna() | (pub["model_id"].fillna("").str.strip() == "")
    for (source, file), _rows in pub[blank].groupby(["source", "file"], dropna=False):
        audit.append(dict(kind="unknown_model_id", subject="", source=source, file=file,
                          detail=f"{len(_rows)} row(s) in {source}/{file} publish no model identifier"))
    pub = pub[~blank]

    identities = {mid: normalize_model_id(mid, rules=rules, overrides=overrides) for mid in pub["model_id"].unique()}
    identities.update(_unknown_suffixes_of_set_models(identities, rules, overrides))

    # Free-text sources (SWE-bench tags typed by submitters, leaderboard display names: models.yaml
    # sources_needing_confirmation): a model only they publish is accepted when a source that needs no
    # confirmation (Epoch) publishes it too, or models.yaml vouches for it. Unknown names are audited,
    # never turned into new models.
    pub["model"] = pub["model_id"].map(lambda m: identities[m].model)
    needing = set(overrides.sources_needing_confirmation)
    trusted_rows = ~pub["source"].isin(needing)
    confirmed = set(pub.loc[trusted_rows, "model"].dropna()) | overrides.curated_models()
    unconfirmed_ids = set(pub.loc[~trusted_rows, "model_id"]) - set(pub.loc[trusted_rows, "model_id"])
    first_source = pub.loc[~trusted_rows].groupby("model_id")["source"].min().to_dict()
    for mid in unconfirmed_ids:
        ident = identities[mid]
        if ident.model is not None and ident.model not in confirmed:
            source = first_source[mid]
            rule = RULE_SWE_BENCH_UNCONFIRMED if source == SWE_BENCH_SOURCE else f"{source}_unconfirmed_model"
            identities[mid] = ModelIdentity(None, None, None, f"{ident.rule}+{rule}")
    pub["model"] = pub["model_id"].map(lambda m: identities[m].model)

    ids_table = pd.DataFrame(
        [dict(model_id=mid, model=i.model, reasoning_state=i.reasoning_state, budget_tokens=i.budget_tokens, rule=i.rule)
         for mid, i in identities.items()],
        columns=REGISTRY_MODEL_IDS_COLUMNS,
    ).sort_values("model_id", kind="stable").reset_index(drop=True)
    ids_table["budget_tokens"] = ids_table["budget_tokens"].astype("Int64")

    audit.extend(_audit_identifiers(pub, identities, rules, overrides))
    models_table, fact_audit = _registry_models(pub, identities, rules, overrides)
    audit.extend(fact_audit)
    audit_table = pd.DataFrame(audit, columns=AUDIT_REGISTRY_COLUMNS)
    audit_table = audit_table.sort_values(["kind", "subject", "source", "file"], kind="stable").reset_index(drop=True)
    return ids_table, models_table, audit_table


def _unknown_suffixes_of_set_models(
    identities: Mapping[str, ModelIdentity], rules: ReasoningRules, overrides: ModelOverrides
) -> dict[str, ModelIdentity]:
    """Identifiers read as a bare name whose '_<word>' suffix sits on a model published with settings.

    'gpt-5.4-2026-03-05_ultra' alone looks like a name; beside 'gpt-5.4-2026-03-05_high' it is an
    unknown setting of gpt-5.4-2026-03-05 (reasoning_rules.yaml unrecognized_setting_suffix).
    """
    with_settings = {
        ident.model for ident in identities.values()
        if ident.model is not None and set(ident.rule.split("+")) & rules.suffix_rule_ids
    }
    found = {}
    for mid, ident in identities.items():
        if not ident.rule.endswith(RULE_NO_SETTING):
            continue
        unknown = _unknown_setting_suffix(_apply(rules.cleanup, str(mid), []), rules)
        if unknown is None:
            continue
        stem = normalize_model_id(unknown[0], rules=rules, overrides=overrides)
        if stem.model in with_settings and stem.rule.endswith(RULE_NO_SETTING):
            rule = stem.rule[: -len(RULE_NO_SETTING)] + rules.unknown_suffix_rule
            found[mid] = ModelIdentity(stem.model, None, None, rule)
    return found


def _audit_identifiers(
    pub: pd.DataFrame, identities: Mapping[str, ModelIdentity], rules: ReasoningRules, overrides: ModelOverrides
) -> list[dict[str, Any]]:
    audit = []
    for (mid, source, file), rows in pub.groupby(["model_id", "source", "file"], dropna=False, sort=True):
        ident = identities[mid]
        names = sorted({n for n in map(_clean_text, rows["model_name"]) if n and n != mid})
        seen_as = f" Published names: {'; '.join(repr(n) for n in names[:5])}." if names else ""
        where = f"{source}/{file} ({len(rows)} row(s))"
        if ident.model is None:
            if ident.rule.endswith(RULE_SWE_BENCH_UNCONFIRMED):
                reason = ("SWE-bench identifier not published by any other source nor listed in models.yaml "
                          "(swe_bench_models / aliases); a result name without a single Model tag is a system, not a model")
            elif ident.rule.endswith("_unconfirmed_model"):
                reason = (f"{ident.rule.rsplit('+', 1)[-1].removesuffix('_unconfirmed_model')} name whose model "
                          f"({ident.rule}) no source that needs no confirmation publishes and models.yaml does not "
                          "list (aliases / swe_bench_models): audited, not made a new model")
            else:
                reason = f"rule {ident.rule}"
            audit.append(dict(kind="unknown_model_id", subject=mid, source=source, file=file,
                              detail=f"{reason}. In {where}.{seen_as}"))
        elif ident.reasoning_state is None:
            last_rule = ident.rule.split("+")[-1]
            why = rules.why_by_rule.get(last_rule) or last_rule
            if last_rule == rules.unknown_suffix_rule:
                unknown = _unknown_setting_suffix(_apply(rules.cleanup, str(mid), []), rules)
                why = f"setting {unknown[1]!r} is in no rule. {why}" if unknown else why
            audit.append(dict(kind="unknown_reasoning_label", subject=mid, source=source, file=file,
                              detail=f"model {ident.model}, state left NULL by rule {ident.rule}: {why} In {where}.{seen_as}"))
        moving = overrides.moving_api_aliases.get(str(mid).strip().lower())
        if moving and source != moving[0]:
            audit.append(dict(kind="ambiguous_model_id", subject=mid, source=source, file=file,
                              detail=f"moving API alias mapped to {ident.model} as {moving[0]} publishes it; "
                                     f"this {source} row may mean an earlier model: {moving[1]} In {where}."))
    return audit


def _registry_models(
    pub: pd.DataFrame, identities: Mapping[str, ModelIdentity], rules: ReasoningRules, overrides: ModelOverrides
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    ids_by_model: dict[str, list[str]] = {}
    for mid, ident in identities.items():
        if ident.model is not None:
            ids_by_model.setdefault(ident.model, []).append(mid)
    fact_rows = pub[~pub["source"].isin(list(overrides.facts_ignored_from_sources)) & pub["model"].notna()]
    fact_rows_by_model = {m: g for m, g in fact_rows.groupby("model")}

    rows, audit = [], []
    for model in sorted(ids_by_model):
        curated = overrides.model_facts.get(model, {})
        group = fact_rows_by_model.get(model, pub.iloc[0:0])
        row: dict[str, Any] = dict(model=model, n_identifiers=len(ids_by_model[model]))

        names = [_display_from_name(n, rules) for n in map(_clean_text, group["model_name"]) if n]
        ids = sorted(ids_by_model[model])
        row["display_name"] = curated.get("display_name") or (
            _most_common(names)[0] if names else _display_from_id(ids[0], rules)
        )
        for fact, clean in (("organization", _clean_text), ("released_on", _as_date)):
            values = [v for v in map(clean, group[fact]) if v is not None]
            if fact in curated:
                row[fact] = curated[fact]
                continue
            if not values:
                row[fact] = None
                continue
            chosen, counts = _most_common(values)
            row[fact] = chosen
            if len(counts) > 1:
                listed = "; ".join(f"{v!s} x{n}" for v, n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0]))))
                sources = sorted(set(group["source"].dropna()))
                audit.append(dict(kind="conflicting_model_fact", subject=model, source=",".join(sources) or None,
                                  file=None, detail=f"{fact}: published values {listed}; chose {chosen!s} "
                                                    f"(most common; set models.yaml models.{model}.{fact} to decide)"))
        rows.append(row)
    table = pd.DataFrame(rows, columns=REGISTRY_MODELS_COLUMNS)
    table["n_identifiers"] = table["n_identifiers"].astype("int64")
    return table, audit
