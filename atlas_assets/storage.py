"""Writing DataFrames into the DuckDB tables whose shape sql/00_source_tables.sql fixes."""

from __future__ import annotations

import duckdb
import pandas as pd

from atlas_assets.settings import SQL_DIR

SOURCE_TABLES_SQL = SQL_DIR / "00_source_tables.sql"


def ensure_source_tables(conn: duckdb.DuckDBPyConnection) -> None:
    conn.execute(SOURCE_TABLES_SQL.read_text())


def replace_rows(
    conn: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame, *, like: str | None = None, create: bool = False,
    in_transaction: bool = False,
) -> int:
    """Replace the whole content of `table` with `frame` in one transaction.

    With `like`, the table is (re)created with the columns and types of that contract
    table first, so staging tables match the contract exactly. With `create`, the table
    takes the frame's own columns (output tables whose shape the frame defines). Columns
    are matched by name; a frame lacking a contract column fails loudly rather than
    writing NULLs. With `in_transaction`, the caller's transaction holds it (see replace_tables).
    """
    if not in_transaction:
        conn.execute("BEGIN TRANSACTION")
    try:
        conn.register("incoming_frame", frame)
        if create:
            conn.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM incoming_frame")
        else:
            if like is not None:
                conn.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM {like} LIMIT 0")
            expected = [row[0] for row in conn.execute(f"DESCRIBE {table}").fetchall()]
            missing = [column for column in expected if column not in frame.columns]
            if missing:
                raise ValueError(f"cannot write {table}: frame lacks columns {missing}")
            selected = ", ".join(f'"{column}"' for column in expected)
            conn.execute(f"DELETE FROM {table}")
            conn.execute(f"INSERT INTO {table} BY NAME SELECT {selected} FROM incoming_frame")
        conn.unregister("incoming_frame")
        if not in_transaction:
            conn.execute("COMMIT")
    except Exception:
        if not in_transaction:
            conn.execute("ROLLBACK")
        raise
    return len(frame)


def replace_tables(conn: duckdb.DuckDBPyConnection, tables: dict[str, pd.DataFrame]) -> None:
    """Replace several output tables (each taking its frame's columns) in ONE transaction: a failure
    part-way leaves every one of them as it was, so readers never see scores from two fits."""
    conn.execute("BEGIN TRANSACTION")
    try:
        for table, frame in tables.items():
            replace_rows(conn, table, frame, create=True, in_transaction=True)
        conn.execute("COMMIT")
    except Exception:
        conn.execute("ROLLBACK")
        raise


def replace_partition(conn: duckdb.DuckDBPyConnection, tables: dict[str, pd.DataFrame], column: str, value: str) -> None:
    """For each table, replace the rows whose `column` equals `value` by `frame` (one transaction for all): a
    partitioned asset's slice of a shared table. A missing table is created from its frame; a frame column the
    table lacks is added (NULL in older slices); an empty frame just deletes the slice."""
    conn.execute("BEGIN TRANSACTION")
    try:
        for table, frame in tables.items():
            exists = conn.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?",
                                  [table]).fetchall()[0][0]
            if not exists:
                if frame.empty:
                    continue
                conn.register("incoming_frame", frame)
                conn.execute(f"CREATE TABLE {table} AS SELECT * FROM incoming_frame")
                conn.unregister("incoming_frame")
                continue
            conn.execute(f'DELETE FROM {table} WHERE "{column}" = ?', [value]).fetchall()
            if frame.empty:
                continue
            if column not in frame.columns or (frame[column] != value).any():
                raise ValueError(f"cannot write {table}: rows outside the slice {column} = {value!r}")
            known = {row[0] for row in conn.execute(f"DESCRIBE {table}").fetchall()}
            conn.register("incoming_frame", frame)
            types = dict(conn.execute("SELECT column_name, column_type FROM (DESCRIBE incoming_frame)").fetchall())
            for new in [c for c in frame.columns if c not in known]:
                conn.execute(f'ALTER TABLE {table} ADD COLUMN "{new}" {types[new]}')
            conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming_frame")
            conn.unregister("incoming_frame")
        conn.execute("COMMIT")
    except Exception:
        conn.execute("ROLLBACK")
        raise


def count_by(conn: duckdb.DuckDBPyConnection, table: str, column: str) -> dict[str, int]:
    rows = conn.execute(f'SELECT coalesce(CAST("{column}" AS VARCHAR), \'(null)\'), count(*) FROM {table} GROUP BY 1 ORDER BY 2 DESC').fetchall()
    return {str(key): int(count) for key, count in rows}
