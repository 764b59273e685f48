"""Copying one topic, exactly once: each batch and the position it reaches commit in one target transaction.

A session starts with InitProducerId for the topic's transactional id: the new epoch
fences any older replicator of this topic and aborts whatever transaction a killed
predecessor left open. It then reads the committed progress back from the target (its
group's offsets and their metadata: :mod:`app.replication.snapshots`), and from there
repeats: read committed messages from the source, write their copies and the new
progress in one transaction, commit. A crash at any point leaves the target either
with a batch and its progress, or with neither; the next session resumes from what
committed. Any failure ends the session; the next one starts from the committed
progress again, so there is one recovery path and it is the start-up path.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace

from app.replication.cluster import Cluster, Page
from app.replication.copying import (
    SKIPPED_LOOP,
    SKIPPED_RETENTION,
    encoded_copies,
    progress_group,
    requests_of,
    transactional_id,
)
from app.replication.errors import ClusterError, ReplicationError, TopicMismatch
from app.replication.snapshots import History, Snapshot, decode_history, encode_history, record
from app.replication.state import ReplicationState, now_ms
from sdk.models import CommittedOffset, ProducerIdentity, TopicMetadata

log = logging.getLogger("halfmq.replication")

TRANSACTION_TIMEOUT_MS = 60_000
FETCH_WAIT_MS = 500
READ_AHEAD_PAGES = 4
"""Pages read ahead per partition while a write goes on; at most this many go into one transaction."""
MAX_PRODUCE_MESSAGES = 10_000
"""Copies per produce request at most: the broker's default HALFMQ_MAX_BATCH_MESSAGES."""


@dataclass(frozen=True)
class CopySettings:
    source_cluster: str
    target_cluster: str
    snapshot_interval_ms: int = 1000
    batch_messages: int = 1000


class StartOver(Exception):
    """Something this session cannot make sense of: a new one starts from the committed position."""


class FetchOutOfRange(Exception):
    def __init__(self, partition: int, offset: int) -> None:
        super().__init__(f"offset {offset} of partition {partition} is out of range")
        self.partition = partition
        self.offset = offset


@dataclass(frozen=True, slots=True)
class Fetched:
    """A page from the source and the encoded copies of its messages (those that go to the target)."""

    page: Page
    copies: list[bytes]


