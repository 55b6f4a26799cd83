"""Parse the ARC Prize leaderboard data: evaluations.json, models.json, datasets.json (one bundle).

PROVENANCE: ../shared/data/arc-prize-leaderboard/PROVENANCE.md. `evaluations.json` is long: one row per
(dataset, model). Each dataset is read as one registered "file" `evaluations.json:<datasetId>` (like
the SWE-bench boards), each evaluation as one record, with the fields of its model from `models.json`
joined in as `model.<field>` (display name, release date, provider, ...), so the registry decides about
every field of both files. `datasets.json` says which datasets exist; a dataset without evaluations
is noted, an evaluation of a dataset it does not list is audited.

- Model identity: ARC's ids carry the setting in styles of their own; model_ids.arc_prize_model_id
  reads them ('gpt-5-2025-08-07-high' -> 'gpt-5-2025-08-07 (high)').
- models.json repeats some ids (PROVENANCE: gpt-4-1-2025-04-14 three identical times,
  o3-mini-2025-01-31-low twice with different modelType/paperUrl): the first row is used; a
  repeat that differs is audited (`conflicting_duplicate_model`, naming the fields).
- An evaluation whose modelId models.json lacks is still read (its id is the identifier) and audited
  (`unknown_model_reference`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from atlas_assets.ingest.records import ParseOutput
from atlas_assets.ingest.tabular import read_records
from atlas_assets.registry.model_ids import arc_prize_model_id

SOURCE = "arc_prize"
BASE_URL = "https://arcprize.org/media/data/leaderboard/"
DOCUMENTS = ("evaluations.json", "models.json", "datasets.json")
URL = BASE_URL
EVALUATIONS = "evaluations.json"


class ArcPrizeFormatError(ValueError):
    """The bundle is not the ARC Prize data we know; the message names the document and what differs."""


def _array(documents: Mapping[str, bytes], name: str, label: str) -> list:
    if name not in documents:
        raise ArcPrizeFormatError(f"{label}: the bundle has no {name}")
    try:
        value = json.loads(documents[name].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ArcPrizeFormatError(f"{label}: {name} is not valid JSON: {error}") from error
    if not isinstance(value, list):
        raise ArcPrizeFormatError(f"{label}: {name} must be a JSON array, got {type(value).__name__}")
    return value


def parse_arc_prize(documents: Mapping[str, bytes], registry, snapshot_sha256: str) -> ParseOutput:
    out = ParseOutput(source=SOURCE, snapshot_sha256=snapshot_sha256)
    label = f"{SOURCE} {BASE_URL} (bundle {snapshot_sha256[:12]})"
    evaluations = _array(documents, EVALUATIONS, label)
    models_rows = _array(documents, "models.json", label)
    datasets_rows = _array(documents, "datasets.json", label)

    models: dict[str, dict] = {}
    for index, row in enumerate(models_rows, start=1):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            out.flag("malformed_row", f"{SOURCE}/models.json row {index}: not an object with a string 'id'; skipped",
                     file="models.json", row_number=index, field_name="id", value=row)
            continue
        first = models.get(row["id"])
        if first is None:
            models[row["id"]] = row
        elif first != row:
            differing = sorted(k for k in set(first) | set(row) if first.get(k) != row.get(k))
            out.flag("conflicting_duplicate_model", f"{SOURCE}/models.json row {index}: id {row['id']!r} repeats an "
                     f"earlier row with different {differing}; the first row is used", file="models.json",
                     row_number=index, field_name=", ".join(differing), value=row["id"])

    listed = {}
    for index, row in enumerate(datasets_rows, start=1):
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            listed[row["id"]] = row
        else:
            out.flag("malformed_row", f"{SOURCE}/datasets.json row {index}: not an object with a string 'id'; skipped",
                     file="datasets.json", row_number=index, value=row)

    by_dataset: dict[str, list[tuple[int, dict]]] = {}
    for index, row in enumerate(evaluations, start=1):
        if not isinstance(row, dict) or not isinstance(row.get("datasetId"), str):
            out.flag("malformed_row", f"{SOURCE}/{EVALUATIONS} row {index}: not an object with a string 'datasetId'; "
                     "skipped", file=EVALUATIONS, row_number=index, field_name="datasetId", value=row)
            continue
        by_dataset.setdefault(row["datasetId"], []).append((index, row))

    for dataset in sorted(set(listed) - set(by_dataset)):
        out.flag("dataset_without_evaluations", f"{SOURCE}/datasets.json lists {dataset!r} "
                 f"({listed[dataset].get('displayName')!r}) but no evaluation is of it", file="datasets.json",
                 field_name="id", value=dataset)

    for dataset, rows in sorted(by_dataset.items()):
        file = f"{EVALUATIONS}:{dataset}"
        if dataset not in listed:
            out.flag("unknown_dataset", f"{SOURCE}/{EVALUATIONS}: {len(rows)} evaluations of dataset {dataset!r}, "
                     "which datasets.json does not list", file=file, field_name="datasetId", value=dataset)
        if registry.file_entry(SOURCE, file) is not None:
            out.files_seen.add(file)
        header: list[str] = []
        records = []
        for index, row in rows:
            record = dict(row)
            model = models.get(row.get("modelId")) if isinstance(row.get("modelId"), str) else None
            if model is None:
                out.flag("unknown_model_reference", f"{SOURCE}/{file} row {index}: modelId {row.get('modelId')!r} is not "
                         "in models.json; read with the id alone", file=file, row_number=index, field_name="modelId",
                         value=row.get("modelId"))
            else:
                record.update({f"model.{key}": value for key, value in model.items()})
            for key in record:
                if key not in header:
                    header.append(key)
            records.append((index, record))
        read_records(out, registry, file, header, records, identify=_identify, key_columns=["modelId"])
    return out


def _identify(record: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    model_id = record.get("modelId")
    if not isinstance(model_id, str) or not model_id.strip():
        return None, None, "no modelId"
    name = record.get("model.displayName")
    return arc_prize_model_id(model_id), name.strip() if isinstance(name, str) and name.strip() else None, None
