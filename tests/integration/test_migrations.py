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
