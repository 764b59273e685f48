"""The writes of a share-group operation, applied together: records, end offsets, counters, dead letters.

Receives, acknowledgements, extensions, transactional acknowledgements, the end of a
transaction holding acknowledgements and the dead-letter sweep all decide what happens
to records through :class:`~half_store.domain.share_state.InFlightRecord` moves and
hand the results to :class:`ShareChanges`, which writes them in the caller's database
transaction. A record's dead letter is appended in that same transaction as the record
leaves the table, so a message is dead-lettered exactly once, whoever races.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from dataclasses import dataclass, field

import orjson
from sqlalchemy import Connection

from half_store.domain.constants import (
    DLQ_HEADER_DELIVERY_COUNT,
    DLQ_HEADER_OFFSET,
    DLQ_HEADER_PARTITION,
    DLQ_HEADER_REASON,
    DLQ_HEADER_TOPIC,
    dead_letter_topic,
)
from half_store.domain.errors import TopicExists
from half_store.domain.records import Record, Topic, now_ms
from half_store.domain.share_state import DeadLetterReason, InFlightRecord, RecordState, SharePartitionKey
from half_store.metrics import SHARE_ACCEPTED, SHARE_DEAD_LETTERED, SHARE_RELEASED
from half_store.services.notifier import PartitionKey
from half_store.storage import log_reads, log_store, share_store
from half_store.storage.share_store import ShareCursor
from half_store.storage.store import Store


@dataclass
class ShareChanges:
    """Records moved by an operation, keyed by where they live; written by :meth:`apply`.

    ``put`` the record as it is after its move: AVAILABLE or ACQUIRED records are written
    (inserted when ``new``), ACCEPTED and ARCHIVED ones leave the table, archived ones
    with a dead letter. ``end_offsets``: share partitions whose end offset moved.
    """

    inserted: list[InFlightRecord] = field(default_factory=list)
    updated: dict[tuple[SharePartitionKey, int], InFlightRecord] = field(default_factory=dict)
    accepted: list[InFlightRecord] = field(default_factory=list)
    archived: list[tuple[InFlightRecord, DeadLetterReason]] = field(default_factory=list)
    dropped: list[InFlightRecord] = field(default_factory=list)
    end_offsets: set[SharePartitionKey] = field(default_factory=set)
    counts: dict[SharePartitionKey, tuple[int, int]] = field(default_factory=dict)  # (accepted, dead-lettered)
    released: int = 0
    touched: set[PartitionKey] = field(default_factory=set)  # partitions with news for waiting receives

    def put(self, record: InFlightRecord, reason: DeadLetterReason | None = None, *, new: bool = False) -> None:
        if record.state is RecordState.ACCEPTED:
            self.accepted.append(record)
        elif record.state is RecordState.ARCHIVED:
            assert reason is not None, "a dead letter needs its reason"
            self.archived.append((record, reason))
        elif new:
            self.inserted.append(record)
        else:
            self.updated[(record.share_key, record.offset)] = record
            if record.state is RecordState.AVAILABLE:  # only a lock given back early is written as AVAILABLE
                self.released += 1

    def drop(self, record: InFlightRecord) -> None:
        """Forget a record whose message the log no longer has (retention): neither accepted nor dead-lettered."""
        self.dropped.append(record)

    def apply(
        self, conn: Connection, store: Store, cursors: dict[SharePartitionKey, ShareCursor], *, finish: bool = True
    ) -> None:
        """Write the records put so far (the share partitions are locked: ``cursors``), then start afresh;
        with ``finish`` also the share partitions' end offsets and counters (once per operation).

        The partitions with news for waiters (sources with released records, dead-letter
        topics with new letters) are added to ``touched``.
        """
        gone = self.accepted + self.dropped + [record for record, _ in self.archived]
        share_store.insert_records(conn, self.inserted)
        share_store.update_records(conn, list(self.updated.values()))
        share_store.delete_records(conn, gone)
        _keep_hints(cursors, self.inserted, list(self.updated.values()), gone)
        for record in self.accepted:
            accepted, dead = self.counts.get(record.share_key, (0, 0))
            self.counts[record.share_key] = (accepted + 1, dead)
        for record, _ in self.archived:
            accepted, dead = self.counts.get(record.share_key, (0, 0))
            self.counts[record.share_key] = (accepted, dead + 1)
        self.touched |= {(r.topic_id, r.partition) for r in self.updated.values() if r.state is RecordState.AVAILABLE}
        self.touched |= _append_dead_letters(conn, store, self.archived)
        SHARE_ACCEPTED.inc(len(self.accepted))
        SHARE_RELEASED.inc(self.released)
        for _, reason in self.archived:
            SHARE_DEAD_LETTERED.labels(reason.value).inc()
        self.inserted, self.accepted, self.archived, self.dropped = [], [], [], []
        self.updated, self.released = {}, 0
        if finish:
            share_store.update_share_partitions(
                conn,
                {
                    key: (cursors[key].end_offset, *self.counts.get(key, (0, 0)))
                    for key in self.end_offsets | set(self.counts)
                },
            )
            self.end_offsets, self.counts = set(), {}


def _keep_hints(
    cursors: dict[SharePartitionKey, ShareCursor],
    inserted: list[InFlightRecord],
    updated: list[InFlightRecord],
    gone: list[InFlightRecord],
) -> None:
    """Keep the locked share partitions' hints true for the operations after this one in the transaction."""
    for record in inserted:
        cursors[record.share_key].in_flight += 1
    for record in gone:
        cursors[record.share_key].in_flight -= 1
    for record in inserted + updated:
        cursor = cursors[record.share_key]
        if record.txn_id is None and (cursor.next_visible is None or record.visible_at < cursor.next_visible):
            cursor.next_visible = record.visible_at


