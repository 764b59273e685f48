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
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from app.replication.cluster import Cluster, OffsetWithMetadata, Page
from app.replication.copying import (
    SKIPPED_LOOP,
    SKIPPED_RETENTION,
    copy_of,
    progress_group,
    requests_of,
    transactional_id,
)
from app.replication.errors import ClusterError, ReplicationError, TopicMismatch
from app.replication.snapshots import History, Snapshot, decode_history, encode_history, record
from app.replication.state import ReplicationState, now_ms
from sdk.models import ProducerIdentity, TopicMetadata

log = logging.getLogger("halfmq.replication")

TRANSACTION_TIMEOUT_MS = 60_000
FETCH_WAIT_MS = 500


@dataclass(frozen=True)
class CopySettings:
    source_cluster: str
    target_cluster: str
    snapshot_interval_ms: int = 1000
    batch_messages: int = 1000


class FetchOutOfRange(Exception):
    def __init__(self, partition: int, offset: int) -> None:
        super().__init__(f"offset {offset} of partition {partition} is out of range")
        self.partition = partition
        self.offset = offset


class Fetcher:
    """One read_committed fetch in flight per partition.

    When a page arrives the next fetch starts at once from its end, so reading the next
    batch from the source overlaps writing this one to the target.
    """

    def __init__(self, source: Cluster, topic: str, pool: ThreadPoolExecutor, batch_messages: int) -> None:
        self.source = source
        self.topic = topic
        self.pool = pool
        self.batch_messages = batch_messages
        self._in_flight: dict[Future[Page], tuple[int, int]] = {}

    def start(self, partition: int, offset: int) -> None:
        future = self.pool.submit(
            self.source.fetch,
            self.topic,
            partition,
            offset,
            max_messages=self.batch_messages,
            max_wait_ms=FETCH_WAIT_MS,
        )
        self._in_flight[future] = (partition, offset)

    def ready(self, timeout: float) -> list[Page]:
        """The pages that arrived within ``timeout`` (at most one per partition)."""
        done, _ = wait(list(self._in_flight), timeout=timeout, return_when=FIRST_COMPLETED)
        pages = []
        for future in done:
            partition, offset = self._in_flight.pop(future)
            try:
                page = future.result()
            except ClusterError as error:
                if error.code == "OFFSET_OUT_OF_RANGE":
                    raise FetchOutOfRange(partition, offset) from error
                raise
            pages.append(page)
            self.start(partition, page.next_offset)
        return sorted(pages, key=lambda page: page.partition)


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
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix=f"fetch-{topic}")

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    # -- one session -----------------------------------------------------------------------

    def session(self, stop: threading.Event, progressed: threading.Event) -> None:
        """Run until ``stop`` is set; raises on any failure (the caller decides whether to start again).

        ``progressed`` is set whenever a batch commits.
        """
        producer = self.target.init_producer(self.transactional_id, TRANSACTION_TIMEOUT_MS)
        partitions = self._load_progress()
        self._sequences = dict.fromkeys(partitions, 0)
        fetcher = Fetcher(self.source, self.topic, self.pool, self.settings.batch_messages)
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
                fetcher.start(gap.partition, self._jump_over_deleted(producer, gap))
                progressed.set()
                continue
            for page in pages:
                first = page.messages[0]["timestamp"] if page.messages else None
                self.state.fetched(self.topic, page.partition, page.last_stable_offset, first)
            moved = [page for page in pages if page.next_offset != page.offset]
            for page in moved:
                if page.offset != self._histories[page.partition][-1].source:
                    raise ReplicationError(
                        f"{self.topic}/{page.partition}: page at {page.offset} is not at the position"
                    )
            if moved:
                self._write(producer, moved)
                progressed.set()

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

    def _write(self, producer: ProducerIdentity, pages: list[Page]) -> None:
        """The pages' copies and the positions after them, in one transaction."""
        txn_id: str | None = None
        progress: list[tuple[Page, History, int, dict[str, int]]] = []
        for page in pages:
            history = self._histories[page.partition]
            copies = [
                c
                for c in (copy_of(m, self.settings.source_cluster, self.settings.target_cluster) for m in page.messages)
                if c
            ]
            target_position = history[-1].target
            for run in requests_of(copies, self.settings.batch_messages):
                result = self.target.produce(
                    self.topic, page.partition, run, producer, self._sequences[page.partition], txn_id
                )
                if result.txn_id is None and txn_id is None:
                    raise ReplicationError(
                        f"the target did not say which transaction the copies to {self.topic} went into"
                    )
                txn_id = txn_id or result.txn_id
                self._sequences[page.partition] += len(run)
                target_position = result.offsets[-1] + 1
            skipped = {SKIPPED_LOOP: len(page.messages) - len(copies)} if len(copies) < len(page.messages) else {}
            after = record(
                history, Snapshot(page.next_offset, target_position, now_ms()), self.settings.snapshot_interval_ms
            )
            progress.append((page, after, len(copies), skipped))
        self._commit(producer, txn_id, progress)

    def _commit(
        self, producer: ProducerIdentity, txn_id: str | None, progress: list[tuple[Page, History, int, dict[str, int]]]
    ) -> None:
        if txn_id is None:  # only skipped messages or aborted data: the position moves all the same
            txn_id = self.target.begin(producer)
        offsets = [
            OffsetWithMetadata(self.topic, page.partition, history[-1].target, encode_history(history))
            for page, history, _, _ in progress
        ]
        self.target.add_offsets(txn_id, self.group, offsets)
        self.target.commit(txn_id)
        for page, history, copied, skipped in progress:
            self._histories[page.partition] = history
            self.state.committed(self.topic, page.partition, history, copied, skipped, None)

    def _jump_over_deleted(self, producer: ProducerIdentity, gap: FetchOutOfRange) -> int:
        """The source deleted offsets not yet copied (retention): note the loss loudly and go on from its start."""
        described = self._describe(self.source)
        part = described.partitions[gap.partition] if described else None
        if part is None or gap.offset > part.high_watermark:
            raise ReplicationError(
                f"{self.topic}/{gap.partition}: the replicator's position {gap.offset} is past the source's end "
                f"({part.high_watermark if part else 'no such partition'}); the source topic was recreated. "
                f"Delete group '{self.group}' on the target to start this topic over."
            )
        if gap.offset >= part.log_start_offset:
            return gap.offset  # moved back into range meanwhile: read again
        lost = part.log_start_offset - gap.offset
        log.error(
            "%s/%d: the source deleted offsets %d..%d (retention) before they were copied; %d message(s) are not "
            "replicated. Continuing from %d.",
            self.topic,
            gap.partition,
            gap.offset,
            part.log_start_offset - 1,
            lost,
            part.log_start_offset,
        )
        history = self._histories[gap.partition]
        after = record(
            history, Snapshot(part.log_start_offset, history[-1].target, now_ms()), self.settings.snapshot_interval_ms
        )
        page = Page(gap.partition, gap.offset, [], part.log_start_offset, part.log_start_offset, part.high_watermark)
        self._commit(producer, None, [(page, after, 0, {SKIPPED_RETENTION: lost})])
        return part.log_start_offset


def check_same_partitions(topic: str, source: TopicMetadata, target: TopicMetadata) -> None:
    if source.partition_count != target.partition_count:
        raise TopicMismatch(
            f"topic '{topic}' has {source.partition_count} partition(s) on the source and {target.partition_count} "
            "on the target; a replicator copies each partition to the same partition, so the counts must match"
        )
