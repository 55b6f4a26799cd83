"""Seed 002's verdict for any two modeled observations in the DuckDB file, from the command line.

    python -m atlas_assets.outputs.comparability_cli MODEL STATE FAMILY  MODEL STATE FAMILY [--database PATH]

Reads the observations' dimensions through outputs/sql/observation_rows.sql (the same rows the
comparability_verdicts asset reads) and prints the verdict, the rule, its reason and the later rules
that also fire. An observation that is not in modeled_observations is named as such (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import duckdb

from atlas_assets import settings
from atlas_assets.outputs.comparability import RULES, Verdict, compare, observations_from_rows
from atlas_assets.outputs.config import load_outputs_config

OBSERVATION_ROWS_SQL = Path(__file__).resolve().parent / "sql" / "observation_rows.sql"


def observation_verdict(conn: duckdb.DuckDBPyConnection, a: tuple[str, str, str], b: tuple[str, str, str],
                        cfg: dict | None = None) -> Verdict:
    """The verdict for the observations keyed (model, reasoning_state, family); KeyError names a missing one."""
    cfg = cfg or load_outputs_config()["comparability"]
    rows = conn.execute(f"SELECT * FROM ({OBSERVATION_ROWS_SQL.read_text()}) "
                        "WHERE (model, reasoning_state, family) IN (($1, $2, $3), ($4, $5, $6))", [*a, *b]).df()
    observations = observations_from_rows(rows, cfg)
    for key in (a, b):
        if key not in observations:
            raise KeyError(f"no modeled observation for model {key[0]!r}, reasoning state {key[1]!r}, family {key[2]!r}")
    return compare(observations[a], observations[b], cfg)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Seed 002's comparability verdict for two modeled observations.")
    parser.add_argument("a", nargs=3, metavar=("MODEL", "STATE", "FAMILY"))
    parser.add_argument("b", nargs=3, metavar=("MODEL", "STATE", "FAMILY"))
    parser.add_argument("--database", type=Path, default=None, help="DuckDB file (default: ATLAS_HOME's)")
    args = parser.parse_args(argv)
    path = args.database or settings.duckdb_path()
    with duckdb.connect(str(path), read_only=True) as conn:
        try:
            verdict = observation_verdict(conn, tuple(args.a), tuple(args.b))
        except KeyError as missing:
            print(f"error: {missing.args[0]}", file=sys.stderr)
            return 2
    also = ", ".join(f"{r} ({RULES[r][0]})" for r in verdict.also)
    print(f"{verdict.verdict} (rule {verdict.rule}, {verdict.name}): {verdict.reason}"
          + (f"\nalso: {also}" if also else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
