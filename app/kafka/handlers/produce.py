"""Produce: record batches in, each partition's batch one append through the log or the coordinator."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from app.kafka.errors import produce_code
from app.kafka.protocol import NO_THROTTLE, api, build, response_module
from app.kafka.record_batches import CorruptBatch, ReceivedBatch, UnsupportedBatch, read_batches
from app.kafka.record_mapping import to_record
from app.kafka.session import Session
from app.metrics import KAFKA_RECORDS
from half_store.domain.access import Need, Operation, ResourceType
from half_store.domain.errors import BrokerError, TopicNotFound
from half_store.domain.records import AppendResult, ProducerStamp

log = logging.getLogger("app.kafka")


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@api(0, 3, 12)
async def produce(session: Session, request: Any) -> Any:
    m = response_module(request)
    jobs = []
    for topic in request.topic_data:
        for part in topic.partition_data:
            jobs.append((topic.name, part.index, _produce_partition(session, request, topic.name, part.index, part.records)))
    outcomes = await asyncio.gather(*(job for _, _, job in jobs), return_exceptions=True)
    if request.acks == 0:
        return None
    by_topic: dict[str, list[Any]] = {}
    for (name, index, _), outcome in zip(jobs, outcomes, strict=True):
        error, base, message = ErrorCode.none, -1, None
        if isinstance(outcome, _Refused):
            error, message = outcome.code, outcome.message
        elif isinstance(outcome, BrokerError):
            error, message = produce_code(outcome), str(outcome)
        elif isinstance(outcome, BaseException):
            log.error("kafka produce to %s/%s failed", name, index, exc_info=outcome)
            error, message = ErrorCode.unknown_server_error, "internal error; the broker logged the details"
        else:
            base = outcome
        by_topic.setdefault(name, []).append(
            build(
                m.PartitionProduceResponse,
                index=index,
                error_code=error,
                base_offset=base,
                log_append_time=None,
                log_start_offset=-1,
                record_errors=(),
                error_message=message,
            )
        )
    responses = tuple(m.TopicProduceResponse(name=name, partition_responses=tuple(parts)) for name, parts in by_topic.items())
    return build(m.ProduceResponse, responses=responses, throttle_time=NO_THROTTLE)


async def _produce_partition(session: Session, request: Any, topic: str, partition: int, data: bytes | None) -> int:
    """Append the partition's batches; returns the first one's base offset."""
    if not session.allows(Need(ResourceType.TOPIC, topic, Operation.WRITE)):
        raise _Refused(ErrorCode.topic_authorization_failed)
    transactional_id = getattr(request, "transactional_id", None)
    if transactional_id is not None and not session.allows(
        Need(ResourceType.TRANSACTIONAL_ID, transactional_id, Operation.WRITE)
    ):
        raise _Refused(ErrorCode.transactional_id_authorization_failed)
    try:
        batches = read_batches(data or b"")
    except CorruptBatch as error:
        raise _Refused(ErrorCode.corrupt_message, str(error)) from error
    except UnsupportedBatch as error:
        raise _Refused(ErrorCode.unsupported_for_message_format, str(error)) from error
    if not batches:
        raise _Refused(ErrorCode.invalid_record, "a produce request with no records for this partition")
    first: int | None = None
    for batch in batches:
        base = await _append(session, topic, partition, batch)
        first = base if first is None else first
    assert first is not None
    return first


async def _append(session: Session, topic: str, partition: int, batch: ReceivedBatch) -> int:
    if batch.control:
        raise _Refused(ErrorCode.invalid_record, "clients may not write control batches")
    if not batch.records:
        raise _Refused(ErrorCode.invalid_record, "an empty record batch")
    limit = session.settings.max_message_bytes
    for record in batch.records:
        if (len(record.value or b"") + len(record.key or b"")) > limit:
            raise _Refused(ErrorCode.message_too_large, f"a record is larger than {limit} bytes")
    records = [to_record(r) for r in batch.records]
    try:
        if batch.transactional:
            if not batch.idempotent:
                raise _Refused(ErrorCode.invalid_record, "a transactional batch needs a producer id")
            stamp = ProducerStamp(batch.producer_id, batch.producer_epoch, batch.base_sequence, transactional=True)
            result: AppendResult = await session.broker.coordinator.produce(
                topic, partition, records, stamp, session.owner
            )
        elif batch.idempotent:
            stamp = ProducerStamp(batch.producer_id, batch.producer_epoch, batch.base_sequence)
            result = await session.broker.log.produce_idempotent(topic, partition, records, stamp, session.owner)
        else:
            placed = await session.broker.log.produce(topic, records, [partition] * len(records))
            result = AppendResult(partition, placed[0][1], len(records))
    except TopicNotFound as error:
        raise _Refused(ErrorCode.unknown_topic_or_partition, str(error)) from error
    KAFKA_RECORDS.labels("produced").inc(0 if result.duplicate else len(records))
    return result.base_offset
