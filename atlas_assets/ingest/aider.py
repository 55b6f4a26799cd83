"""Parse the Aider LLM leaderboards: polyglot_leaderboard.yml and edit_leaderboard.yml (one bundle).

Each file is a YAML list of runs (PROVENANCE: ../shared/data/aider-leaderboards/PROVENANCE.md); each
run is one record for tabular.read_records, so the registry decides which fields are scores (the
headline `pass_rate_2`), costs (`total_cost`, USD for the whole run, divided by `test_cases`) and
metadata. Source-specific rules, each audited with file, row and field when it drops a row:

- Model identity: the display name `model`, with the setting the run's own fields state when the name
  states none (`reasoning_effort`; `thinking_tokens`; the `--reasoning-effort` / `--thinking-tokens`
  flags of `command`), written as '<name> (<label>)' (model_ids.with_setting). A field that
  contradicts the name's own setting is audited (`conflicting_reasoning_setting`), not resolved.
- An architect + editor pair (`edit_format: architect`, an `editor_model`, or ' + ' in the name, e.g.
  'o3 (high) + gpt-4.1') is a system of two models, not a model: audited (`multi_model_system`).
- A run that covered less than MIN_RUN_COVERAGE of the suite (registered items: 225 polyglot, 133
  code-editing; PROVENANCE lists partial edit runs of 36 and 33 cases) is audited (`partial_run`),
  and a run with more cases than the suite (the last edit row is a 225-case polyglot run) is audited
  (`run_of_another_suite`): their percentages are not scores of this benchmark's item set.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

import yaml

from atlas_assets.ingest.records import ParseOutput, ValueProblem, parse_number
from atlas_assets.ingest.tabular import read_records
from atlas_assets.registry.model_ids import setting_label, with_setting

SOURCE = "aider"
BASE_URL = "https://raw.githubusercontent.com/Aider-AI/aider/main/aider/website/_data/"
DOCUMENTS = ("polyglot_leaderboard.yml", "edit_leaderboard.yml")
URL = BASE_URL  # the bundle's URL in source_snapshots
MIN_RUN_COVERAGE = 0.9  # a run of fewer cases than this share of the suite is a partial run
_EFFORT_FLAG = re.compile(r"--reasoning-effort[ =](\S+)")
_BUDGET_FLAG = re.compile(r"--thinking-tokens[ =](\d+)([kK]?)")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _settings_from_fields(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, label) for every setting the run's fields state."""
    found = []
    effort = _text(record.get("reasoning_effort"))
    if effort is not None:
        found.append(("reasoning_effort", setting_label(effort=effort)))
    if record.get("thinking_tokens") is not None:
        try:
            tokens = parse_number(record.get("thinking_tokens"))
        except ValueProblem:
            tokens = None
        found.append(("thinking_tokens", setting_label(budget_tokens=int(tokens)) if tokens is not None else
                      (None, f"thinking_tokens {record.get('thinking_tokens')!r} is not a number")))
    command = _text(record.get("command")) or ""
    if (match := _EFFORT_FLAG.search(command)) is not None:
        found.append(("command", setting_label(effort=match.group(1))))
    if (match := _BUDGET_FLAG.search(command)) is not None:
        tokens = int(match.group(1)) * (1000 if match.group(2) else 1)
        found.append(("command", setting_label(budget_tokens=tokens)))
    return [(field, label) for field, (label, _problem) in found if label] + \
        [(field, f"!{problem}") for field, (_label, problem) in found if problem]


