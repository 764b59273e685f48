"""Domain errors and the wire error codes they map to.

Every failure the broker reports is a :class:`BrokerError` subclass. Storage code
raises them (translating driver errors at its edge), services raise them, and one
exception handler in :mod:`app.api.errors` turns them into the contract's shape
``{"error": {"code": ..., "message": ...}}``. The SDK mirrors this catalogue.
"""

from __future__ import annotations


class BrokerError(Exception):
    """Base of every error the broker reports to a client."""

    status: int = 400
    code: str = "INVALID_REQUEST"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(BrokerError):
    status, code = 400, "INVALID_REQUEST"


class ValidationFailed(BrokerError):
    status, code = 422, "VALIDATION_ERROR"


class ReservedTopic(BrokerError):
    status, code = 403, "RESERVED_TOPIC"


class TopicNotFound(BrokerError):
    status, code = 404, "TOPIC_NOT_FOUND"


class PartitionNotFound(BrokerError):
    status, code = 404, "PARTITION_NOT_FOUND"


class UnknownProducerId(BrokerError):
    status, code = 404, "UNKNOWN_PRODUCER_ID"


class HalfMessageNotFound(BrokerError):
    status, code = 404, "HALF_MESSAGE_NOT_FOUND"


class TransactionNotFound(BrokerError):
    status, code = 404, "TRANSACTION_NOT_FOUND"


class ListenerNotFound(BrokerError):
    status, code = 404, "LISTENER_NOT_FOUND"


class RouteNotFound(BrokerError):
    status, code = 404, "NOT_FOUND"


class MethodNotAllowed(BrokerError):
    status, code = 405, "METHOD_NOT_ALLOWED"


class TopicExists(BrokerError):
    status, code = 409, "TOPIC_EXISTS"


class OutOfOrderSequence(BrokerError):
    status, code = 409, "OUT_OF_ORDER_SEQUENCE"


class ProducerFenced(BrokerError):
    status, code = 409, "PRODUCER_FENCED"


class AlreadyResolved(BrokerError):
    status, code = 409, "ALREADY_RESOLVED"


class InvalidTransactionState(BrokerError):
    """The transaction exists but cannot take this operation in its current state."""

    status, code = 409, "INVALID_TXN_STATE"


class ConcurrentTransactions(BrokerError):
    """The producer already has an open transaction (Kafka: CONCURRENT_TRANSACTIONS)."""

    status, code = 409, "CONCURRENT_TRANSACTIONS"


class ArrowUnavailable(BrokerError):
    """The client accepts only Arrow and this broker runs without pyarrow."""

    status, code = 406, "ARROW_UNAVAILABLE"


class MessageTooLarge(BrokerError):
    status, code = 413, "MESSAGE_TOO_LARGE"


class OffsetOutOfRange(BrokerError):
    status, code = 416, "OFFSET_OUT_OF_RANGE"


class TooManyRequests(BrokerError):
    """A protective limit (long-poll waiters, in-flight checks) is full; retry later."""

    status, code = 429, "TOO_MANY_REQUESTS"


class StorageUnavailable(BrokerError):
    status, code = 503, "STORAGE_UNAVAILABLE"


class InternalError(BrokerError):
    status, code = 500, "INTERNAL_ERROR"


class InvalidTransactionTimeout(BrokerError):
    status, code = 400, "INVALID_TRANSACTION_TIMEOUT"


def bad_unicode() -> ValidationFailed:
    """A string that cannot be encoded: lone surrogates, which JSON allows and storage does not."""
    return ValidationFailed("strings must be valid Unicode (no lone surrogates)")
