"""Fetch and ListOffsets: stored rows back as Kafka record batches, with markers and aborted lists."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from app.kafka.errors import kafka_code
from app.kafka.protocol import NO_THROTTLE, api, build, response_module
from app.kafka.record_batches import OutgoingBatch, control_record, write_batch
from app.kafka.record_mapping import records_of
from app.kafka.session import Session
from app.metrics import KAFKA_RECORDS
from half_store.domain.access import Need, Operation, ResourceType
from half_store.domain.constants import CONTROL_COMMIT, CONTROL_NONE
from half_store.domain.log_batches import BatchPage, BatchRead, LogBatch, OffsetQuery

READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"


def isolation_of(request: Any) -> str:
    return READ_COMMITTED if getattr(request, "isolation_level", 0) == 1 else READ_UNCOMMITTED


@api(1, 4, 12)
async def fetch(session: Session, request: Any) -> Any:
    m = response_module(request)
    reads: list[BatchRead] = []
    refused: list[tuple[str, int]] = []
    for topic in request.topics:
        allowed = session.allows(Need(ResourceType.TOPIC, topic.topic, Operation.READ))
        for part in topic.partitions:
            if allowed:
                reads.append(BatchRead(topic.topic, part.partition, part.fetch_offset, max(part.partition_max_bytes, 1)))
            else:
                refused.append((topic.topic, part.partition))
    wait_ms = min(int(request.max_wait.total_seconds() * 1000), session.settings.max_fetch_wait_ms)
    pages: list[BatchPage] = []
    if reads:
        pages = await session.broker.batches.fetch_batches(
            reads, max(request.max_bytes, 1), wait_ms, request.min_bytes, isolation_of(request)
        )
    by_topic: dict[str, list[Any]] = {}
    for page in pages:
        by_topic.setdefault(page.topic, []).append(_partition_data(m, page))
    for topic_name, partition in refused:
        by_topic.setdefault(topic_name, []).append(
            build(
                m.PartitionData,
                partition_index=partition,
                error_code=ErrorCode.topic_authorization_failed,
                high_watermark=-1,
                aborted_transactions=None,
                preferred_read_replica=-1,
                records=None,
            )
        )
    responses = tuple(m.FetchableTopicResponse(topic=name, partitions=tuple(parts)) for name, parts in by_topic.items())
    return build(m.FetchResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, session_id=0, responses=responses)


def _partition_data(m: Any, page: BatchPage) -> Any:
    state = page.state
    if page.error is not None:
        return build(
            m.PartitionData,
            partition_index=page.partition,
            error_code=kafka_code(page.error),
            high_watermark=state.high_watermark if state else -1,
            last_stable_offset=state.last_stable_offset if state else -1,
            log_start_offset=state.log_start_offset if state else -1,
            aborted_transactions=None,
            preferred_read_replica=-1,
            records=None,
        )
    assert state is not None
    data = b"".join(write_batch(kafka_batch(batch)) for batch in page.batches)
    KAFKA_RECORDS.labels("fetched").inc(sum(b.record_count for b in page.batches if b.control == CONTROL_NONE))
    aborted = tuple(m.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset) for a in page.aborted)
    return build(
        m.PartitionData,
        partition_index=page.partition,
        error_code=ErrorCode.none,
        high_watermark=state.high_watermark,
        last_stable_offset=state.last_stable_offset,
        log_start_offset=state.log_start_offset,
        aborted_transactions=aborted,
        preferred_read_replica=-1,
        records=data,
    )


def kafka_batch(batch: LogBatch) -> OutgoingBatch:
    """A stored row as the Kafka batch it was written as (a marker as a control batch)."""
    producer_id = batch.producer_id if batch.producer_id is not None else -1
    epoch = batch.producer_epoch if batch.producer_epoch is not None else -1
    if batch.control != CONTROL_NONE:
        record = control_record(batch.control == CONTROL_COMMIT, batch.timestamp)
        return OutgoingBatch(batch.offset, [record], producer_id, epoch, -1, transactional=True, control=True)
    sequence = batch.base_sequence if batch.base_sequence is not None else -1
    records = list(records_of(batch))
    return OutgoingBatch(batch.offset, records, producer_id, epoch, sequence, transactional=batch.txn_id is not None)


@api(2, 1, 7)
async def list_offsets(session: Session, request: Any) -> Any:
    m = response_module(request)
    queries = []
    refused = set()
    for topic in request.topics:
        if not session.allows(Need(ResourceType.TOPIC, topic.name, Operation.DESCRIBE)):
            refused.add(topic.name)
        for part in topic.partitions:
            queries.append(OffsetQuery(topic.name, part.partition_index, part.timestamp))
    wanted = [q for q in queries if q.topic not in refused]
    answers = await session.broker.batches.list_offsets(wanted, isolation_of(request)) if wanted else []
    found = {(a.topic, a.partition): a for a in answers}
    by_topic: dict[str, list[Any]] = {}
    for q in queries:
        a = found.get((q.topic, q.partition))
        if a is None:
            error, offset, ts = ErrorCode.topic_authorization_failed, -1, -1
        else:
            error, offset, ts = (kafka_code(a.error) if a.error else ErrorCode.none), a.offset, a.timestamp
        by_topic.setdefault(q.topic, []).append(
            build(m.ListOffsetsPartitionResponse, partition_index=q.partition, error_code=error, timestamp=ts, offset=offset,
                  leader_epoch=0, old_style_offsets=(offset,) if offset >= 0 else ())
        )
    topics = tuple(m.ListOffsetsTopicResponse(name=name, partitions=tuple(parts)) for name, parts in by_topic.items())
    return build(m.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=topics)
