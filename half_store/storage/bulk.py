"""Many rows into one table, the fastest way each database has.

PostgreSQL: a binary ``COPY`` (one stream instead of psycopg's statement per row, and
values as they are instead of text to be parsed back). SQLite: an executemany through
the driver with positional tuples (SQLAlchemy's per-row parameter processing cost
about as much as the insert itself in batches of a hundred).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import DataError, DBAPIError

Row = tuple[object, ...]
_PLACEHOLDER = {"qmark": "?", "format": "%s", "pyformat": "%s", "numeric": ":{n}"}


def insert_rows(conn: Connection, table: Table, columns: tuple[str, ...], rows: Sequence[Row]) -> None:
    """Insert ``rows`` (tuples in ``columns`` order) into ``table``."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        _copy(conn, table, columns, rows)
    else:
        conn.exec_driver_sql(_insert_sql(table, columns, conn.dialect.paramstyle), list(rows))


def quoted_columns(columns: tuple[str, ...]) -> str:
    return ", ".join(f'"{column}"' for column in columns)  # "offset", "partition" are keywords


@functools.cache
def _insert_sql(table: Table, columns: tuple[str, ...], paramstyle: str) -> str:
    marks = ", ".join(_PLACEHOLDER[paramstyle].format(n=i + 1) for i in range(len(columns)))
    return f"INSERT INTO {table.name} ({quoted_columns(columns)}) VALUES ({marks})"


@functools.cache
def _copy_statement(table: Table, columns: tuple[str, ...]) -> tuple[str, list[str]]:
    """The COPY statement, and each column's PostgreSQL type as binary COPY needs it (no length: "varchar")."""
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    types = [re.sub(r"\(.*\)", "", table.c[name].type.compile(dialect)).lower() for name in columns]
    return f"COPY {table.name} ({quoted_columns(columns)}) FROM STDIN (FORMAT BINARY)", types


def _copy(conn: Connection, table: Table, columns: tuple[str, ...], rows: Sequence[Row]) -> None:
    """The driver is called directly, so its errors are wrapped here as SQLAlchemy's would be
    (the writer tells a database outage, a refused value and a lost race apart by them)."""
    sql, types = _copy_statement(table, columns)
    dbapi_error = conn.dialect.loaded_dbapi.Error
    try:
        with conn.connection.driver_connection.cursor() as cursor, cursor.copy(sql) as copy:  # type: ignore[union-attr]
            copy.set_types(types)
            for row in rows:
                copy.write_row(row)
    except dbapi_error as error:
        raise DBAPIError.instance(sql, None, error, dbapi_error) from error
    except OverflowError as error:  # binary COPY checks ranges here, not in the database: same answer
        raise DataError(sql, None, error) from error
