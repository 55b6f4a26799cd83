"""Model registry: published identifiers -> canonical model + normalized reasoning state.

Table-driven cases from the real identifiers (atlas_assets/config/reasoning_rules.yaml, models.yaml),
plus one test over every identifier in /work/shared/data that prints the counts quoted in
docs/reasoning_states.md.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from atlas_assets.registry.model_ids import (
    AUDIT_REGISTRY_COLUMNS,
    REASONING_STATES,
    REGISTRY_MODEL_IDS_COLUMNS,
    REGISTRY_MODELS_COLUMNS,
    RegistryConfigError,
    build_model_registry,
    load_model_overrides,
    load_reasoning_rules,
    normalize_model_id,
    swe_bench_model_id,
)

SHARED_DATA = Path(os.environ.get("ATLAS_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))
EPOCH_DIR = SHARED_DATA / "epoch-benchmarking-hub"
SWE_BENCH_JSON = SHARED_DATA / "swe-bench-leaderboards" / "leaderboards.json"

# (published identifier, model, state, budget_tokens, rule that must appear in `rule`)
CASES = [
    # effort ladder suffixes
    ("gpt-5.2-2025-12-11_xhigh", "gpt-5.2-2025-12-11", "xhigh", None, "epoch_effort_suffix"),
    ("o1-2024-12-17_low", "o1-2024-12-17", "low", None, "epoch_effort_suffix"),
    ("gpt-5-2025-08-07_minimal", "gpt-5-2025-08-07", "minimal", None, "epoch_effort_suffix"),
    ("claude-opus-4-6_max", "claude-opus-4-6", "max", None, "epoch_effort_suffix"),
    ("chutes/gpt-oss-120b_high", "gpt-oss-120b", "high", None, "epoch_effort_suffix"),
    # budgets: 1K/2K low, 8K/12K medium, >=15K high (geometric midpoints of Google's 1K/8K/24K anchors)
    ("claude-3-7-sonnet-20250219_64K", "claude-3-7-sonnet-20250219", "high", 64000, "epoch_budget_suffix"),
    ("claude-3-7-sonnet-20250219_1K", "claude-3-7-sonnet-20250219", "low", 1000, "budget_band"),
    ("claude-3-7-sonnet-20250219_2K", "claude-3-7-sonnet-20250219", "low", 2000, "budget_band"),
    ("claude-3-7-sonnet-20250219_8K", "claude-3-7-sonnet-20250219", "medium", 8000, "budget_band"),
    ("claude-3-7-sonnet-20250219_12K", "claude-3-7-sonnet-20250219", "medium", 12000, "budget_band"),
    ("claude-3-7-sonnet-20250219_15K", "claude-3-7-sonnet-20250219", "high", 15000, "budget_band"),
    ("claude-sonnet-4-20250514_59K", "claude-sonnet-4-20250514", "high", 59000, "budget_band"),
    ("gemini-2.5-flash-preview-09-2025_16k", "gemini-2.5-flash-preview-09-2025", "high", 16000, "budget_band"),
    ("QwQ-32B (16K thinking)", "qwq-32b", "high", 16000, "paren_budget_thinking"),
    ("gemini-2.5-flash-preview-04-17 (24K thinking)", "gemini-2.5-flash-preview-04-17", "high", 24000, "paren_budget_thinking"),
    # off-ladder states
    ("DeepSeek-V3.2-Exp_thinking", "deepseek-v3.2-exp", "enabled", None, "epoch_thinking_suffix"),
    ("glm-4.5_thinking", "glm-4.5", "enabled", None, "epoch_thinking_suffix"),
    ("gpt-5.1-2025-11-13_none", "gpt-5.1-2025-11-13", "disabled", None, "epoch_none_suffix"),
    ("grok-4-1-fast-non-reasoning", "grok-4-1-fast", "disabled", None, "dash_non_reasoning_suffix"),
    ("grok-4-1-fast-reasoning", "grok-4-1-fast", "enabled", None, "dash_reasoning_suffix"),
    ("gemini-2.5-flash-lite-preview-06-17-thinking", "gemini-2.5-flash-lite-preview-06-17", "enabled", None, "dash_thinking_suffix"),
    ("claude-3-7-sonnet-20250219", "claude-3-7-sonnet-20250219", "default", None, "no_setting_named"),
    # _unknown / web app: model known, setting NOT guessed
    ("claude-opus-4-6_unknown", "claude-opus-4-6", None, None, "epoch_unknown_suffix"),
    ("o3-2025-04-16_unknown", "o3-2025-04-16", None, None, "epoch_unknown_suffix"),
    ("gpt-5.2-pro-2025-12-11-webapp", "gpt-5.2-pro-2025-12-11", None, None, "web_app_suffix"),
    # separate reasoning products are their own model, state default
    ("o1-mini-2024-09-12_high", "o1-mini-2024-09-12", "high", None, "epoch_effort_suffix"),
    ("QwQ-32B", "qwq-32b", "default", None, "no_setting_named"),
    ("DeepSeek-R1", "deepseek-r1", "default", None, "no_setting_named"),
    ("kimi-k2-thinking", "kimi-k2-thinking", "default", None, "reasoning_product"),
    ("moonshotai/Kimi-K2-Thinking", "kimi-k2-thinking", "default", None, "reasoning_product"),
    ("Qwen3-235B-A22B-Thinking-2507", "qwen3-235b-a22b-thinking-2507", "default", None, "reasoning_product"),
    ("gemini-2.0-flash-thinking-exp-01-21", "gemini-2.0-flash-thinking-exp-01-21", "default", None, "reasoning_product"),
    # provider prefixes, case, whitespace, host spellings
    ("Qwen/Qwen2.5-72B", "qwen2.5-72b", "default", None, "provider_prefix"),
    ("qwen/qwen2.5-72b", "qwen2.5-72b", "default", None, "provider_prefix"),
    ("Qwen2.5-72B", "qwen2.5-72b", "default", None, "no_setting_named"),
    ("chutes/GLM-4.5-FP8", "glm-4.5", "default", None, "strip_fp8_quantization"),
    ("Llama-4-Maverick-17B-128E-Instruct-FP8", "llama-4-maverick-17b-128e-instruct", "default", None, "strip_fp8_quantization"),
    ("chutes/Llama-4-Scout-17B-16E Instruct", "llama-4-scout-17b-16e-instruct", "default", None, "provider_prefix"),
    ("parasail-qwen3-235b-a22b-instruct-2507", "qwen3-235b-a22b-instruct-2507", "default", None, "provider_prefix"),
    ("fireworks/kimi-k2p5", "kimi-k2.5", "default", None, "fireworks_p_decimal"),
    ("Llama-2-70b-hf ", "llama-2-70b-hf", "default", None, "strip_whitespace"),
    # DeepSeek V3.2 API names: the identifier does not show the model, Epoch's ECI rows do
    ("fireworks/deepseek-v3p2", "deepseek-v3.2", "enabled", None, "identifier_override"),
    ("deepseek/deepseek-v3.2", "deepseek-v3.2", "enabled", None, "identifier_override"),
    ("deepseek-chat", "deepseek-v3.2", "disabled", None, "identifier_override"),
    ("DeepSeek-V3.2-Speciale", "deepseek-v3.2-speciale", "default", None, "no_setting_named"),
    # not settings: part of the model name
    ("Qwen-1_8B", "qwen-1_8b", "default", None, "no_setting_named"),
    ("Chinchilla (70B)", "chinchilla-70b", "default", None, "no_setting_named"),
    ("Gopher (280B)", "gopher-280b", "default", None, "no_setting_named"),
    ("GLaM (MoE)", "glam-moe", "default", None, "no_setting_named"),
    ("VideoChat-Flash-Qwen2-7B_res448", "videochat-flash-qwen2-7b_res448", "default", None, "no_setting_named"),
    ("video_chat2_mistral", "video_chat2_mistral", "default", None, "no_setting_named"),
    ("deepseek-coder-6.7b-base", "deepseek-coder-6.7b-base", "default", None, "no_setting_named"),
    ("Mistral-7B-Instruct-v0.1", "mistral-7b-instruct-v0.1", "default", None, "no_setting_named"),
    ("InternVL2_5-78B", "internvl2_5-78b", "default", None, "no_setting_named"),
    ("MiniCPM-V-2_6", "minicpm-v-2_6", "default", None, "no_setting_named"),
    ("MiniMax-M1-80k", "minimax-m1-80k", "default", None, "no_setting_named"),
    ("gpt-5.1-codex-max", "gpt-5.1-codex-max", "default", None, "no_setting_named"),
    ("magistral-medium-2506", "magistral-medium-2506", "default", None, "no_setting_named"),
    # dated snapshots stay distinct
    ("gpt-4o-2024-05-13", "gpt-4o-2024-05-13", "default", None, "no_setting_named"),
    ("gpt-4o-2024-11-20", "gpt-4o-2024-11-20", "default", None, "no_setting_named"),
    # SWE-bench tag spellings
    ("claude-4-opus-20250514", "claude-opus-4-20250514", "default", None, "claude_family_order"),
    ("claude-3.5-sonnet-20241022", "claude-3-5-sonnet-20241022", "default", None, "claude_dotted_version"),
    ("o3-20250416", "o3-2025-04-16", "default", None, "openai_compact_date"),
    ("gpt-4o-20241120", "gpt-4o-2024-11-20", "default", None, "openai_compact_date"),
    ("https://huggingface.co/zai-org/GLM-4.6", "glm-4.6", "default", None, "strip_url_prefix"),
    ("claude-opus-4-5-20251101 (high reasoning)", "claude-opus-4-5-20251101", "high", None, "paren_effort_reasoning"),
    ("claude-opus-4-5-20251101 (medium)", "claude-opus-4-5-20251101", "medium", None, "paren_effort"),
    ("deepseek-v3.2-reasoner", "deepseek-v3.2", "enabled", None, "identifier_override"),
    # names used as identifiers (rows with a blank 'Model version')
    ("GLaM (64B/64E) (16-shot)", "glam-64b/64e", "default", None, "strip_shot_count"),
    ("o3-preview (Low)*", "o3-preview", "low", None, "paren_effort"),
    ("GPT-5.1 (Low)", "gpt-5.1-2025-11-13", "low", None, "alias"),
]


@pytest.mark.parametrize("model_id, model, state, budget, rule", CASES, ids=[c[0] for c in CASES])
def test_normalize_model_id(model_id, model, state, budget, rule):
    identity = normalize_model_id(model_id)
    assert (identity.model, identity.reasoning_state, identity.budget_tokens) == (model, state, budget), identity
    assert rule in identity.rule.split("+"), identity.rule


def test_states_are_the_contract_states():
    assert set(REASONING_STATES) == {"default", "minimal", "low", "medium", "high", "xhigh", "max", "disabled", "enabled"}
    for model_id, *_ in CASES:
        assert normalize_model_id(model_id).reasoning_state in set(REASONING_STATES) | {None}


def test_same_snapshot_collapses_distinct_snapshots_do_not():
    models = {normalize_model_id(i).model for i in ["o3-2025-04-16_high", "o3-2025-04-16_low", "o3-2025-04-16_unknown", "o3-20250416"]}
    assert models == {"o3-2025-04-16"}
    assert normalize_model_id("gpt-4o-2024-05-13").model != normalize_model_id("gpt-4o-2024-08-06").model
    # Not over-merged: different releases that share a stem
    distinct = ["DeepSeek-V3.2-Exp", "DeepSeek-V3.2-Speciale", "deepseek/deepseek-v3.2", "DeepSeek-V3.1", "DeepSeek-V3",
                "grok-3-mini_high", "grok-3-mini-beta_high", "gemini-2.5-pro", "gemini-2.5-pro-preview-06-05", "gpt-5-chat",
                "gpt-5-2025-08-07_high", "kimi-k2-thinking", "Kimi-K2-Instruct", "Kimi-K2-Instruct-0905"]
    assert len({normalize_model_id(i).model for i in distinct}) == len(distinct)


def test_reasoning_label_on_model_without_reasoning_is_not_trusted():
    identity = normalize_model_id("gpt-4o-2024-11-20_high")
    assert identity.model == "gpt-4o-2024-11-20" and identity.reasoning_state is None


def test_unrecognized_reasoning_word_is_not_guessed():
    identity = normalize_model_id("some-model-deepthink-v1")
    assert identity.reasoning_state is None and identity.rule.endswith("unrecognized_reasoning_word")


def test_blank_identifier():
    assert normalize_model_id("   ") == normalize_model_id(None) and normalize_model_id("").model is None


SWE_BENCH_CASES = [
    (  # one Model tag, reasoning label in the name
        {"name": "mini-SWE-agent + GPT-5 (2025-08-07) (medium reasoning)",
         "tags": ["Model: gpt-5-2025-08-07", "Org: OpenAI", "Org: SWE-agent", "System: Attempts - 1"]},
        ("gpt-5-2025-08-07 (medium reasoning)", "medium reasoning", None),
        ("gpt-5-2025-08-07", "medium"),
    ),
    (  # effort word between model name and date
        {"name": "Claude 4.5 Opus medium (20251101)", "tags": ["Model: claude-opus-4-5-20251101", "Org: Anthropic"]},
        ("claude-opus-4-5-20251101 (medium)", "medium", None),
        ("claude-opus-4-5-20251101", "medium"),
    ),
    (  # the brief's example label
        {"name": "mini-SWE-agent + Claude 4.5 Opus (high reasoning)", "tags": ["Model: claude-opus-4-5-20251101"]},
        ("claude-opus-4-5-20251101 (high reasoning)", "high reasoning", None),
        ("claude-opus-4-5-20251101", "high"),
    ),
    (  # no label: the tag; stringified tag list as in older site data; Hugging Face URL tag
        {"name": "GLM-4.6", "tags": "['Model: https://huggingface.co/zai-org/GLM-4.6', 'Org: Z.ai']"},
        ("https://huggingface.co/zai-org/GLM-4.6", None, None),
        ("glm-4.6", "default"),
    ),
    (  # 'Model_size:' is not a Model tag; '(T=1)' is not a reasoning label
        {"name": "GLM-4.6 (T=1)", "tags": ["Model: glm-4.6", "Model_size: 355"]},
        ("glm-4.6", None, None),
        ("glm-4.6", "default"),
    ),
    (  # several models: the name, with the problem
        {"name": "Warp", "tags": ["Model: gpt-5", "Model: claude-sonnet-4-20250514", "Org: Warp"]},
        ("Warp", None, "several_model_tags: gpt-5; claude-sonnet-4-20250514"),
        None,
    ),
    (  # two spellings of one model are one model
        {"name": "Tools + Claude 3.5 Sonnet (2024-10-22)",
         "tags": ["Model: claude-3-5-sonnet-20241022", "Model: claude-3.5-sonnet-20241022", "Org: Anthropic"]},
        ("claude-3-5-sonnet-20241022", None, None),
        ("claude-3-5-sonnet-20241022", "default"),
    ),
    (  # no model at all
        {"name": "Honeycomb", "tags": []},
        ("Honeycomb", None, "no_model_tag"),
        None,
    ),
]


@pytest.mark.parametrize("result, expected, identity", SWE_BENCH_CASES, ids=[c[0]["name"] for c in SWE_BENCH_CASES])
def test_swe_bench_model_id(result, expected, identity):
    assert swe_bench_model_id(result) == expected
    if identity is not None:
        got = normalize_model_id(expected[0], display_name=result["name"], source="swe_bench")
        assert (got.model, got.reasoning_state) == identity


def _published(rows):
    return pd.DataFrame(rows, columns=["model_id", "model_name", "organization", "released_on", "source", "file"])


def test_build_model_registry_tables_and_audit():
    published = _published([
        ("claude-opus-4-5-20251101_32K", "Claude Opus 4.5 (32k thinking)", "Anthropic", "2025-11-24", "epoch_hub", "gpqa_diamond.csv"),
        ("claude-opus-4-5-20251101_32K", "Claude Opus 4.5 (32k thinking)", "Anthropic", "2025-11-24", "epoch_hub", "hle.csv"),
        ("claude-opus-4-5-20251101", "Claude Opus 4.5", "Anthropic", "2025-11-24", "epoch_hub", "gpqa_diamond.csv"),
        ("claude-opus-4-5-20251101_unknown", "Opus 4.5 (High)", "Anthropic", "2025-11-01", "epoch_hub", "aider.csv"),
        ("claude-opus-4-5-20251101 (high reasoning)", "mini-SWE-agent + Claude 4.5 Opus (high reasoning)", "SWE-agent",
         "2025-12-01", "swe_bench", "leaderboards.json:Verified"),
        ("Honeycomb", "Honeycomb", None, None, "swe_bench", "leaderboards.json:Verified"),
        ("deepseek-chat", "Moatless Tools + Deepseek V3", None, None, "swe_bench", "leaderboards.json:Lite"),
        ("deepseek-chat", None, "DeepSeek", date(2025, 12, 1), "epoch_hub", "epoch_capabilities_index.csv"),
        (None, None, None, None, "epoch_hub", "os_world_external.csv"),
    ])
    ids, models, audit = build_model_registry(published)
    assert list(ids.columns) == REGISTRY_MODEL_IDS_COLUMNS
    assert list(models.columns) == REGISTRY_MODELS_COLUMNS
    assert list(audit.columns) == AUDIT_REGISTRY_COLUMNS
    assert ids["model_id"].is_unique

    by_id = ids.set_index("model_id")
    assert by_id.at["claude-opus-4-5-20251101 (high reasoning)", "model"] == "claude-opus-4-5-20251101"
    assert by_id.at["claude-opus-4-5-20251101 (high reasoning)", "reasoning_state"] == "high"
    assert by_id.at["claude-opus-4-5-20251101_32K", "budget_tokens"] == 32000
    assert pd.isna(by_id.at["Honeycomb", "model"])

    opus = models.set_index("model").loc["claude-opus-4-5-20251101"]
    assert opus["n_identifiers"] == 4
    assert opus["display_name"] == "Claude Opus 4.5"
    assert opus["organization"] == "Anthropic"  # SWE-bench 'Org:' (the submitter) is not a model fact
    assert opus["released_on"] == date(2025, 11, 24)  # most common; the conflict is audited

    kinds = {(row.kind, row.subject) for row in audit.itertuples()}
    assert ("unknown_reasoning_label", "claude-opus-4-5-20251101_unknown") in kinds
    assert ("unknown_model_id", "Honeycomb") in kinds
    assert ("unknown_model_id", "") in kinds
    assert ("ambiguous_model_id", "deepseek-chat") in kinds
    assert ("conflicting_model_fact", "claude-opus-4-5-20251101") in kinds
    unknown_label = audit[audit["subject"] == "claude-opus-4-5-20251101_unknown"].iloc[0]
    assert unknown_label["source"] == "epoch_hub" and unknown_label["file"] == "aider.csv"
    assert "epoch_hub/aider.csv" in unknown_label["detail"] and "Opus 4.5 (High)" in unknown_label["detail"]


def test_build_model_registry_rejects_missing_columns():
    with pytest.raises(ValueError, match="missing columns"):
        build_model_registry(pd.DataFrame({"model_id": ["x"]}))


def test_config_errors_name_file_and_key(tmp_path):
    bad = tmp_path / "models.yaml"
    bad.write_text("aliases:\n  foo: {why: 'no model key'}\n")
    with pytest.raises(RegistryConfigError, match=r"models\.yaml: aliases\.foo: missing key 'model'"):
        load_model_overrides(bad)
    rules = tmp_path / "reasoning_rules.yaml"
    rules.write_text("states: {ladder: [low, high]}\n")
    with pytest.raises(RegistryConfigError, match=r"reasoning_rules\.yaml: states\.ladder"):
        load_reasoning_rules(rules)
    with pytest.raises(RegistryConfigError, match="file not found"):
        load_reasoning_rules(tmp_path / "absent.yaml")


def test_not_settings_examples_in_rules_file_are_left_alone():
    rules = load_reasoning_rules()
    assert rules.not_settings
    for example in rules.not_settings:
        identity = normalize_model_id(example)
        assert identity.reasoning_state == "default" and identity.rule.endswith("no_setting_named"), (example, identity)


# --------------------------------------------------------------------------------------------
# Every real identifier


def _real_published() -> pd.DataFrame:
    """Published identifiers the way the ingest reads them: 'Model version', else the row's 'Name'."""
    rows = []
    for path in sorted(EPOCH_DIR.glob("*.csv")):
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        if "Model version" not in frame.columns:
            continue
        name_column = "Name" if "Name" in frame.columns else ("Display name" if "Display name" in frame.columns else None)
        for record in frame.to_dict("records"):
            name = record.get(name_column, "") if name_column else ""
            model_id = record["Model version"] if record["Model version"].strip() else name
            rows.append((model_id or None, name or None, record.get("Organization") or None,
                         record.get("Release date") or None, "epoch_hub", path.name))
    document = json.loads(SWE_BENCH_JSON.read_text(encoding="utf-8"))
    for board in document["leaderboards"]:
        for result in board["results"]:
            model_id, _label, _problem = swe_bench_model_id(result)
            orgs = [t.split(":", 1)[1].strip() for t in result.get("tags", []) if t.startswith("Org:")]
            rows.append((model_id, result.get("name"), orgs[0] if orgs else None, result.get("date"),
                         "swe_bench", f"leaderboards.json:{board['name']}"))
    return _published(rows)