def _append_dead_letters(
    conn: Connection, store: Store, archived: list[tuple[InFlightRecord, DeadLetterReason]]
) -> set[PartitionKey]:
    """Append each archived record's message to ``DLQ.{group}``, partition 0, with where it came from and why."""
    by_group: dict[str, list[tuple[InFlightRecord, DeadLetterReason]]] = defaultdict(list)
    for record, reason in archived:
        by_group[record.group].append((record, reason))
    touched: set[PartitionKey] = set()
    for group, letters in sorted(by_group.items()):
        by_source: dict[tuple[int, int], list[int]] = defaultdict(list)
        for record, _ in letters:
            by_source[(record.topic_id, record.partition)].append(record.offset)
        bodies = {}
        for (topic_id, partition), offsets in by_source.items():
            source = store.topic_by_id_sync(conn, topic_id)
            for offset, (message, _) in log_reads.read_offsets(conn, source, partition, offsets).items():
                bodies[(topic_id, partition, offset)] = (source.name, message)
        now = now_ms()
        letters_out: list[Record] = []
        for record, reason in letters:
            found = bodies.get((record.topic_id, record.partition, record.offset))
            if found is None:  # the message itself is gone (retention): nothing left to keep
                continue
            source_name, message = found
            headers = orjson.loads(message.headers) if message.headers else {}
            headers.update({
                DLQ_HEADER_TOPIC: source_name,
                DLQ_HEADER_PARTITION: str(record.partition),
                DLQ_HEADER_OFFSET: str(record.offset),
                DLQ_HEADER_DELIVERY_COUNT: str(record.delivery_count),
                DLQ_HEADER_REASON: reason.value,
            })
            encoded = orjson.dumps(headers).decode()
            letters_out.append(Record(message.key, message.value, message.value_kind, encoded, now))
        if letters_out:
            topic = _dead_letter_topic(conn, store, group)
            log_store.append(conn, topic, 0, letters_out)
            touched.add((topic.topic_id, 0))
    return touched


def _dead_letter_topic(conn: Connection, store: Store, group: str) -> Topic:
    """``DLQ.{group}``, created with one partition the first time the group needs it.

    Looked up without the store's topic cache: a topic created in a database transaction
    that then rolls back must not be remembered.
    """
    name = dead_letter_topic(group)
    found = log_store.find_topic(conn, name)
    if found is not None:
        return found
    with contextlib.suppress(TopicExists):  # another broker process created it meanwhile
        return log_store.create_topic(conn, name, 1)
    found = log_store.find_topic(conn, name)
    assert found is not None, f"{name} exists but cannot be read"
    return found


def finish_transaction_acks(
    conn: Connection, store: Store, committed: list[str], aborted: list[str], max_deliveries: int
) -> dict[str, set[PartitionKey]]:
    """Phase two of ending transactions, for the share-group records their acknowledgements hold.

    A committed transaction's records are accepted; an aborted (or timed-out) one's are
    released with their delivery counts kept, or dead-lettered if that was their last
    allowed delivery. Returns, per transaction, the partitions whose waiters have news.
    """
    records = share_store.records_of_transactions(conn, committed + aborted)
    if not records:
        return {}
    cursors = share_store.lock_share_partitions(conn, sorted({r.share_key for r in records}))
    done = set(committed)
    changes = ShareChanges()
    now = now_ms()
    for record in records:
        if record.txn_id in done:
            changes.put(record.accept())
        else:
            changes.put(*record.release(now, 0, max_deliveries))
    changes.apply(conn, store, cursors)
    return {txn_id: changes.touched for txn_id in {r.txn_id for r in records} if txn_id is not None}
