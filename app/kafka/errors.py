"""halfmq's error codes as Kafka's: the one place a front-side name is chosen for a broker rule."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from half_store.domain.errors import BrokerError

_CODES: dict[str, ErrorCode] = {
    "TOPIC_NOT_FOUND": ErrorCode.unknown_topic_or_partition,
    "PARTITION_NOT_FOUND": ErrorCode.unknown_topic_or_partition,
    "RESERVED_TOPIC": ErrorCode.topic_authorization_failed,
    "OUT_OF_ORDER_SEQUENCE": ErrorCode.out_of_order_sequence_number,
    "PRODUCER_FENCED": ErrorCode.producer_fenced,
    "UNKNOWN_PRODUCER_ID": ErrorCode.unknown_producer_id,
    "INVALID_TXN_STATE": ErrorCode.invalid_txn_state,
    "ALREADY_RESOLVED": ErrorCode.invalid_txn_state,
    "TRANSACTION_NOT_FOUND": ErrorCode.invalid_txn_state,
    "CONCURRENT_TRANSACTIONS": ErrorCode.concurrent_transactions,
    "INVALID_TRANSACTION_TIMEOUT": ErrorCode.invalid_transaction_timeout,
    "MESSAGE_TOO_LARGE": ErrorCode.message_too_large,
    "OFFSET_OUT_OF_RANGE": ErrorCode.offset_out_of_range,
    "TOPIC_EXISTS": ErrorCode.topic_already_exists,
    "TOPIC_IN_USE": ErrorCode.invalid_request,
    "INVALID_PARTITIONS": ErrorCode.invalid_partitions,
    "FENCED_MEMBER_EPOCH": ErrorCode.fenced_member_epoch,
    "UNKNOWN_MEMBER": ErrorCode.unknown_member_id,
    "GROUP_NOT_FOUND": ErrorCode.group_id_not_found,
    "INVALID_SESSION_TIMEOUT": ErrorCode.invalid_session_timeout,
    "INVALID_REQUEST": ErrorCode.invalid_request,
    "VALIDATION_ERROR": ErrorCode.invalid_request,
    "UNAUTHENTICATED": ErrorCode.sasl_authentication_failed,
    # A producer id another principal obtained (producer ids are bound to their principal).
    "FORBIDDEN": ErrorCode.cluster_authorization_failed,
    "STORAGE_UNAVAILABLE": ErrorCode.kafka_storage_error,
    "TOO_MANY_REQUESTS": ErrorCode.throttling_quota_exceeded,
}


def kafka_code(error: BrokerError | str) -> ErrorCode:
    """The Kafka error code for a halfmq error (or its code); UNKNOWN_SERVER_ERROR for the unmapped."""
    code = error if isinstance(error, str) else error.code
    return _CODES.get(code, ErrorCode.unknown_server_error)


def produce_code(error: BrokerError | str) -> ErrorCode:
    """Produce answers a fenced epoch with INVALID_PRODUCER_EPOCH, as Kafka's partition leader does."""
    found = kafka_code(error)
    return ErrorCode.invalid_producer_epoch if found is ErrorCode.producer_fenced else found