def test_every_real_identifier_is_mapped_or_audited():
    if not (EPOCH_DIR.is_dir() and SWE_BENCH_JSON.is_file()):
        pytest.skip(f"real data not found under {SHARED_DATA} (set ATLAS_SHARED_DATA)")
    published = _real_published()
    ids, models, audit = build_model_registry(published)

    assert ids["model_id"].is_unique
    assert set(published["model_id"].dropna()) == set(ids["model_id"])
    audited = set(audit.loc[audit["kind"].isin(["unknown_model_id", "unknown_reasoning_label"]), "subject"])
    decided = ids["model"].notna() & ids["reasoning_state"].notna()
    assert ids["reasoning_state"].dropna().isin(REASONING_STATES).all()
    undecided_unaudited = sorted(set(ids.loc[~decided, "model_id"]) - audited)
    assert not undecided_unaudited, undecided_unaudited
    assert set(ids["model"].dropna()) == set(models["model"])
    assert models["n_identifiers"].sum() == ids["model"].notna().sum()
    assert {"epoch_hub", "swe_bench"} >= set(audit["source"].dropna().str.split(",").explode())
    assert audit["detail"].notna().all()

    # The brief's collapses on the real data
    model_of = ids.set_index("model_id")["model"]
    assert model_of["claude-opus-4-5-20251101_32K"] == model_of["claude-opus-4-5-20251101 (medium)"]
    assert model_of["Qwen/Qwen3-235B-A22B-Thinking-2507"] == model_of["qwen/qwen3-235b-a22b-thinking-2507"]
    assert model_of["fireworks/deepseek-v3p2"] == model_of["deepseek/deepseek-v3.2"] != model_of["DeepSeek-V3.2-Exp"]

    sources = published.groupby("model_id")["source"].agg(lambda s: ",".join(sorted(set(s))))
    per_source = ids.assign(source=ids["model_id"].map(sources))
    print("\n== registry on the real data ==")
    print(f"identifiers: {len(ids)} ({per_source['source'].value_counts().to_dict()}); models: {len(models)}")
    print(f"decided (model + state): {int(decided.sum())}; audited: {int((~decided).sum())}")
    print("ids per state:", ids["reasoning_state"].fillna("NULL").value_counts().to_dict())
    print("ids with a budget:", int(ids["budget_tokens"].notna().sum()))
    print("audit rows by kind:", audit["kind"].value_counts().to_dict())
    undecided = ids[~decided].assign(reason=lambda f: f["rule"].str.split("+").str[-1])
    print("undecided ids by reason:", undecided["reason"].value_counts().to_dict())
    print("top rules:", Counter(r for rule in ids["rule"] for r in rule.split("+")).most_common(12))


