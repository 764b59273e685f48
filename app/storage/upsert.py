"""INSERT … ON CONFLICT DO UPDATE for both dialects."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite


def upsert(conn: Connection, table: Table, rows: Sequence[dict[str, object]], keys: Sequence[str]) -> None:
    """INSERT … ON CONFLICT (keys) DO UPDATE, on SQLite and PostgreSQL alike."""
    if not rows:
        return
    dialect_insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    statement = dialect_insert(table)
    updates = {name: statement.excluded[name] for name in rows[0] if name not in keys}
    conn.execute(statement.on_conflict_do_update(index_elements=list(keys), set_=updates), list(rows))
