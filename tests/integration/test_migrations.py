"""The migrations and the table definitions the code queries must describe the same schema."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from half_store.domain.constants import VALUE_JSON
from half_store.domain.records import ProducerStamp, Record
from half_store.storage import log_reads, log_store
from half_store.storage.database import open_database
from half_store.storage.migrate import downgrade, upgrade
from half_store.storage.schema import metadata


def test_migrated_schema_matches_the_models(database_url: str) -> None:
    database = open_database(database_url)
    try:
        upgrade(database.writer)  # already at head: a no-op that must not fail
        with database.writer.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            differences = compare_metadata(context, metadata)
    finally:
        database.dispose()
    assert differences == []


def test_going_back_before_record_batches_splits_them_into_rows_and_loses_nothing(database_url: str) -> None:
    records = [Record(f"k{n}", b"%d" % n, VALUE_JSON, None, n) for n in range(5)]
    database = open_database(database_url)
    try:
        with database.writer.begin() as conn:
            topic = log_store.create_topic(conn, "t", 1)
            log_store.append(conn, topic, 0, records, ProducerStamp(7, 0, 10), as_batch=True)
        downgrade(database.writer, "0004_share")
        with database.writer.connect() as conn:
            rows = conn.execute(
                text('SELECT "offset", key, value, timestamp, sequence FROM messages ORDER BY "offset"')
            ).all()
        upgrade(database.writer)
        with database.reader.connect() as conn:
            read_back = log_reads.read_range(conn, topic, 0, 0, 5, 10)
    finally:
        database.dispose()
    assert [(o, k, bytes(v), ts, seq) for o, k, v, ts, seq in rows] == [
        (n, f"k{n}", b"%d" % n, n, 10 + n) for n in range(5)
    ]
    assert [(m.offset, m.key, m.value) for m in read_back] == [(n, f"k{n}", b"%d" % n) for n in range(5)]


_VALUE_COMPRESSION = text(
    "SELECT attcompression FROM pg_attribute WHERE attrelid = 'messages'::regclass AND attname = 'value'"
)


def test_postgresql_compresses_batches_with_lz4_and_reads_what_pglz_stored(postgres_url: str) -> None:
    # Values past PostgreSQL's 2 KiB threshold are compressed as they are stored: a batch
    # written under each method must read back the same.
    records = [Record(None, b"v" * 1024, VALUE_JSON, None, n) for n in range(25)]
    database = open_database(postgres_url)
    try:
        with database.writer.begin() as conn:
            topic = log_store.create_topic(conn, "t", 1)
        downgrade(database.writer, "0007_record_batches")
        with database.writer.begin() as conn:
            before = conn.execute(_VALUE_COMPRESSION).scalar_one()
            log_store.append(conn, topic, 0, records, as_batch=True)
        upgrade(database.writer)
        with database.writer.begin() as conn:
            after = conn.execute(_VALUE_COMPRESSION).scalar_one()
            log_store.append(conn, topic, 0, records, as_batch=True)
            methods = conn.execute(text('SELECT pg_column_compression(value) FROM messages ORDER BY "offset"')).scalars()
            stored_with = list(methods)
        with database.reader.connect() as conn:
            read_back = log_reads.read_range(conn, topic, 0, 0, 50, 10**8)
    finally:
        database.dispose()
    assert (before, after) == ("", "l")  # "": the server's default, pglz
    assert stored_with == ["pglz", "lz4"]
    assert [m.value for m in read_back] == [b"v" * 1024] * 50