# --- issue 7 item 6: no-thinking rows of a model without a reasoning mode are its default state
@pytest.mark.parametrize("model_id, model", [
    ("gpt-4o-2024-11-20 (no thinking)", "gpt-4o-2024-11-20"),
    ("gpt-4.1-2025-04-14_none", "gpt-4.1-2025-04-14"),
    ("gpt-5-chat-non-reasoning", "gpt-5-chat"),
])
def test_no_thinking_rows_of_a_model_without_reasoning_mode_are_its_default(model_id, model):
    identity = normalize_model_id(model_id)
    assert (identity.model, identity.reasoning_state) == (model, "default"), identity
    assert "no_reasoning_mode_off_is_default" in identity.rule.split("+"), identity.rule


def test_no_thinking_rows_of_a_reasoning_model_stay_disabled():
    # Reasoning models keep 'disabled' as an off-ladder state of their own (docs/reasoning_states.md).
    for model_id in ("gpt-5.1-2025-11-13_none", "deepseek-chat", "grok-4-1-fast-non-reasoning"):
        assert normalize_model_id(model_id).reasoning_state == "disabled", model_id


# --- issue 7 item 12: an unrecognized setting suffix is an unknown label, never a new model
def test_setting_like_suffix_is_an_unknown_label_not_a_model():
    identity = normalize_model_id("gpt-5.4-2026-03-05_xxhigh")
    assert (identity.model, identity.reasoning_state) == ("gpt-5.4-2026-03-05", None), identity
    assert identity.rule.endswith("unrecognized_setting_suffix")