class Fetcher:
    """Reads each partition ahead of the writes, up to ``depth`` pages.

    Each arriving page starts the partition's next fetch at once, from the page's end, and
    its copies are encoded on the fetching thread, so reading the source and preparing the
    copies go on while the copier writes to the target. Pages that pile up meanwhile are
    handed out together, as one page per partition, and go to the target in one
    transaction. :meth:`close` ends the reading.
    """

    def __init__(
        self,
        source: Cluster,
        topic: str,
        pool: ThreadPoolExecutor,
        batch_messages: int,
        encode: Callable[[Page], list[bytes]],
        depth: int = READ_AHEAD_PAGES,
    ) -> None:
        self.source = source
        self.topic = topic
        self.pool = pool
        self.batch_messages = batch_messages
        self.encode = encode
        self.depth = depth
        self._arrivals = threading.Condition()
        self._read_ahead: dict[int, list[Fetched]] = {}
        self._idle: dict[int, Fetched] = {}  # partitions whose last fetch found nothing new
        self._full: dict[int, int] = {}  # partitions ``depth`` pages ahead: where they go on
        self._failure: BaseException | None = None
        self._closed = False

    def start(self, partition: int, offset: int) -> None:
        future = self.pool.submit(self._fetch, partition, offset)
        future.add_done_callback(lambda done: self._arrived(partition, offset, done))

    def _fetch(self, partition: int, offset: int) -> Fetched:
        page = self.source.fetch(
            self.topic, partition, offset, max_messages=self.batch_messages, max_wait_ms=FETCH_WAIT_MS
        )
        return Fetched(page, self.encode(page))

    def _arrived(self, partition: int, offset: int, future: Future[Fetched]) -> None:
        follow_from: int | None = None
        with self._arrivals:
            if self._closed or future.cancelled():
                return
            error = future.exception()
            if error is not None:
                if isinstance(error, ClusterError) and error.code == "OFFSET_OUT_OF_RANGE":
                    error = FetchOutOfRange(partition, offset)
                    # What was read ahead of the failed offset is dropped: the copier goes on from
                    # its committed position.
                    self._read_ahead.pop(partition, None)
                    self._full.pop(partition, None)
                    self._idle.pop(partition, None)
                self._failure = self._failure or error
            else:
                fetched = future.result()
                page = fetched.page
                if page.next_offset == page.offset:
                    self._idle[partition] = fetched
                    follow_from = offset  # long-poll again
                else:
                    pages = self._read_ahead.setdefault(partition, [])
                    pages.append(fetched)
                    if len(pages) < self.depth:
                        follow_from = page.next_offset
                    else:
                        self._full[partition] = page.next_offset
            self._arrivals.notify_all()
        if follow_from is not None:
            self.start(partition, follow_from)

    def ready(self, timeout: float) -> list[Fetched]:
        """One page per partition (those read ahead, merged), waiting up to ``timeout`` for anything.

        A page without progress still tells where the source's end is. Raises the first
        failed fetch's error (:class:`FetchOutOfRange` for an offset the source no longer has).
        """
        with self._arrivals:
            self._arrivals.wait_for(lambda: self._read_ahead or self._idle or self._failure, timeout)
            if self._failure is not None:
                failure, self._failure = self._failure, None
                raise failure
            found = [merged(pages) for pages in self._read_ahead.values()]
            found += [page for partition, page in self._idle.items() if partition not in self._read_ahead]
            full, self._full = self._full, {}
            self._read_ahead, self._idle = {}, {}
        for partition, offset in full.items():
            self.start(partition, offset)
        return sorted(found, key=lambda fetched: fetched.page.partition)

    def close(self) -> None:
        with self._arrivals:
            self._closed = True


def merged(pages: list[Fetched]) -> Fetched:
    """Consecutive pages of one partition as one."""
    if len(pages) == 1:
        return pages[0]
    first, last = pages[0].page, pages[-1].page
    messages = [message for fetched in pages for message in fetched.page.messages]
    page = replace(last, offset=first.offset, messages=messages)  # where the first began, where the last ends
    return Fetched(page, [copy for fetched in pages for copy in fetched.copies])


