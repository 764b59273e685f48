"""Messages rows as stored: every byte comes back, on both databases (COPY on PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from sqlalchemy import select
from sqlalchemy.exc import DataError, IntegrityError

from half_store.domain.constants import VALUE_BINARY, VALUE_JSON
from half_store.domain.errors import PartitionNotFound, ValidationFailed
from half_store.domain.records import ProducerStamp, Record
from half_store.storage import log_reads, log_store
from half_store.storage.database import Database, open_database
from half_store.storage.schema import partitions, transaction_partitions
from half_store.storage.upsert import insert_many, update_rows

AWKWARD_TEXT = 'tab\there, back\\slash, new\nline, quote ", comma, \\N, é, 🙂'


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    opened = open_database(database_url)
    yield opened
    opened.dispose()


@pytest.mark.parametrize("as_batch", [False, True], ids=["row-per-record", "record-batch"])
def test_awkward_keys_headers_and_values_come_back_unchanged(database: Database, as_batch: bool) -> None:
    records = [
        Record(AWKWARD_TEXT, bytes(range(256)), VALUE_BINARY, json.dumps({"h": AWKWARD_TEXT}, ensure_ascii=False), 7),
        Record(None, b"", VALUE_BINARY, None, 8),
        Record("\\", b'"\\\\N"', VALUE_JSON, "{}", 9, properties='{"p": "\\t"}'),
    ]
    stamp = ProducerStamp(None, None, None, "txn-1")
    with database.writer.begin() as conn:
        topic = log_store.create_topic(conn, "t", 1)
        assert log_store.append(conn, topic, 0, records, stamp, as_batch) == 0
    with database.reader.connect() as conn:
        stored = log_reads.read_range(conn, topic, 0, 0, 3, 10)
        properties = log_reads.read_offsets(conn, topic, 0, [2])[2][1]
    assert [(m.key, m.value, m.value_kind, m.headers, m.timestamp, m.txn_id) for m in stored] == [
        (r.key, r.value, r.value_kind, r.headers, r.timestamp, "txn-1") for r in records
    ]
    assert properties == '{"p": "\\t"}'


def test_a_value_the_database_refuses_fails_as_a_database_error_and_writes_nothing(postgres_url: str) -> None:
    # PostgreSQL text cannot hold NUL. The API refuses it earlier; this pins what the
    # storage layer raises if one gets through: SQLAlchemy's DataError (the writer answers
    # 422 to it), not the driver's own exception.
    database = open_database(postgres_url)
    try:
        with database.writer.begin() as conn:
            topic = log_store.create_topic(conn, "t", 1)
        with pytest.raises(DataError), database.writer.begin() as conn:
            log_store.append(conn, topic, 0, [Record("a\x00b", b"1", VALUE_JSON, None, 0)])
        with database.writer.begin() as conn:
            assert log_store.append(conn, topic, 0, [Record("k", b"1", VALUE_JSON, None, 0)]) == 0
    finally:
        database.dispose()


def test_appends_over_several_partitions_and_topics_get_consecutive_offsets_per_partition(database: Database) -> None:
    record = Record(None, b"1", VALUE_JSON, None, 0)
    with database.writer.begin() as conn:
        orders, audit = log_store.create_topic(conn, "orders", 3), log_store.create_topic(conn, "audit", 1)
        first = log_store.append_many(
            conn,
            [
                log_store.AppendRequest(orders, {0: [record] * 2, 2: [record]}),
                log_store.AppendRequest(audit, {0: [record] * 3}),
                log_store.AppendRequest(orders, {2: [record] * 4}),
            ],
        )
        second = log_store.append_many(
            conn, [log_store.AppendRequest(orders, {2: [record]}), log_store.AppendRequest(audit, {0: [record]})]
        )
    assert first == [{0: 0, 2: 0}, {0: 0}, {2: 1}]
    assert second == [{2: 5}, {0: 3}]
    with database.reader.connect() as conn:
        assert [log_store.partition_bounds(conn, orders, p)[1] for p in range(3)] == [2, 0, 6]
        assert log_store.partition_bounds(conn, audit, 0)[1] == 4


def test_an_append_to_a_partition_that_does_not_exist_fails_whole(database: Database) -> None:
    record = Record(None, b"1", VALUE_JSON, None, 0)
    with database.writer.begin() as conn:
        topic = log_store.create_topic(conn, "t", 2)
    with pytest.raises(PartitionNotFound, match="no partition 5"), database.writer.begin() as conn:
        log_store.append_many(conn, [log_store.AppendRequest(topic, {0: [record], 5: [record]})])
    with database.reader.connect() as conn:
        assert log_store.partition_bounds(conn, topic, 0) == (0, 0)


def test_update_rows_sets_the_columns_of_each_keyed_row_and_leaves_the_others(database: Database) -> None:
    with database.writer.begin() as conn:
        topic = log_store.create_topic(conn, "t", 4)
        columns = ("next_offset", "log_start_offset")
        changed = [(topic.topic_id, 1, 10, 2), (topic.topic_id, 3, 30, 0)]
        update_rows(conn, partitions, ("topic_id", "partition"), columns, changed)
        update_rows(conn, partitions, ("topic_id", "partition"), columns, [])
    with database.reader.connect() as conn:
        rows = conn.execute(
            select(partitions.c.partition, partitions.c.next_offset, partitions.c.log_start_offset)
            .where(partitions.c.topic_id == topic.topic_id)
            .order_by(partitions.c.partition)
        ).all()
    assert [tuple(row) for row in rows] == [(0, 0, 0), (1, 10, 2), (2, 0, 0), (3, 30, 0)]


def _transaction_partitions(database: Database) -> list[tuple[object, ...]]:
    with database.reader.connect() as conn:
        rows = conn.execute(select(transaction_partitions).order_by(transaction_partitions.c.partition)).all()
    return [tuple(row) for row in rows]


def _joined(partition: int, first_offset: int, marker: int | None = None, aborted: bool = False) -> dict[str, object]:
    return {"txn_id": "txn-1", "topic_id": 1, "partition": partition, "first_offset": first_offset,
            "marker_offset": marker, "aborted": aborted}


def test_insert_many_stores_every_row_as_given_nulls_and_booleans_included(database: Database) -> None:
    with database.writer.begin() as conn:
        insert_many(conn, transaction_partitions, [_joined(0, 5), _joined(1, 2**40, marker=7, aborted=True)])
        insert_many(conn, transaction_partitions, [])
    assert _transaction_partitions(database) == [("txn-1", 1, 0, 5, None, False), ("txn-1", 1, 1, 2**40, 7, True)]


def test_insert_many_refuses_a_taken_key_and_writes_none_of_the_rows(database: Database) -> None:
    with database.writer.begin() as conn:
        insert_many(conn, transaction_partitions, [_joined(0, 5)])
    with pytest.raises(IntegrityError), database.writer.begin() as conn:
        insert_many(conn, transaction_partitions, [_joined(1, 1), _joined(0, 9)])
    assert _transaction_partitions(database) == [("txn-1", 1, 0, 5, None, False)]


def test_insert_many_ignoring_existing_keeps_the_stored_row_and_the_first_of_a_repeated_key(database: Database) -> None:
    keys = ("txn_id", "topic_id", "partition")
    with database.writer.begin() as conn:
        insert_many(conn, transaction_partitions, [_joined(0, 5)], ignoring_existing=keys)
        insert_many(
            conn, transaction_partitions, [_joined(0, 9), _joined(1, 3), _joined(1, 4)], ignoring_existing=keys
        )
    assert _transaction_partitions(database) == [("txn-1", 1, 0, 5, None, False), ("txn-1", 1, 1, 3, None, False)]


def test_a_batch_whose_sequence_numbers_pass_the_32_bit_range_is_refused_not_wrapped(database: Database) -> None:
    record = Record("k", b"1", VALUE_JSON, None, 0)
    with database.writer.begin() as conn:
        topic = log_store.create_topic(conn, "t", 1)
        assert log_store.append(conn, topic, 0, [record], ProducerStamp(7, 0, 2**31 - 1)) == 0  # the last one fits
    with pytest.raises(ValidationFailed, match="run past 2147483647"), database.writer.begin() as conn:
        log_store.append(conn, topic, 0, [record] * 2, ProducerStamp(8, 0, 2**31 - 1))
    with database.reader.connect() as conn:
        assert [m.offset for m in log_reads.read_range(conn, topic, 0, 0, 10, 10)] == [0]


@pytest.mark.parametrize("in_rows_of_their_own", [False, True], ids=["batches-first", "rows-first"])
def test_messages_read_at_offsets_whether_alone_in_their_rows_or_inside_batches(
    database: Database, in_rows_of_their_own: bool
) -> None:
    def records(*values: int) -> list[Record]:
        return [Record(None, str(v).encode(), VALUE_JSON, None, v, properties=f"p{v}") for v in values]

    with database.writer.begin() as conn:
        topic = log_store.create_topic(conn, "t", 1)
        log_store.append(conn, topic, 0, records(0, 1))  # a row each: offsets 0 and 1
        log_store.append(conn, topic, 0, records(2, 3, 4), as_batch=True)  # one row: offsets 2..4
        log_store.append(conn, topic, 0, records(5))
    with database.reader.connect() as conn:
        found = log_reads.read_offsets(conn, topic, 0, [1, 3, 2, 5, 9], in_rows_of_their_own=in_rows_of_their_own)
    assert {offset: (message.offset, message.value, properties) for offset, (message, properties) in found.items()} == {
        1: (1, b"1", "p1"),
        2: (2, b"2", "p2"),
        3: (3, b"3", "p3"),
        5: (5, b"5", "p5"),
    }