def test_unknown_suffix_on_a_model_published_with_settings_is_audited_not_a_new_model():
    published = _published([
        ("gpt-5.4-2026-03-05_high", None, "OpenAI", "2026-03-05", "epoch_hub", "gpqa_diamond.csv"),
        ("gpt-5.4-2026-03-05_ultra", None, "OpenAI", "2026-03-05", "epoch_hub", "gpqa_diamond.csv"),
        # '_Base' on a name never published with a setting is part of the name (a model size).
        ("DPMM-CoT_Base", None, None, None, "epoch_hub", "science_qa_external.csv"),
        ("video_chat2_mistral", None, None, None, "epoch_hub", "video_mme_external.csv"),
    ])
    ids, models, audit = build_model_registry(published)
    by_id = ids.set_index("model_id")
    assert by_id.at["gpt-5.4-2026-03-05_ultra", "model"] == "gpt-5.4-2026-03-05"
    assert pd.isna(by_id.at["gpt-5.4-2026-03-05_ultra", "reasoning_state"])
    assert by_id.at["gpt-5.4-2026-03-05_ultra", "rule"].endswith("unrecognized_setting_suffix")
    assert "gpt-5.4-2026-03-05_ultra" not in set(models["model"])
    row = audit[audit["subject"] == "gpt-5.4-2026-03-05_ultra"]
    assert list(row["kind"]) == ["unknown_reasoning_label"]
    assert "'ultra'" in row.iloc[0]["detail"] and "epoch_hub/gpqa_diamond.csv" in row.iloc[0]["detail"]
    assert by_id.at["DPMM-CoT_Base", "reasoning_state"] == "default"
    assert by_id.at["video_chat2_mistral", "model"] == "video_chat2_mistral"


