"""Parse the SWE-bench leaderboards (swe-bench.github.io data/leaderboards.json).

Each board (bash-only, Verified, Lite, Test, Multimodal) is read as one registered "file"
named `leaderboards.json:<board>`, each result object as one record. The model is the
result's single `Model:` tag (a result built on several models is audited, not split);
the submitted system is the harness; 'System: Attempts - 1' is a single attempt and
'Attempts - 2'/'2+' a best-of-N protocol. A result the SWE-bench team marked `checked` is
verification class community, any other unverified.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from atlas_assets.ingest.records import ParseOutput
from atlas_assets.ingest.tabular import read_records
from atlas_assets.registry.model_ids import swe_bench_model_id

SOURCE = "swe_bench"
URL = "https://raw.githubusercontent.com/SWE-bench/swe-bench.github.io/master/data/leaderboards.json"
DOCUMENT = "leaderboards.json"
# The fields that say which model a result is: the Model tags, and the name that carries the
# reasoning label (model_ids.swe_bench_model_id). Without either, results would be re-keyed.
KEY_FIELDS = ("name", "tags")


class LeaderboardFormatError(ValueError):
    """The document is not the leaderboards JSON we know; the message says where it differs."""


def attempts_protocol(tags: list[str]) -> str | None:
    for tag in tags:
        if tag.startswith("System: Attempts"):
            return "single" if tag.rsplit("-", 1)[-1].strip() == "1" else "best_of_n"
    return None


def _tags(result: Mapping[str, Any]) -> list[str]:
    tags = result.get("tags") or []
    return [str(tag) for tag in tags] if isinstance(tags, list) else []


def identify(result: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    model_id, _label, problem = swe_bench_model_id(dict(result))
    return model_id, result.get("name"), problem


def enrich(result: Mapping[str, Any]) -> dict[str, Any]:
    # Verification (seed 002): a result the SWE-bench team marked `checked` is community-verified; any
    # other is a team's own submission that nobody re-ran (unverified).
    return {"sampling_protocol": attempts_protocol(_tags(result)),
            "verification_class": "community" if result.get("checked") is True else "unverified"}


def parse_leaderboards(content: bytes, registry, snapshot_sha256: str) -> ParseOutput:
    out = ParseOutput(source=SOURCE, snapshot_sha256=snapshot_sha256)
    label = f"{SOURCE} {URL} (sha256 {snapshot_sha256[:12]})"
    try:
        document = json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise LeaderboardFormatError(f"{label}: not valid JSON: {error}") from error
    boards = document.get("leaderboards") if isinstance(document, dict) else None
    if not isinstance(boards, list):
        raise LeaderboardFormatError(f"{label}: expected an object with a 'leaderboards' list")

    for board_index, board in enumerate(boards):
        name = board.get("name") if isinstance(board, dict) else None
        results = board.get("results") if isinstance(board, dict) else None
        if not name or not isinstance(results, list):
            out.flag("malformed_board", f"{label}: leaderboards[{board_index}] has no name or no results list",
                     file=DOCUMENT, row_number=board_index)
            continue
        file = f"{DOCUMENT}:{name}"
        if registry.file_entry(SOURCE, file) is not None:
            out.files_seen.add(file)
            if not results:
                # A board that lists no results is an emptied file, not a good board with no rows.
                out.fail_file("empty_file", f"{label}: board {name!r} (leaderboards[{board_index}]) has no results",
                              file=file)
                continue
        records, header = [], []
        for index, result in enumerate(results, start=1):
            if not isinstance(result, dict):
                out.flag("malformed_row", f"{file} result {index} is not an object", file=file, row_number=index)
                continue
            for key in result:
                if key not in header:
                    header.append(key)
            records.append((index, result))
        read_records(out, registry, file, header, records, identify=identify, enrich=enrich, key_columns=KEY_FIELDS)
    return out
