"""The partitioned log as a service: topics, produce, fetch and group offsets."""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

from sqlalchemy import Connection

from half_store.domain.constants import ISOLATION_READ_COMMITTED, is_system_topic
from half_store.domain.errors import (
    FencedMemberEpoch,
    OffsetOutOfRange,
    PartitionNotFound,
    ReservedTopic,
    TopicNotFound,
)
from half_store.domain.group_records import MemberRef
from half_store.domain.message_page import MessagePage
from half_store.domain.partitioner import partition_for_key
from half_store.domain.records import (
    AppendResult,
    FetchResult,
    GroupOffset,
    OffsetCommit,
    ProducerStamp,
    Record,
    Topic,
)
from half_store.domain.tags import TagFilter
from half_store.metrics import GROUP_FENCED_COMMITS
from half_store.services import group_fencing
from half_store.services.notifier import PartitionNotifier
from half_store.services.producer_owners import ProducerOwners
from half_store.services.stamped_append import STAMPED_APPEND, StampedAppend
from half_store.storage import group_store, log_reads, log_store, txn_store
from half_store.storage.log_store import AppendRequest
from half_store.storage.store import Store

ClientGone = Callable[[], Awaitable[bool]]


class LogService:
    def __init__(self, store: Store, notifier: PartitionNotifier) -> None:
        self.store = store
        self.notifier = notifier
        self.producer_owners = ProducerOwners(store)
        self._round_robin: dict[str, itertools.count[int]] = defaultdict(itertools.count)

    # -- topics -------------------------------------------------------------------------

    async def create_topic(self, name: str, partition_count: int) -> Topic:
        if is_system_topic(name):
            raise ReservedTopic(f"{name!r} is a reserved system topic name")
        return await self.store.write(lambda conn: log_store.create_topic(conn, name, partition_count))

    async def list_topics(self, include_system: bool) -> list[Topic]:
        found = await self.store.read(log_store.list_topics)
        return [t for t in found if include_system or not is_system_topic(t.name)]

    async def topic_name_of(self, topic_id: int) -> str | None:
        """The name of the topic with ``topic_id``, or None if there is none (deleted, or never was)."""
        try:
            return await self.store.read(lambda conn: self.store.topic_by_id_sync(conn, topic_id).name)
        except TopicNotFound:
            return None

    async def writable_topic(self, name: str) -> Topic:
        if is_system_topic(name):
            raise ReservedTopic(f"{name!r} is a system topic; clients cannot write to it")
        return await self.store.topic(name)

    @asynccontextmanager
    async def partition_rows_of(self, topic: Topic) -> AsyncIterator[None]:
        """Around database work on partitions ``topic`` lists: a missing row means the topic is gone.

        Partitions are never removed, so if the database lacks one the topic (as this process
        knew it) was deleted: the cache forgets it and the caller gets 404 TOPIC_NOT_FOUND, or,
        if a topic of that name exists again, the original error. A long poll on a topic that
        is deleted meanwhile ends this way too.
        """
        try:
            yield
        except PartitionNotFound:
            self.store.forget_topic(topic.name)
            await self.store.topic(topic.name)  # TopicNotFound when it is gone
            raise

    # -- produce --------------------------------------------------------------------------

    def choose_partition(self, topic: Topic, requested: int | None, key: str | None) -> int:
        if requested is not None:
            check_partition(topic, requested)
            return requested
        if key is not None:
            return partition_for_key(key, topic.partitions)
        return next(self._round_robin[topic.name]) % topic.partitions

    async def produce(
        self, topic_name: str, records: Sequence[Record], partitions: Sequence[int | None]
    ) -> list[tuple[int, int]]:
        """Append to a topic, all or nothing; returns (partition, offset) in request order.

        ``partitions`` holds each record's requested partition, None to let the broker pick.
        """
        topic = await self.writable_topic(topic_name)
        chosen = [self.choose_partition(topic, p, r.key) for r, p in zip(records, partitions, strict=True)]
        by_partition: dict[int, list[int]] = defaultdict(list)
        for index, partition in enumerate(chosen):
            by_partition[partition].append(index)
        placed = {p: [records[i] for i in indexes] for p, indexes in by_partition.items()}
        async with self.partition_rows_of(topic):
            bases = await self.store.append(AppendRequest(topic, placed, as_batches=True))
        self.notifier.notify((topic.topic_id, p) for p in by_partition)
        offsets: list[tuple[int, int]] = [(0, 0)] * len(records)
        for partition, indexes in by_partition.items():
            for position, index in enumerate(indexes):
                offsets[index] = (partition, bases[partition] + position)
        return offsets

    async def produce_idempotent(
        self, topic_name: str, partition: int, records: Sequence[Record], stamp: ProducerStamp, principal: str | None = None
    ) -> AppendResult:
        """Append a batch to one partition, deduplicated by producer id and sequence (``principal``'s producer)."""
        await self.producer_owners.check(stamp.producer_id, principal)
        topic = await self.writable_topic(topic_name)
        check_partition(topic, partition)

        async with self.partition_rows_of(topic):
            result = await self.store.write_merged(
                STAMPED_APPEND, StampedAppend(topic, partition, records, stamp), locks=[(topic.topic_id, partition)]
            )
        if not result.duplicate:
            self.notifier.notify([(topic.topic_id, partition)])
        return result

    # -- fetch ------------------------------------------------------------------------------

    async def fetch(
        self,
        topic_name: str,
        partition: int,
        offset: int,
        max_messages: int,
        max_wait_ms: int,
        isolation: str,
        client_gone: ClientGone | None = None,
        tags: str | None = None,
    ) -> FetchResult:
        """Read from ``offset``; with ``max_wait_ms`` wait for data, until then or until the client leaves.

        ``tags``: a tag expression; the page keeps the messages it matches, and ``next_offset``
        still moves past the others (a page may then be empty before the end of the log).
        """
        tag_filter = TagFilter.parse(tags)
        topic = await self.store.topic(topic_name)
        check_partition(topic, partition)

        def read(conn: Connection) -> FetchResult:
            found = read_partition(conn, topic, partition, offset, max_messages, isolation)
            if tag_filter.everything or not found.messages:
                return found
            kept = MessagePage.of(topic.name, partition, [m for m in found.messages if tag_filter.matches(m.headers)])
            return FetchResult(kept, found.next_offset, found.state)

        async with self.partition_rows_of(topic):
            result = await self.store.read(read)
            if max_wait_ms <= 0 or result.messages or result.next_offset != offset:
                return result
            deadline = time.monotonic() + max_wait_ms / 1000
            async with self.notifier.admitted():
                while (remaining := deadline - time.monotonic()) > 0:
                    await self.notifier.wait([(topic.topic_id, partition)], remaining)
                    if client_gone is not None and await client_gone():
                        break
                    result = await self.store.read(read)
                    if result.messages or result.next_offset != offset:
                        break
        return result

    # -- consumer groups ------------------------------------------------------------------------

    async def commit_group_offsets(
        self, group: str, commits: Sequence[OffsetCommit], member: MemberRef | None = None
    ) -> None:
        """Set the group's offsets; while it has live members, only a member may, for its own partitions."""
        resolved = [(await self.store.topic(c.topic), c) for c in commits]
        for topic, commit in resolved:
            check_partition(topic, commit.partition)

        def unit(conn: Connection) -> None:
            for topic, commit in resolved:
                check_offset_committable(conn, topic, commit)
            group_fencing.check_commit(conn, group, member, [(t, c.partition) for t, c in resolved])
            group_store.commit_offsets(
                conn, group, [(t.topic_id, c.partition, c.offset, c.metadata) for t, c in resolved]
            )

        try:
            await self._write_for_topics([t for t, _ in resolved], unit)
        except FencedMemberEpoch:
            GROUP_FENCED_COMMITS.labels("offsets").inc()
            raise

    async def _write_for_topics(self, found: list[Topic], unit: Callable[[Connection], None]) -> None:
        """Write ``unit``; a missing partition row of one of ``found`` means that topic was deleted."""
        try:
            await self.store.write(unit)
        except PartitionNotFound as error:
            for topic in found:
                self.store.forget_topic(topic.name)
                await self.store.topic(topic.name)
            raise error

    async def group_offsets(self, group: str) -> list[GroupOffset]:
        return await self.store.read(lambda conn: group_store.group_offsets_with_lag(conn, group))

    async def pending_group_offsets(self, group: str) -> set[tuple[str, int]]:
        """The partitions whose offsets for ``group`` an unfinished transaction has staged: a committed offset
        read now may be overtaken when it commits (Kafka's OffsetFetch ``require_stable``)."""
        return await self.store.read(lambda conn: txn_store.pending_offset_partitions(conn, group))


