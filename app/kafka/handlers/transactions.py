"""InitProducerId and the transactional APIs: each one call of the coordinator's services."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from app.kafka.errors import kafka_code
from app.kafka.handlers.groups import commit_member
from app.kafka.protocol import NO_THROTTLE, api, build, response_module
from app.kafka.session import Session
from app.metrics import KAFKA_EPOCH_BUMPS
from half_store.domain.access import Need, Operation, ResourceType
from half_store.domain.errors import BrokerError
from half_store.domain.records import OffsetCommit


def _txn_refusal(session: Session, transactional_id: str | None) -> ErrorCode | None:
    if transactional_id is not None and not session.allows(
        Need(ResourceType.TRANSACTIONAL_ID, transactional_id, Operation.WRITE)
    ):
        return ErrorCode.transactional_id_authorization_failed
    return None


@api(22, 0, 4)
async def init_producer_id(session: Session, request: Any) -> Any:
    m = response_module(request)
    error = _txn_refusal(session, request.transactional_id)
    producer_id, epoch = -1, -1
    if error is None:
        timeout_ms = int(request.transaction_timeout.total_seconds() * 1000)
        try:
            identity = await session.broker.coordinator.init_producer(
                request.transactional_id, timeout_ms if request.transactional_id is not None else None, session.owner
            )
            producer_id, epoch, error = identity.producer_id, identity.producer_epoch, ErrorCode.none
        except BrokerError as failure:
            error = kafka_code(failure)
    return build(m.InitProducerIdResponse, throttle_time=NO_THROTTLE, error_code=error, producer_id=producer_id,
                 producer_epoch=epoch)


@api(24, 0, 3)
async def add_partitions_to_txn(session: Session, request: Any) -> Any:
    """The partitions join the transaction when they are written to; this begins (or finds) it and checks the epoch."""
    m = response_module(request)
    transactional_id = request.v3_and_below_transactional_id
    topics = request.v3_and_below_topics
    error = _txn_refusal(session, transactional_id)
    if error is None:
        try:
            await session.broker.producer_txns.join(
                request.v3_and_below_producer_id, request.v3_and_below_producer_epoch, session.owner
            )
            error = ErrorCode.none
        except BrokerError as failure:
            error = kafka_code(failure)
    known = {t.name: t.partitions for t in await session.broker.log.list_topics(include_system=False)}
    results = []
    for topic in topics:
        parts = []
        for partition in topic.partitions:
            code = error
            if code is ErrorCode.none:
                if not session.allows(Need(ResourceType.TOPIC, topic.name, Operation.WRITE)):
                    code = ErrorCode.topic_authorization_failed
                elif not 0 <= partition < known.get(topic.name, 0):
                    code = ErrorCode.unknown_topic_or_partition
            parts.append(m.AddPartitionsToTxnPartitionResult(partition_index=partition, partition_error_code=code))
        results.append(m.AddPartitionsToTxnTopicResult(name=topic.name, results_by_partition=tuple(parts)))
    return build(m.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE, results_by_topic_v3_and_below=tuple(results))


@api(25, 0, 3)
async def add_offsets_to_txn(session: Session, request: Any) -> Any:
    m = response_module(request)
    error = _txn_refusal(session, request.transactional_id)
    if error is None and not session.allows(Need(ResourceType.GROUP, request.group_id, Operation.READ)):
        error = ErrorCode.group_authorization_failed
    if error is None:
        try:
            await session.broker.producer_txns.join(request.producer_id, request.producer_epoch, session.owner)
            error = ErrorCode.none
        except BrokerError as failure:
            error = kafka_code(failure)
    return m.AddOffsetsToTxnResponse(throttle_time=NO_THROTTLE, error_code=error)


@api(28, 0, 3)
async def txn_offset_commit(session: Session, request: Any) -> Any:
    m = response_module(request)
    error = _txn_refusal(session, request.transactional_id)
    if error is None and not session.allows(Need(ResourceType.GROUP, request.group_id, Operation.READ)):
        error = ErrorCode.group_authorization_failed
    commits = [
        OffsetCommit(topic.name, p.partition_index, p.committed_offset, p.committed_metadata)
        for topic in request.topics
        for p in topic.partitions
    ]
    if error is None and any(not session.allows(Need(ResourceType.TOPIC, c.topic, Operation.READ)) for c in commits):
        error = ErrorCode.topic_authorization_failed
    if error is None and not session.cluster.coordinates(request.group_id):
        error = ErrorCode.not_coordinator  # the member's generation is checked where the group lives
    if error is None:
        try:
            member = await commit_member(
                session, request.group_id, getattr(request, "generation_id", -1), getattr(request, "member_id", "")
            )
            await session.broker.producer_txns.add_offsets(
                request.producer_id, request.producer_epoch, request.group_id, commits, member, session.owner
            )
            error = ErrorCode.none
        except BrokerError as failure:
            error = kafka_code(failure)
    topics = tuple(
        m.TxnOffsetCommitResponseTopic(
            name=topic.name,
            partitions=tuple(
                m.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=error)
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return m.TxnOffsetCommitResponse(throttle_time=NO_THROTTLE, topics=topics)


# EndTxn v5 is transaction protocol v2 (KIP-890 part 2): the client expects its producer's
# next epoch (or, once the epochs ran out, a new producer id) in the answer.
TXN_V2_END = 5


@api(26, 0, 5)
async def end_txn(session: Session, request: Any) -> Any:
    m = response_module(request)
    error = _txn_refusal(session, request.transactional_id)
    producer_id, epoch = -1, -1
    if error is None:
        txns = session.broker.producer_txns
        try:
            if request.__version__ >= TXN_V2_END:
                identity = await txns.end_bumping_epoch(
                    request.producer_id, request.producer_epoch, request.committed, session.owner
                )
                producer_id, epoch = identity.producer_id, identity.producer_epoch
                KAFKA_EPOCH_BUMPS.inc()
            else:
                await txns.end(request.producer_id, request.producer_epoch, request.committed, session.owner)
            error = ErrorCode.none
        except BrokerError as failure:
            error = kafka_code(failure)
    return build(m.EndTxnResponse, throttle_time=NO_THROTTLE, error_code=error, producer_id=producer_id, producer_epoch=epoch)
