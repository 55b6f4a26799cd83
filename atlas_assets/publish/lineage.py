"""From a published number back to the raw rows it stands on (issue 12): a state's capability, one of its
cells, or a family's difficulty.

    python -m atlas_assets.publish.lineage --model gpt-5-2025-08-07 --state high [--family gpqa_diamond]
    python -m atlas_assets.publish.lineage --family gpqa_diamond            # a family's difficulty

For a state: every raw row of the source identifiers the registry maps to it (and every raw row its modeled
observations name), with source, file, row number, snapshot hash and URL, the pooled score it fed, the
modeled observation it informs, and each exclusion that removed it on the way (stage: reason). The query is
`publish/sql/lineage.sql`; it reads the run's DuckDB tables.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import duckdb
import pandas as pd

SQL = Path(__file__).parent / "sql" / "lineage.sql"


def state_lineage(conn: duckdb.DuckDBPyConnection, model: str, reasoning_state: str,
                  family: str | None = None) -> pd.DataFrame:
    return conn.execute(SQL.read_text(), {"model": model, "reasoning_state": reasoning_state, "family": family}).df()


def family_lineage(conn: duckdb.DuckDBPyConnection, family: str) -> pd.DataFrame:
    """A family's difficulty stands on its modeled observations: each with its state and raw rows."""
    states = conn.execute("SELECT DISTINCT model, reasoning_state FROM modeled_observations WHERE family = ? "
                          "ORDER BY 1, 2", [family]).fetchall()
    frames = [state_lineage(conn, m, r, family).assign(model=m, reasoning_state=r) for m, r in states]
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return out[out["informs_the_number"]] if len(out) else out


def main(argv=None) -> int:
    from atlas_assets import settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model")
    parser.add_argument("--state", default="default", help="reasoning state (default: default)")
    parser.add_argument("--family")
    parser.add_argument("--database", default=None, help="DuckDB file (default: the run's)")
    args = parser.parse_args(argv)
    if not args.model and not args.family:
        parser.error("name a --model (and --state), a --family, or both")
    with duckdb.connect(args.database or str(settings.duckdb_path()), read_only=True) as conn:
        table = (state_lineage(conn, args.model, args.state, args.family) if args.model
                 else family_lineage(conn, args.family))
    if table.empty:
        print("no rows: the state or family is not in this run's tables")
        return 1
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.max_colwidth", 60)
    print(table.to_string(index=False))
    informs = int(table["informs_the_number"].sum())
    print(f"\n{len(table)} raw rows, {informs} inform the number, {int(table['excluded_by'].notna().sum())} excluded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