# --------------------------------------------------------------------------------------------
# Issue 11: identifiers of Aider, tau2-bench and ARC Prize

from atlas_assets.registry.model_ids import arc_prize_model_id, setting_label, with_setting  # noqa: E402


@pytest.mark.parametrize("arc_id, identifier, model, state, budget", [
    ("gpt-5-2025-08-07-high", "gpt-5-2025-08-07 (high)", "gpt-5-2025-08-07", "high", None),
    ("gpt-5-2-2025-12-11-thinking-xhigh", "gpt-5.2-2025-12-11 (xhigh)", "gpt-5.2-2025-12-11", "xhigh", None),
    ("gpt-5-1-2025-11-13-thinking-none", "gpt-5.1-2025-11-13 (no thinking)", "gpt-5.1-2025-11-13", "disabled", None),
    ("claude-opus-4-5-20251101-thinking-32k", "claude-opus-4-5-20251101 (32K thinking)", "claude-opus-4-5-20251101", "high", 32000),
    ("claude-opus-4-6-thinking-120K-max", "claude-opus-4-6 (max)", "claude-opus-4-6", "max", None),
    ("claude_sonnet_4_6_max", "claude-sonnet-4-6 (max)", "claude-sonnet-4-6", "max", None),
    ("anthropic-opus-4-6-max-effort", "opus-4-6 (max)", "claude-opus-4-6", "max", None),
    ("Claude 3.7 Thinking 16K", "Claude 3.7 (16K thinking)", "claude-3-7-sonnet-20250219", "high", 16000),
    ("claude-sonnet-4-20250514-thinking-8k-bedrock", "claude-sonnet-4-20250514 (8K thinking)", "claude-sonnet-4-20250514", "medium", 8000),
    ("grok-3-mini-beta-low-openrouter", "grok-3-mini-beta (low)", "grok-3-mini-beta", "low", None),
    ("gpt-5-4-mini-high", "gpt-5.4-mini (high)", "gpt-5.4-mini-2026-03-17", "high", None),
    ("magistral-medium-2506", "magistral-medium-2506", "magistral-medium-2506", "default", None),
])
def test_arc_prize_ids_name_model_and_state(arc_id, identifier, model, state, budget):
    assert arc_prize_model_id(arc_id) == identifier
    got = normalize_model_id(identifier)
    assert (got.model, got.reasoning_state, got.budget_tokens) == (model, state, budget)


