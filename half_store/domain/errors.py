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


class ScheduledMessageNotFound(BrokerError):
    status, code = 404, "DELAYED_MESSAGE_NOT_FOUND"


class TransactionNotFound(BrokerError):
    status, code = 404, "TRANSACTION_NOT_FOUND"


class ListenerNotFound(BrokerError):
    status, code = 404, "LISTENER_NOT_FOUND"


class UnknownMember(BrokerError):
    """No such member in the group: it never joined, it left, or its session expired."""

    status, code = 404, "UNKNOWN_MEMBER"


class GroupNotFound(BrokerError):
    status, code = 404, "GROUP_NOT_FOUND"


class RouteNotFound(BrokerError):
    status, code = 404, "NOT_FOUND"


class MethodNotAllowed(BrokerError):
    status, code = 405, "METHOD_NOT_ALLOWED"


class TopicExists(BrokerError):
    status, code = 409, "TOPIC_EXISTS"


class TopicInUse(BrokerError):
    """An open transaction or a prepared half message still targets the topic."""

    status, code = 409, "TOPIC_IN_USE"


class InvalidPartitions(BrokerError):
    """A partition count that cannot be applied (fewer than the topic has: partitions are never removed)."""

    status, code = 422, "INVALID_PARTITIONS"


class OutOfOrderSequence(BrokerError):
    status, code = 409, "OUT_OF_ORDER_SEQUENCE"


class ProducerFenced(BrokerError):
    status, code = 409, "PRODUCER_FENCED"


class AlreadyResolved(BrokerError):
    status, code = 409, "ALREADY_RESOLVED"


class IllegalTransition(AlreadyResolved):
    """A state change that the state machine's transition table does not allow.

    Every such move a client can ask for is one its transaction or half message has
    already moved past (a commit after an abort, a rollback after a commit), which the
    contract answers with 409 ALREADY_RESOLVED; so this is that error, and whoever
    catches ``AlreadyResolved`` (the checker racing a producer) catches it too.
    """


class FencedMemberEpoch(BrokerError):
    """A stale member epoch, or an offset commit by someone who does not own the partition (KIP-447)."""

    status, code = 409, "FENCED_MEMBER_EPOCH"


class InvalidTransactionState(BrokerError):
    """The transaction exists but cannot take this operation in its current state."""

    status, code = 409, "INVALID_TXN_STATE"


class ConcurrentTransactions(BrokerError):
    """The producer already has an open transaction (Kafka: CONCURRENT_TRANSACTIONS)."""

    status, code = 409, "CONCURRENT_TRANSACTIONS"


class RequestTimeout(BrokerError):
    """The request body did not arrive whole within ``HALFMQ_BODY_TIMEOUT_SECONDS``."""

    status, code = 408, "REQUEST_TIMEOUT"


class UriTooLong(BrokerError):
    """A request's path or query is longer than any valid request's."""

    status, code = 414, "URI_TOO_LONG"


class InvalidTagExpression(BrokerError):
    """A tag filter that is neither ``*`` nor tags separated by ``||``."""

    status, code = 422, "INVALID_TAG_EXPRESSION"


class DeliveryTimeTooFar(BrokerError):
    """A delay message's delivery time lies past the broker's longest delay (HALFMQ_MAX_DELAY_SECONDS)."""

    status, code = 422, "DELIVERY_TIME_TOO_FAR"


class MessageTooLarge(BrokerError):
    status, code = 413, "MESSAGE_TOO_LARGE"


class UnsupportedMediaType(BrokerError):
    """A request body declared as something other than JSON (a form, plain text)."""

    status, code = 415, "UNSUPPORTED_MEDIA_TYPE"


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
    status, code = 422, "INVALID_TRANSACTION_TIMEOUT"


class InvalidSessionTimeout(BrokerError):
    status, code = 422, "INVALID_SESSION_TIMEOUT"


def bad_unicode() -> ValidationFailed:
    """A string that cannot be encoded: lone surrogates, which JSON allows and storage does not."""
    return ValidationFailed("strings must be valid Unicode (no lone surrogates)")


# -- authentication and authorization ---------------------------------------------------


class Unauthenticated(BrokerError):
    """No token, or one the broker does not know (never issued, revoked, malformed)."""

    status, code = 401, "UNAUTHENTICATED"


class Forbidden(BrokerError):
    """A known token without the right the request needs; nothing was read or changed."""

    status, code = 403, "FORBIDDEN"


class PrincipalExists(BrokerError):
    status, code = 409, "PRINCIPAL_EXISTS"


class PrincipalNotFound(BrokerError):
    status, code = 404, "PRINCIPAL_NOT_FOUND"


class TokenNotFound(BrokerError):
    status, code = 404, "TOKEN_NOT_FOUND"


class AclNotFound(BrokerError):
    status, code = 404, "ACL_NOT_FOUND"


class CallbackNotAllowed(BrokerError):
    """A callback URL whose scheme or resolved addresses are outside the allowed networks (SSRF)."""

    status, code = 422, "CALLBACK_NOT_ALLOWED"


class ShareGroupNotFound(BrokerError):
    status, code = 404, "SHARE_GROUP_NOT_FOUND"


class ShareGroupInUse(BrokerError):
    """Deleting a share group while some of its records are locked (by a consumer or a transaction)."""

    status, code = 409, "SHARE_GROUP_IN_USE"