def check_partition(topic: Topic, partition: int) -> None:
    if not 0 <= partition < topic.partitions:
        raise PartitionNotFound(f"topic {topic.name!r} has partitions 0..{topic.partitions - 1}, not {partition}")


def check_offset_committable(conn: Connection, topic: Topic, commit: OffsetCommit) -> None:
    """A group offset may not point past the data: it would skip messages not yet written."""
    _, high_watermark = log_store.partition_bounds(conn, topic, commit.partition)
    if commit.offset > high_watermark:
        raise OffsetOutOfRange(
            f"offset {commit.offset} is past the high watermark {high_watermark} of {topic.name}/{commit.partition}"
        )


def read_partition(
    conn: Connection, topic: Topic, partition: int, offset: int, max_messages: int, isolation: str
) -> FetchResult:
    """One fetch: messages from ``offset`` up to the LSO (read_committed) or high watermark."""
    state = log_store.partition_state(conn, topic, partition)
    if not state.log_start_offset <= offset <= state.high_watermark:
        raise OffsetOutOfRange(
            f"offset {offset} is outside [{state.log_start_offset}, {state.high_watermark}] "
            f"of {topic.name}/{partition}"
        )
    read_committed = isolation == ISOLATION_READ_COMMITTED
    end = state.last_stable_offset if read_committed else state.high_watermark
    if offset >= end:
        return FetchResult([], offset, state)
    # At most ``max_messages`` offsets are scanned (Kafka bounds a fetch by bytes the same
    # way): a record batch is read whole, and a row bound would let a page of large batches
    # read thousands of messages to return a hundred.
    scanned_to = min(end, offset + max_messages)
    found = log_reads.read_range(conn, topic, partition, offset, scanned_to, max_messages)
    # Control markers are not returned but still occupy offsets: a short page means
    # everything up to `scanned_to` was scanned.
    next_offset = found[-1].offset + 1 if len(found) == max_messages else scanned_to
    if read_committed and found.txn_ids.count(None) != len(found):  # some of it was written in a transaction
        aborted = log_reads.aborted_transactions(conn, topic.topic_id, partition, offset, next_offset)
        if aborted:
            found = found.without(aborted)
    return FetchResult(found, next_offset, state)