def test_settings_published_in_fields_join_the_name_and_contradictions_are_named():
    assert setting_label(effort="high") == ("high", None)
    assert setting_label(effort="none") == ("no thinking", None)
    assert setting_label(effort="enabled") == ("thinking", None)
    assert setting_label(budget_tokens=0) == ("no thinking", None)
    assert setting_label(effort="turbo")[1] == "reasoning effort 'turbo' is not a known setting"
    assert with_setting("GPT-5.2", "high") == ("GPT-5.2 (high)", None)
    assert with_setting("gpt-5 (high)", "high") == ("gpt-5 (high)", None)
    identifier, problem = with_setting("gpt-5 (high)", "low")
    assert identifier == "gpt-5 (high)" and "'high'" in problem and "'low'" in problem
    # Aider's own spellings
    for name, state in [("gemini-2.5-flash-preview-05-20 (no think)", "disabled"),
                        ("claude-3-7-sonnet-20250219 (32k thinking tokens)", "high"),
                        ("DeepSeek-V3.2-Exp (Reasoner)", "enabled"), ("DeepSeek-V3.2-Exp (Chat)", "disabled"),
                        ("gemini-2.5-flash-preview-04-17 (default)", "default")]:
        assert normalize_model_id(name).reasoning_state == state, name


def test_names_of_free_text_sources_are_confirmed_or_audited_never_new_models():
    published = _published([
        ("gpt-5-2025-08-07_high", None, "OpenAI", "2025-08-07", "epoch_hub", "gpqa_diamond.csv"),
        ("gpt-5-2025-08-07 (high)", "GPT-5 (High)", "OpenAI", "2025-08-07", "arc_prize", "evaluations.json:v1_Semi_Private"),
        ("GPT-5.2 (high)", "GPT-5.2", "OpenAI", "2025-12-11", "tau2_bench", "submissions:airline"),  # alias in models.yaml
        ("Claude Fable 5 (max)", "Claude Fable 5", "Anthropic", "2026-07-01", "tau2_bench", "submissions:airline"),
        ("Quasar Alpha", "Quasar Alpha", None, None, "aider", "polyglot_leaderboard.yml"),
    ])
    ids, models, audit = build_model_registry(published)
    got = {r.model_id: (r.model if isinstance(r.model, str) else None,
                        r.reasoning_state if isinstance(r.reasoning_state, str) else None, r.rule) for r in ids.itertuples()}
    assert got["gpt-5-2025-08-07 (high)"][:2] == ("gpt-5-2025-08-07", "high")
    assert got["GPT-5.2 (high)"][:2] == ("gpt-5.2-2025-12-11", "high")
    assert got["Claude Fable 5 (max)"] == (None, None, "paren_effort+tau2_bench_unconfirmed_model")
    assert got["Quasar Alpha"] == (None, None, "no_setting_named+aider_unconfirmed_model")
    assert "claude-fable-5" not in set(models["model"]) and "quasar-alpha" not in set(models["model"])
    unknown = audit[audit["kind"] == "unknown_model_id"].set_index("subject")
    assert {"Claude Fable 5 (max)", "Quasar Alpha"} <= set(unknown.index)
    assert "audited, not made a new model" in unknown.loc["Quasar Alpha", "detail"]