def aider_model_id(record: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(identifier, problem field, problem) of one run: the display name with the setting its fields state."""
    name = _text(record.get("model"))
    if name is None:
        return None, "model", "no model name"
    identifier = name
    for field, label in _settings_from_fields(record):
        if label.startswith("!"):
            return None, field, label[1:]
        identifier_with, problem = with_setting(identifier, label)
        if problem is not None:
            return None, field, f"{problem} ({field})"
        identifier = identifier_with
    return identifier, None, None


def _is_system(record: Mapping[str, Any]) -> bool:
    name = _text(record.get("model")) or ""
    return (_text(record.get("edit_format")) == "architect" or _text(record.get("editor_model")) is not None
            or " + " in name)


def _plain(value: Any) -> Any:
    """YAML 1.1 turns dates into datetime.date and all-digit commit hashes into ints; keep text."""
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


def parse_aider(documents: Mapping[str, bytes], registry, snapshot_sha256: str) -> ParseOutput:
    out = ParseOutput(source=SOURCE, snapshot_sha256=snapshot_sha256)
    items = registry.benchmarks.set_index("benchmark")["items"].to_dict()
    for name in sorted(documents):
        if registry.file_entry(SOURCE, name) is None:
            out.flag("unregistered_file", f"{SOURCE}/{name} is in the bundle but not in the registry; not read", file=name)
            continue
        out.files_seen.add(name)
        where = f"{SOURCE}/{name}"
        try:
            runs = yaml.safe_load(documents[name].decode("utf-8"))
        except (UnicodeDecodeError, yaml.YAMLError) as error:
            out.fail_file("unparsable_file", f"{where}: not valid UTF-8 YAML: {error}", file=name)
            continue
        if not runs:
            out.fail_file("empty_file", f"{where}: no runs", file=name)
            continue
        if not isinstance(runs, list):
            out.fail_file("unparsable_file", f"{where}: expected a YAML list of runs, got {type(runs).__name__}", file=name)
            continue
        scores = registry.score_columns(SOURCE, name)
        headline = scores.loc[scores["headline"], "benchmark"]
        suite = items.get(headline.iloc[0]) if len(headline) else None
        header: list[str] = []
        records = []
        for index, run in enumerate(runs, start=1):
            if not isinstance(run, dict):
                out.flag("malformed_row", f"{where} row {index}: a run must be a mapping, got {type(run).__name__}; "
                         "row skipped", file=name, row_number=index, value=run)
                continue
            run = {str(key): _plain(value) for key, value in run.items()}
            for key in run:
                if key not in header:
                    header.append(key)
            label = f"{where} row {index} ({run.get('dirname') or run.get('model')!r})"
            if _is_system(run):
                out.flag("multi_model_system", f"{label}: {run.get('model')!r} is an architect + editor pair "
                         f"(edit_format {run.get('edit_format')!r}, editor {run.get('editor_model')!r}): a system of two "
                         "models, not a model; not scored", file=name, row_number=index, field_name="model",
                         value=run.get("model"))
                continue
            try:
                cases = parse_number(run.get("test_cases"))
            except ValueProblem:
                cases = None
            if cases is not None and suite is not None and suite == suite:  # suite may be NA
                if cases > suite:
                    out.flag("run_of_another_suite", f"{label}: {cases:g} test cases, more than the {int(suite)} of "
                             "this board's suite (a run of another suite); not scored", file=name, row_number=index,
                             field_name="test_cases", value=cases)
                    continue
                if cases < MIN_RUN_COVERAGE * suite:
                    out.flag("partial_run", f"{label}: {cases:g} of the suite's {int(suite)} test cases (less than "
                             f"{MIN_RUN_COVERAGE:.0%}): a partial run is not a score of the item set; not scored",
                             file=name, row_number=index, field_name="test_cases", value=cases)
                    continue
            identifier, field, problem = aider_model_id(run)
            if identifier is None:
                reason = "missing_model_id" if field == "model" else "conflicting_reasoning_setting"
                out.flag(reason, f"{label}: {problem}; not scored", file=name, row_number=index, field_name=field,
                         value=run.get(field))
                continue
            run["__model_id"] = identifier
            records.append((index, run))

        def identify(record: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
            return record["__model_id"], _text(record.get("model")), None

        read_records(out, registry, name, header, records, identify=identify, key_columns=["model"])
    return out