class TopicCopier:
    """Copies one topic's partitions from the source to the target; see the module docstring."""

    def __init__(
        self, topic: str, source: Cluster, target: Cluster, settings: CopySettings, state: ReplicationState
    ) -> None:
        self.topic = topic
        self.source = source
        self.target = target
        self.settings = settings
        self.state = state
        self.transactional_id = transactional_id(settings.source_cluster, topic)
        self.group = progress_group(settings.source_cluster)
        self._histories: dict[int, History] = {}
        self._sequences: dict[int, int] = {}
        self.pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix=f"fetch-{topic}")
        self.writers = ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"write-{topic}")

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.writers.shutdown(wait=False, cancel_futures=True)

    # -- one session -----------------------------------------------------------------------

    def session(self, stop: threading.Event, progressed: threading.Event) -> None:
        """Run until ``stop`` is set; raises on any failure (the caller decides whether to start again).

        ``progressed`` is set whenever a batch commits.
        """
        producer = self.target.init_producer(self.transactional_id, TRANSACTION_TIMEOUT_MS)
        partitions = self._load_progress()
        self._sequences = dict.fromkeys(partitions, 0)
        fetcher = Fetcher(self.source, self.topic, self.pool, self.settings.batch_messages, self._encode)
        try:
            self._copy(producer, partitions, fetcher, stop, progressed)
        finally:
            fetcher.close()

    def _copy(
        self,
        producer: ProducerIdentity,
        partitions: list[int],
        fetcher: Fetcher,
        stop: threading.Event,
        progressed: threading.Event,
    ) -> None:
        for partition in partitions:
            fetcher.start(partition, self._histories[partition][-1].source)
        log.info(
            "%s: copying %d partition(s) from %s as producer %d epoch %d",
            self.topic,
            len(partitions),
            ", ".join(f"{p}@{self._histories[p][-1].source}" for p in partitions),
            producer.producer_id,
            producer.producer_epoch,
        )
        while not stop.is_set():
            try:
                pages = fetcher.ready(timeout=1.0)
            except FetchOutOfRange as gap:
                fetcher.start(gap.partition, self._jump_over_deleted(producer, gap.partition))
                progressed.set()
                continue
            for fetched in pages:
                page = fetched.page
                first = page.messages[0]["timestamp"] if page.messages else None
                self.state.fetched(self.topic, page.partition, page.last_stable_offset, first)
            moved = [fetched for fetched in pages if fetched.page.next_offset != fetched.page.offset]
            for fetched in moved:
                page = fetched.page
                if page.offset != self._histories[page.partition][-1].source:
                    raise StartOver(f"{self.topic}/{page.partition}: a page at {page.offset} is not at the position")
            if moved:
                self._write(producer, moved)
                progressed.set()

    def _encode(self, page: Page) -> list[bytes]:
        return encoded_copies(page.messages, self.settings.source_cluster, self.settings.target_cluster)

    def _load_progress(self) -> list[int]:
        """Partition numbers; each one's history, from the target, or a first snapshot for a new partition."""
        source = self._describe(self.source)
        target = self._describe(self.target)
        if source is None or target is None:
            side = "source" if source is None else "target"
            raise ReplicationError(f"topic '{self.topic}' no longer exists on the {side}")
        check_same_partitions(self.topic, source, target)
        committed = {o.partition: o for o in self.target.group_offsets(self.group) if o.topic == self.topic}
        self._histories = {}
        for part in source.partitions:
            found = committed.get(part.partition)
            if found is not None:
                history = decode_history(found.metadata, found.offset)
            else:
                # Nothing copied yet: the source's first offset pairs with the target's end,
                # below every copy still to come.
                target_end = target.partitions[part.partition].high_watermark
                history = (Snapshot(part.log_start_offset, target_end, now_ms()),)
            self._histories[part.partition] = history
            self.state.loaded(self.topic, part.partition, history)
        return [part.partition for part in source.partitions]

    def _describe(self, cluster: Cluster) -> TopicMetadata | None:
        return cluster.describe_topic(self.topic)

    def _write(self, producer: ProducerIdentity, pages: list[Fetched]) -> None:
        """The pages' copies and the positions after them, in one transaction.

        Every partition's requests go out side by side (each partition's in order), so the
        target's group commit takes them together; the first request of each carries
        ``transactional`` instead of a transaction id, so whichever arrives first begins the
        producer's transaction and the others join it (no begin request of its own).
        """
        # Pages read ahead go out as one request per partition when they fit: one group
        # commit (and one fsync) on the target instead of several.
        per_request = min(MAX_PRODUCE_MESSAGES, READ_AHEAD_PAGES * self.settings.batch_messages)
        runs = {f.page.partition: list(requests_of(f.copies, per_request)) for f in pages if f.copies}
        writes = {p: self.writers.submit(self._produce, producer, p, r) for p, r in runs.items()}
        wait(list(writes.values()))
        ends = {partition: write.result() for partition, write in writes.items()}  # raises the first failure
        transactions = {txn_id for _, txn_id in ends.values()}
        if len(transactions) > 1:
            raise StartOver(f"the copies to {self.topic} went into several transactions: {sorted(transactions)}")
        progress: list[tuple[Page, History, int, dict[str, int]]] = []
        for fetched in pages:
            page = fetched.page
            history = self._histories[page.partition]
            copied = len(fetched.copies)
            skipped = {SKIPPED_LOOP: len(page.messages) - copied} if copied < len(page.messages) else {}
            target_position = ends[page.partition][0] if page.partition in ends else history[-1].target
            after = record(
                history, Snapshot(page.next_offset, target_position, now_ms()), self.settings.snapshot_interval_ms
            )
            progress.append((page, after, copied, skipped))
        self._commit(producer, next(iter(transactions), None), progress)

    def _produce(self, producer: ProducerIdentity, partition: int, runs: list[Sequence[bytes]]) -> tuple[int, str]:
        """Write ``runs`` to ``partition`` in order, into the producer's transaction (begun by the
        first write if there is none); the target offset after the last copy, and the transaction."""
        end, txn_id = -1, None
        for run in runs:
            result = self.target.produce(self.topic, partition, run, producer, self._sequences[partition], txn_id)
            txn_id = txn_id or result.txn_id
            if txn_id is None:
                raise StartOver(f"the target did not say which transaction the copies to {self.topic} went into")
            self._sequences[partition] += len(run)
            end = result.offsets[-1] + 1
        assert txn_id is not None
        return end, txn_id

    def _commit(
        self, producer: ProducerIdentity, txn_id: str | None, progress: list[tuple[Page, History, int, dict[str, int]]]
    ) -> None:
        if txn_id is None:  # only skipped messages or aborted data: the position moves all the same
            txn_id = self.target.begin(producer)
        offsets = [
            CommittedOffset(
                topic=self.topic, partition=page.partition, offset=history[-1].target, metadata=encode_history(history)
            )
            for page, history, _, _ in progress
        ]
        self.target.add_offsets(txn_id, self.group, offsets)
        self.target.commit(txn_id)
        for page, history, copied, skipped in progress:
            self._histories[page.partition] = history
            self.state.committed(self.topic, page.partition, history, copied, skipped, None)

    def _jump_over_deleted(self, producer: ProducerIdentity, partition: int) -> int:
        """The source has no offset at the partition's position: it deleted offsets not yet copied
        (retention), and the copier notes the loss loudly and goes on from the source's start; or the
        source topic was recreated, and it stops. The offset to read next.
        """
        described = self._describe(self.source)
        part = described.partitions[partition] if described and partition < described.partition_count else None
        history = self._histories[partition]
        position = history[-1].source
        if part is None or position > part.high_watermark:
            raise ReplicationError(
                f"{self.topic}/{partition}: the replicator's position {position} is past the source's end "
                f"({part.high_watermark if part else 'no such partition'}); the source topic was recreated. "
                f"Delete group '{self.group}' on the target to start this topic over."
            )
        if position >= part.log_start_offset:
            return position  # a read ahead failed, not the position: read again from there
        lost = part.log_start_offset - position
        log.error(
            "%s/%d: the source deleted offsets %d..%d (retention) before they were copied; %d message(s) are not "
            "replicated. Continuing from %d.",
            self.topic,
            partition,
            position,
            part.log_start_offset - 1,
            lost,
            part.log_start_offset,
        )
        after = record(
            history, Snapshot(part.log_start_offset, history[-1].target, now_ms()), self.settings.snapshot_interval_ms
        )
        page = Page(
            partition=partition,
            offset=position,
            messages=[],
            next_offset=part.log_start_offset,
            last_stable_offset=part.log_start_offset,
            high_watermark=part.high_watermark,
        )
        self._commit(producer, None, [(page, after, 0, {SKIPPED_RETENTION: lost})])
        return part.log_start_offset


def check_same_partitions(topic: str, source: TopicMetadata, target: TopicMetadata) -> None:
    if source.partition_count != target.partition_count:
        raise TopicMismatch(
            f"topic '{topic}' has {source.partition_count} partition(s) on the source and {target.partition_count} "
            "on the target; a replicator copies each partition to the same partition, so the counts must match"
        )
