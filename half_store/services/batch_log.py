"""The log read as stored batches, for byte-protocol fronts: Kafka's Fetch and ListOffsets.

One call answers a whole Kafka Fetch (every partition it names, long-polling until one
has data) and one a whole ListOffsets, so a Kafka request is one call into the core.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from sqlalchemy import Connection

from half_store.domain.constants import CONTROL_NONE, ISOLATION_READ_COMMITTED
from half_store.domain.errors import BrokerError, OffsetOutOfRange, PartitionNotFound, TopicNotFound
from half_store.domain.log_batches import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    BatchPage,
    BatchRead,
    OffsetAnswer,
    OffsetQuery,
)
from half_store.domain.records import Topic
from half_store.services.log_service import LogService, check_partition
from half_store.storage import batch_reads, log_store


class BatchLog:
    def __init__(self, log: LogService) -> None:
        self.log = log
        self.store = log.store
        self.notifier = log.notifier

    async def fetch_batches(
        self, reads: Sequence[BatchRead], max_bytes: int, max_wait_ms: int, min_bytes: int, isolation: str
    ) -> list[BatchPage]:
        """Rows from each read's offset; waits up to ``max_wait_ms`` until ``min_bytes`` are there."""
        topics: dict[str, Topic | BrokerError] = {}
        for read in reads:
            if read.topic not in topics:
                try:
                    topics[read.topic] = await self.store.topic(read.topic)
                except TopicNotFound as error:
                    topics[read.topic] = error
        committed = isolation == ISOLATION_READ_COMMITTED

        def query(conn: Connection) -> list[BatchPage]:
            budget = max_bytes
            pages = []
            for read in reads:
                page = _read_one(conn, topics[read.topic], read, max(1, min(read.max_bytes, budget)), committed)
                budget -= sum(len(b.value) for b in page.batches)
                pages.append(page)
            return pages

        pages = await self.store.read(query)
        if max_wait_ms <= 0 or _bytes_of(pages) >= max(min_bytes, 1) or any(p.error for p in pages):
            return pages
        keys = [(t.topic_id, r.partition) for r in reads if isinstance(t := topics[r.topic], Topic)]
        deadline = time.monotonic() + max_wait_ms / 1000
        async with self.notifier.admitted():
            while (remaining := deadline - time.monotonic()) > 0:
                await self.notifier.wait(keys, remaining)
                pages = await self.store.read(query)
                if _bytes_of(pages) >= max(min_bytes, 1) or any(p.error for p in pages):
                    break
        return pages

    async def list_offsets(self, queries: Sequence[OffsetQuery], isolation: str) -> list[OffsetAnswer]:
        committed = isolation == ISOLATION_READ_COMMITTED
        topics: dict[str, Topic | None] = {}
        for query in queries:
            if query.topic not in topics:
                try:
                    topics[query.topic] = await self.store.topic(query.topic)
                except TopicNotFound:
                    topics[query.topic] = None

        def read(conn: Connection) -> list[OffsetAnswer]:
            answers = []
            for q in queries:
                topic = topics[q.topic]
                if topic is None or not 0 <= q.partition < topic.partitions:
                    answers.append(OffsetAnswer(q.topic, q.partition, -1, -1, PartitionNotFound.code))
                    continue
                state = log_store.partition_state(conn, topic, q.partition)
                end = state.last_stable_offset if committed else state.high_watermark
                if q.timestamp == EARLIEST_TIMESTAMP:
                    answers.append(OffsetAnswer(q.topic, q.partition, state.log_start_offset, -1))
                elif q.timestamp == LATEST_TIMESTAMP:
                    answers.append(OffsetAnswer(q.topic, q.partition, end, -1))
                else:
                    found = batch_reads.offset_for_time(conn, topic, q.partition, q.timestamp, end)
                    offset, ts = found if found is not None else (-1, -1)
                    answers.append(OffsetAnswer(q.topic, q.partition, offset, ts))
            return answers

        return await self.store.read(read)


def _bytes_of(pages: list[BatchPage]) -> int:
    return sum(len(b.value) for p in pages for b in p.batches)


def _read_one(conn: Connection, topic: Topic | BrokerError, read: BatchRead, max_bytes: int, committed: bool) -> BatchPage:
    if not isinstance(topic, Topic):
        return BatchPage(read.topic, read.partition, (), None, error=topic.code)
    try:
        check_partition(topic, read.partition)
        state = log_store.partition_state(conn, topic, read.partition)
    except PartitionNotFound as error:
        return BatchPage(read.topic, read.partition, (), None, error=error.code)
    if not state.log_start_offset <= read.offset <= state.high_watermark:
        return BatchPage(read.topic, read.partition, (), state, error=OffsetOutOfRange.code)
    end = state.last_stable_offset if committed else state.high_watermark
    batches, txn_ids = batch_reads.read_batches(conn, topic, read.partition, read.offset, end, max_bytes)
    if not batches or not txn_ids or not committed:
        # Kafka sends aborted lists to read_committed readers only; the others read everything.
        return BatchPage(read.topic, read.partition, batches, state)
    last = batches[-1].offset + batches[-1].record_count
    aborted = batch_reads.aborted_in_range(conn, topic.topic_id, read.partition, batches[0].offset, last)
    if not aborted:
        return BatchPage(read.topic, read.partition, batches, state)
    ranges = [kafka_range for _, kafka_range in aborted if kafka_range is not None]
    # Kafka clients drop aborted records by producer id; a transaction without a producer
    # (Pulsar style) has none, so the broker leaves aborted rows out itself, as REST does.
    aborted_ids = {txn_id for txn_id, _ in aborted}
    batches = [b for b in batches if b.control != CONTROL_NONE or b.txn_id not in aborted_ids]
    return BatchPage(read.topic, read.partition, batches, state, ranges)
