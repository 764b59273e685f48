"""SQL for administering topics: deletion, more partitions, per-topic configuration.

Deleting a topic removes its row, its partitions and everything indexed by its id
(group offsets, ended transactions' partition rows, producer sequences, resolved half
messages that targeted it, its configuration) in one transaction, and records the
id in ``deleted_topics``. Its messages, possibly millions, are left to
:func:`purge_deleted_messages`, which the retention job runs in bounded batches:
no reader can reach them once the partition rows are gone, and the id is never
handed out again.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, delete, insert, select, tuple_, update

from half_store.domain.admin_records import TopicConfig
from half_store.domain.errors import InvalidPartitions, TopicInUse
from half_store.domain.records import Topic, now_ms
from half_store.storage.schema import (
    deleted_topics,
    group_offsets,
    half_checks,
    half_messages,
    half_resolutions,
    messages,
    partitions,
    producer_sequences,
    retention_cursors,
    topic_configs,
    topics,
    transaction_offsets,
    transaction_partitions,
)
from half_store.storage.upsert import upsert


def lock_topic(conn: Connection, name: str, *, deleting: bool) -> Topic | None:
    """The topic's row, locked until the transaction ends (PostgreSQL; SQLite has one writer).

    For a deletion the lock waits for prepares holding the row share-locked (see
    ``log_store.existing_topics_locked``); an alteration changes no key, so it does not.
    """
    row = conn.execute(
        select(topics.c.topic_id, topics.c.name, topics.c.partitions)
        .where(topics.c.name == name)
        .with_for_update(key_share=not deleting)
    ).first()
    return Topic(int(row[0]), str(row[1]), int(row[2])) if row else None


def refuse_if_in_use(conn: Connection, topic: Topic) -> None:
    """Raise TopicInUse while an unfinished transaction or a prepared half message targets the topic.

    Run after the topic's partition rows and its own row are locked: a transaction that
    wrote to it (and so holds or held a partition lock) or a prepare (which share-locks
    the topic row) has then either committed, and is seen here, or waits and fails after.
    """
    open_write = conn.execute(
        select(transaction_partitions.c.txn_id)
        .where(transaction_partitions.c.topic_id == topic.topic_id, transaction_partitions.c.marker_offset.is_(None))
        .limit(1)
    ).scalar()
    if open_write is not None:
        raise TopicInUse(f"transaction {open_write} is open and wrote to topic {topic.name!r}; end or abort it first")
    # Offsets staged in a transaction are taken away when it ends: any row is an unfinished transaction's.
    staged = conn.execute(
        select(transaction_offsets.c.txn_id).where(transaction_offsets.c.topic_id == topic.topic_id).limit(1)
    ).scalar()
    if staged is not None:
        raise TopicInUse(f"transaction {staged} is open and commits group offsets of topic {topic.name!r}")
    # A half message is prepared exactly while it has a next check time.
    prepared = conn.execute(
        select(half_messages.c.message_id)
        .where(half_messages.c.topic_id == topic.topic_id, half_messages.c.next_check_at.isnot(None))
        .limit(1)
    ).scalar()
    if prepared is not None:
        raise TopicInUse(f"half message {prepared} is prepared for topic {topic.name!r}; commit or roll it back first")


def delete_topic(conn: Connection, topic: Topic) -> None:
    """Remove the topic and what refers to it, except its messages (see :func:`purge_deleted_messages`)."""
    topic_id = topic.topic_id
    halves_of_topic = select(half_messages.c.message_id).where(half_messages.c.topic_id == topic_id)
    conn.execute(delete(half_checks).where(half_checks.c.message_id.in_(halves_of_topic)))
    conn.execute(delete(half_resolutions).where(half_resolutions.c.message_id.in_(halves_of_topic)))
    conn.execute(delete(half_messages).where(half_messages.c.topic_id == topic_id))
    for table in (group_offsets, transaction_partitions, producer_sequences, retention_cursors):
        conn.execute(delete(table).where(table.c.topic_id == topic_id))
    conn.execute(delete(topic_configs).where(topic_configs.c.topic_id == topic_id))
    conn.execute(delete(partitions).where(partitions.c.topic_id == topic_id))
    conn.execute(delete(topics).where(topics.c.topic_id == topic_id))
    conn.execute(insert(deleted_topics).values(topic_id=topic_id, name=topic.name, deleted_at=now_ms(), purged=False))


def add_partitions(conn: Connection, topic: Topic, count: int) -> Topic:
    """Grow the topic to ``count`` partitions (new ones start empty at offset 0); fewer is refused."""
    if count < topic.partitions:
        raise InvalidPartitions(
            f"topic {topic.name!r} has {topic.partitions} partitions; partitions can be added, never removed"
        )
    if count == topic.partitions:
        return topic
    conn.execute(update(topics).where(topics.c.topic_id == topic.topic_id).values(partitions=count))
    conn.execute(
        insert(partitions),
        [
            {"topic_id": topic.topic_id, "partition": p, "next_offset": 0, "log_start_offset": 0}
            for p in range(topic.partitions, count)
        ],
    )
    return Topic(topic.topic_id, topic.name, count)


# -- configuration -----------------------------------------------------------------------------


def config_of(conn: Connection, topic_id: int) -> TopicConfig:
    row = conn.execute(
        select(topic_configs.c.retention_ms, topic_configs.c.retention_bytes).where(
            topic_configs.c.topic_id == topic_id
        )
    ).first()
    return TopicConfig() if row is None else TopicConfig(_int(row[0]), _int(row[1]))


def put_config(conn: Connection, topic_id: int, changes: Sequence[tuple[str, int | None]]) -> TopicConfig:
    """Apply the given keys (None: back to the broker's default) and return the topic's configuration."""
    current = config_of(conn, topic_id)
    values = {"retention_ms": current.retention_ms, "retention_bytes": current.retention_bytes}
    values.update(changes)
    upsert(conn, topic_configs, [{"topic_id": topic_id, **values, "updated_at": now_ms()}], keys=("topic_id",))
    return TopicConfig(values["retention_ms"], values["retention_bytes"])


def all_configs(conn: Connection) -> dict[int, TopicConfig]:
    rows = conn.execute(select(topic_configs.c.topic_id, topic_configs.c.retention_ms, topic_configs.c.retention_bytes))
    return {int(t): TopicConfig(_int(ms), _int(size)) for t, ms, size in rows}


def _int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


# -- messages of deleted topics ------------------------------------------------------------------


def unpurged_deleted_topics(conn: Connection) -> list[int]:
    rows = conn.execute(select(deleted_topics.c.topic_id).where(deleted_topics.c.purged.is_(False)))
    return [int(row[0]) for row in rows]


def purge_deleted_messages(
    conn: Connection, topic_id: int, limit: int, after: tuple[int, int] = (0, 0)
) -> tuple[int, tuple[int, int]]:
    """Delete up to ``limit`` offsets of a deleted topic, from the lowest (partition, offset) at or past ``after``.

    Returns how many went and where the next call starts; marks the topic purged once
    none are left. Each call reads and deletes a bounded range through the primary key,
    starting where the last one stopped (on PostgreSQL the index keeps the deleted rows
    until vacuum, and a scan from the start would step over all of them).
    """
    head = conn.execute(
        select(messages.c.partition, messages.c.offset)
        .where(messages.c.topic_id == topic_id, tuple_(messages.c.partition, messages.c.offset) >= after)
        .order_by(messages.c.partition, messages.c.offset)
        .limit(1)
    ).first()
    if head is None:
        conn.execute(update(deleted_topics).where(deleted_topics.c.topic_id == topic_id).values(purged=True))
        return 0, after
    partition, first = int(head[0]), int(head[1])
    removed = conn.execute(
        delete(messages)
        .where(
            messages.c.topic_id == topic_id,
            messages.c.partition == partition,
            messages.c.offset >= first,
            messages.c.offset < first + limit,
        )
        .returning(messages.c.record_count)
    ).scalars()
    return sum(removed), (partition, first + limit)
