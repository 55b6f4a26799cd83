"""Parse the tau2-bench leaderboard: manifest.json and every submission.json it lists (one bundle).

PROVENANCE: ../shared/data/tau2-bench-leaderboard/PROVENANCE.md. The manifest has three lists:
`submissions` (text, current tau2 versions), `voice_submissions` (voice agents) and
`legacy_submissions` (older tau2 versions, and three of the original tau-bench). One submission
scores up to four domains (`results.<domain>.pass_1`, pass^1 in %); each (list, domain) is one
registered "file" `<list>:<domain>`, each submission one record of it, numbered by its position in
that manifest list. The record holds the submission's top-level fields, `methodology.*` and
`model_release.*` flattened, and the domain's own fields (`pass_1`..`pass_4`, `cost`,
`retrieval_config`), so the registry decides about every one.

- Model identity: `model_name` with `reasoning_effort` as its setting: 'GPT-5.2' at 'high' ->
  'GPT-5.2 (high)', at 'none' -> 'GPT-5.2 (no thinking)' (model_ids.with_setting).
- A domain present but all null (most 2026 text rows score only banking_knowledge) is not a result:
  nothing is read from it (no audit row: nothing was published).
- A legacy submission of the original tau-bench (`methodology.tau2_bench_version` 'original tau-bench')
  is another benchmark's run (tau-bench v1 tasks): audited `other_benchmark_version`, not scored.
- Verification class (seed 002), per submission: run by a maintainer of the benchmark
  (`verification.maintainers.tau2_bench` in benchmarks.yaml: Sierra) -> independent; submitted by the
  model's own organization (`submitting_organization` = `model_organization`, or listed together in
  `verification.same_organization`) -> vendor_reported; submitted by anyone else -> unverified.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from atlas_assets.ingest.records import ParseOutput
from atlas_assets.ingest.tabular import read_records
from atlas_assets.registry.model_ids import setting_label, with_setting

SOURCE = "tau2_bench"
BASE_URL = "https://raw.githubusercontent.com/sierra-research/tau2-bench/main/web/leaderboard/public/submissions/"
MANIFEST = "manifest.json"
DOCUMENTS = (MANIFEST,)
URL = BASE_URL
LISTS = ("submissions", "voice_submissions", "legacy_submissions")
DOMAINS = ("airline", "retail", "telecom", "banking_knowledge")
FLATTENED = ("methodology", "model_release")  # nested objects whose fields become '<object>.<field>'
ORIGINAL_TAU_BENCH = "original tau-bench"


class Tau2FormatError(ValueError):
    """The manifest is not the one we know; the message names the document and what differs."""


def submission_document(submission_id: str) -> str:
    return f"{submission_id}/submission.json"


def _manifest(documents: Mapping[str, bytes], label: str) -> dict[str, list[str]]:
    if MANIFEST not in documents:
        raise Tau2FormatError(f"{label}: the bundle has no {MANIFEST}")
    try:
        manifest = json.loads(documents[MANIFEST].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Tau2FormatError(f"{label}: {MANIFEST} is not valid JSON: {error}") from error
    if not isinstance(manifest, dict) or not any(isinstance(manifest.get(key), list) for key in LISTS):
        raise Tau2FormatError(f"{label}: {MANIFEST} must be an object with the lists {list(LISTS)}")
    unknown = sorted(set(manifest) - set(LISTS))
    if unknown:
        raise Tau2FormatError(f"{label}: {MANIFEST} has lists {unknown} this parser does not know")
    lists = {}
    for key in LISTS:
        ids = manifest.get(key) or []
        if not isinstance(ids, list) or not all(isinstance(i, str) and i and "/" not in i and ".." not in i for i in ids):
            raise Tau2FormatError(f"{label}: {MANIFEST} {key!r} must be a list of submission ids")
        lists[key] = ids
    return lists


def discover(documents: Mapping[str, bytes]) -> list[str]:
    """The submission documents the manifest lists (for the bundle fetch); none when it is unreadable
    (the parser then names the problem)."""
    try:
        lists = _manifest(documents, "tau2_bench")
    except Tau2FormatError:
        return []
    return [submission_document(i) for key in LISTS for i in lists[key]]


def _organization_class(registry, submission: Mapping[str, Any]) -> str:
    submitter = submission.get("submitting_organization")
    submitter = submitter.strip() if isinstance(submitter, str) else None
    if submitter and submitter.casefold() in registry.maintainers(SOURCE):
        return "independent"
    if registry.same_organization(submitter, submission.get("model_organization")):
        return "vendor_reported"
    return "unverified"


def parse_tau2(documents: Mapping[str, bytes], registry, snapshot_sha256: str) -> ParseOutput:
    out = ParseOutput(source=SOURCE, snapshot_sha256=snapshot_sha256)
    label = f"{SOURCE} {BASE_URL} (bundle {snapshot_sha256[:12]})"
    lists = _manifest(documents, label)
    for key in LISTS:
        per_domain: dict[str, list[tuple[int, dict]]] = {domain: [] for domain in DOMAINS}
        headers: dict[str, list[str]] = {domain: [] for domain in DOMAINS}
        for index, submission_id in enumerate(lists[key], start=1):
            document = submission_document(submission_id)
            where = f"{SOURCE}/{document} ({key} #{index})"
            if document not in documents:
                # fetch_bundle fetches every listed id, so only a hand-made bundle can get here
                out.flag("missing_document", f"{where}: listed in the manifest but not in the bundle; not read",
                         file=f"{key}:*", row_number=index, value=submission_id)
                continue
            try:
                submission = json.loads(documents[document].decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as error:
                out.flag("malformed_row", f"{where}: not valid JSON ({error}); submission not read",
                         file=f"{key}:*", row_number=index, value=submission_id)
                continue
            if not isinstance(submission, dict) or not isinstance(submission.get("results"), dict):
                out.flag("malformed_row", f"{where}: not an object with a 'results' object; submission not read",
                         file=f"{key}:*", row_number=index, field_name="results", value=submission_id)
                continue
            methodology = submission.get("methodology") if isinstance(submission.get("methodology"), dict) else {}
            if methodology.get("tau2_bench_version") == ORIGINAL_TAU_BENCH:
                out.flag("other_benchmark_version", f"{where}: a run of the original tau-bench "
                         "(methodology.tau2_bench_version), whose tasks are not tau2-bench's; not scored",
                         file=f"{key}:*", row_number=index, field_name="methodology.tau2_bench_version",
                         value=submission_id)
                continue
            base = {k: v for k, v in submission.items() if k not in FLATTENED and k != "results"}
            for nested in FLATTENED:
                value = submission.get(nested)
                if isinstance(value, dict):
                    base.update({f"{nested}.{k}": v for k, v in value.items()})
                elif value is not None:
                    base[nested] = value
            for domain, result in submission["results"].items():
                if domain not in DOMAINS:
                    out.flag("unregistered_file", f"{where}: domain {domain!r} is not one this parser knows; not read",
                             file=f"{key}:{domain}", row_number=index, field_name=f"results.{domain}")
                    continue
                if not isinstance(result, dict):
                    if result is not None:
                        out.flag("malformed_row", f"{where}: results.{domain} is not an object; not read",
                                 file=f"{key}:{domain}", row_number=index, field_name=f"results.{domain}", value=result)
                    continue
                if all(value is None for k, value in result.items() if k.startswith("pass_") or k == "cost"):
                    continue  # present but all null: the domain was not run
                record = dict(base)
                record.update(result)
                record["__id"] = submission_id
                for field in record:
                    if field != "__id" and field not in headers[domain]:
                        headers[domain].append(field)
                per_domain[domain].append((index, record))
        for domain in DOMAINS:
            file = f"{key}:{domain}"
            if registry.file_entry(SOURCE, file) is None:
                if per_domain[domain]:
                    out.flag("unregistered_file", f"{SOURCE}/{file}: {len(per_domain[domain])} results, but the file is "
                             "not in the registry; not read", file=file)
                continue
            out.files_seen.add(file)
            if per_domain[domain]:
                read_records(out, registry, file, headers[domain], per_domain[domain], identify=_identify,
                             enrich=lambda record: {"verification_class": _organization_class(registry, record)},
                             key_columns=["model_name"])
    return out


def tau2_model_id(submission: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(identifier, problem): `model_name` at its `reasoning_effort`."""
    name = submission.get("model_name")
    if not isinstance(name, str) or not name.strip():
        return None, "no model_name"
    effort = submission.get("reasoning_effort")
    label, problem = setting_label(effort=effort) if effort is not None else (None, None)
    if problem is not None:
        return None, f"reasoning_effort: {problem}"
    identifier, problem = with_setting(name, label)
    return (None, problem) if problem else (identifier, None)


def _identify(record: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    identifier, problem = tau2_model_id(record)
    name = record.get("model_name")
    return identifier, name if isinstance(name, str) else None, (f"submission {record.get('__id')}: {problem}"
                                                                  if problem else None)
