"""INSERT … ON CONFLICT for both dialects."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite


def _dialect_insert(conn: Connection, table: Table) -> postgresql.Insert | sqlite.Insert:
    return (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(table)


def upsert(conn: Connection, table: Table, rows: Sequence[dict[str, object]], keys: Sequence[str]) -> None:
    """INSERT … ON CONFLICT (keys) DO UPDATE, on SQLite and PostgreSQL alike."""
    if not rows:
        return
    statement = _dialect_insert(conn, table)
    updates = {name: statement.excluded[name] for name in rows[0] if name not in keys}
    conn.execute(statement.on_conflict_do_update(index_elements=list(keys), set_=updates), list(rows))


def insert_ignoring_existing(conn: Connection, table: Table, rows: Sequence[dict[str, object]], keys: Sequence[str]) -> None:
    """INSERT … ON CONFLICT (keys) DO NOTHING: rows whose key is already there are left as they were."""
    if rows:
        conn.execute(_dialect_insert(conn, table).on_conflict_do_nothing(index_elements=list(keys)), list(rows))
