"""Typed errors: one :class:`HalfmqError` subclass per broker error code.

The broker answers every failure with ``{"error": {"code": "UPPER_SNAKE", "message": ...}}``.
:func:`error_from_response` turns that into the matching subclass so callers can
``except ProducerFencedError`` instead of comparing strings. A code this SDK does
not know (a newer broker) still arrives as a plain :class:`HalfmqError` with its
``code`` set, so nothing is ever lost.

Errors that the SDK raises on its own, without asking the broker, carry a code of
their own (``ILLEGAL_STATE``, ``BROKER_UNAVAILABLE``) and ``status=None``.
"""

from __future__ import annotations

from typing import Any


class HalfmqError(Exception):
    """Base of every error the SDK raises.

    ``code`` is the broker's ``UPPER_SNAKE`` error code, ``message`` its human text
    and ``status`` the HTTP status it came with (``None`` for client-side errors).
    """

    code: str = "UNKNOWN"
    status: int | None = None

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        # Instance attributes shadow the class defaults only when the broker told
        # us something more specific (an unknown code, an unexpected status).
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status={self.status!r}, message={self.message!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments would otherwise be lost when pickling (multiprocessing).
        return (_rebuild, (type(self), self.message, self.code, self.status))


def _rebuild(cls: type[HalfmqError], message: str, code: str, status: int | None) -> HalfmqError:
    return cls(message, code=code, status=status)


# --- broker error codes (mirrors half_store/domain/errors.py) ------------------------------------


class InvalidRequestError(HalfmqError):
    """INVALID_REQUEST (400): a request body the broker could not read (not JSON)."""

    code, status = "INVALID_REQUEST", 400


class ValidationError(HalfmqError):
    """VALIDATION_ERROR (422): a field failed validation (name, size, type)."""

    code, status = "VALIDATION_ERROR", 422


class ReservedTopicError(HalfmqError):
    """RESERVED_TOPIC (403): system topics cannot be written or created by clients."""

    code, status = "RESERVED_TOPIC", 403


class TopicNotFoundError(HalfmqError):
    """TOPIC_NOT_FOUND (404): no such topic."""

    code, status = "TOPIC_NOT_FOUND", 404


class PartitionNotFoundError(HalfmqError):
    """PARTITION_NOT_FOUND (404): the topic has no such partition."""

    code, status = "PARTITION_NOT_FOUND", 404


class UnknownProducerIdError(HalfmqError):
    """UNKNOWN_PRODUCER_ID (404): the broker does not know this producer id."""

    code, status = "UNKNOWN_PRODUCER_ID", 404


class HalfMessageNotFoundError(HalfmqError):
    """HALF_MESSAGE_NOT_FOUND (404): no half message with this id."""

    code, status = "HALF_MESSAGE_NOT_FOUND", 404


class TransactionNotFoundError(HalfmqError):
    """TRANSACTION_NOT_FOUND (404): no transaction with this id."""

    code, status = "TRANSACTION_NOT_FOUND", 404


class ListenerNotFoundError(HalfmqError):
    """LISTENER_NOT_FOUND (404): no such registered listener instance."""

    code, status = "LISTENER_NOT_FOUND", 404


class UnknownMemberError(HalfmqError):
    """UNKNOWN_MEMBER (404): the group has no such member (it left, or its session expired); join again."""

    code, status = "UNKNOWN_MEMBER", 404


class GroupNotFoundError(HalfmqError):
    """GROUP_NOT_FOUND (404): the group has neither members nor committed offsets."""

    code, status = "GROUP_NOT_FOUND", 404


class NotFoundError(HalfmqError):
    """NOT_FOUND (404): no such route (wrong URL or an older broker)."""

    code, status = "NOT_FOUND", 404


class MethodNotAllowedError(HalfmqError):
    """METHOD_NOT_ALLOWED (405): the route exists but not for this HTTP method."""

    code, status = "METHOD_NOT_ALLOWED", 405


class TopicExistsError(HalfmqError):
    """TOPIC_EXISTS (409): a topic with this name already exists."""

    code, status = "TOPIC_EXISTS", 409


class TopicInUseError(HalfmqError):
    """TOPIC_IN_USE (409): an open transaction or a prepared half message still targets the topic."""

    code, status = "TOPIC_IN_USE", 409


class InvalidPartitionsError(HalfmqError):
    """INVALID_PARTITIONS (422): a topic's partitions can be added, never removed."""

    code, status = "INVALID_PARTITIONS", 422


class OutOfOrderSequenceError(HalfmqError):
    """OUT_OF_ORDER_SEQUENCE (409): a gap in an idempotent producer's sequence numbers."""

    code, status = "OUT_OF_ORDER_SEQUENCE", 409


class ProducerFencedError(HalfmqError):
    """PRODUCER_FENCED (409): a newer instance with the same transactional id took over.

    Also raised by the SDK (``status=None``) for any use of a producer after it was
    fenced: the only way forward is a new producer.
    """

    code, status = "PRODUCER_FENCED", 409


class AlreadyResolvedError(HalfmqError):
    """ALREADY_RESOLVED (409): the half message or transaction already ended the other way."""

    code, status = "ALREADY_RESOLVED", 409


class FencedMemberEpochError(HalfmqError):
    """FENCED_MEMBER_EPOCH (409): a stale member epoch, or an offset commit for a partition the member
    does not own (or without a member while the group has live ones). Nothing was changed."""

    code, status = "FENCED_MEMBER_EPOCH", 409


class InvalidTxnStateError(HalfmqError):
    """INVALID_TXN_STATE (409): the transaction cannot take this operation in its state."""

    code, status = "INVALID_TXN_STATE", 409


class ConcurrentTransactionsError(HalfmqError):
    """CONCURRENT_TRANSACTIONS (409): the producer already has an open transaction."""

    code, status = "CONCURRENT_TRANSACTIONS", 409


class ArrowUnavailableError(HalfmqError):
    """ARROW_UNAVAILABLE (406): an Arrow-only fetch to an older broker installed without pyarrow.

    Brokers now write Arrow themselves and never answer it; the class stays for the older ones.
    """

    code, status = "ARROW_UNAVAILABLE", 406


class DelayedMessageNotFoundError(HalfmqError):
    """DELAYED_MESSAGE_NOT_FOUND (404): no delay message of that id (or it was delivered long ago)."""

    code, status = "DELAYED_MESSAGE_NOT_FOUND", 404


class InvalidTagExpressionError(ValidationError):
    """INVALID_TAG_EXPRESSION (422): a tag filter that is neither ``*`` nor tags separated by ``||``."""

    code, status = "INVALID_TAG_EXPRESSION", 422


class DeliveryTimeTooFarError(ValidationError):
    """DELIVERY_TIME_TOO_FAR (422): a delivery time past the broker's longest delay (HALFMQ_MAX_DELAY_SECONDS)."""

    code, status = "DELIVERY_TIME_TOO_FAR", 422


class MessageTooLargeError(HalfmqError):
    """MESSAGE_TOO_LARGE (413): a message or request exceeds the broker's limit."""

    code, status = "MESSAGE_TOO_LARGE", 413


class UnsupportedMediaTypeError(HalfmqError):
    """UNSUPPORTED_MEDIA_TYPE (415): a request body that is not JSON (the SDK always sends JSON)."""

    code, status = "UNSUPPORTED_MEDIA_TYPE", 415


class OffsetOutOfRangeError(HalfmqError):
    """OFFSET_OUT_OF_RANGE (416): the offset lies outside [log_start_offset, high_watermark]."""

    code, status = "OFFSET_OUT_OF_RANGE", 416


class RequestTimeoutError(HalfmqError):
    """REQUEST_TIMEOUT (408): the request's body did not reach the broker within its time limit."""

    code, status = "REQUEST_TIMEOUT", 408


class UriTooLongError(HalfmqError):
    """URI_TOO_LONG (414): the request's path or query is longer than any valid request's."""

    code, status = "URI_TOO_LONG", 414


class TooManyRequestsError(HalfmqError):
    """TOO_MANY_REQUESTS (429): a protective limit is full; the SDK retries these itself."""

    code, status = "TOO_MANY_REQUESTS", 429


class StorageUnavailableError(HalfmqError):
    """STORAGE_UNAVAILABLE (503): the broker cannot reach its database right now."""

    code, status = "STORAGE_UNAVAILABLE", 503


class InternalError(HalfmqError):
    """INTERNAL_ERROR (500): a broker bug; retried by the SDK when that is safe."""

    code, status = "INTERNAL_ERROR", 500


class InvalidTransactionTimeoutError(HalfmqError):
    """INVALID_TRANSACTION_TIMEOUT (422): a transaction timeout above the broker's maximum."""

    code, status = "INVALID_TRANSACTION_TIMEOUT", 422


class UnauthenticatedError(HalfmqError):
    """UNAUTHENTICATED (401): no token, or one the broker does not know (revoked, mistyped)."""

    code, status = "UNAUTHENTICATED", 401


class ForbiddenError(HalfmqError):
    """FORBIDDEN (403): the token's principal lacks the ACL this request needs; nothing was done."""

    code, status = "FORBIDDEN", 403


class PrincipalExistsError(HalfmqError):
    """PRINCIPAL_EXISTS (409): a principal of that name exists."""

    code, status = "PRINCIPAL_EXISTS", 409


class PrincipalNotFoundError(HalfmqError):
    """PRINCIPAL_NOT_FOUND (404): no principal of that name."""

    code, status = "PRINCIPAL_NOT_FOUND", 404


class TokenNotFoundError(HalfmqError):
    """TOKEN_NOT_FOUND (404): no token with that id (never issued, or already revoked)."""

    code, status = "TOKEN_NOT_FOUND", 404


class AclNotFoundError(HalfmqError):
    """ACL_NOT_FOUND (404): no ACL with that id."""

    code, status = "ACL_NOT_FOUND", 404


class CallbackNotAllowedError(HalfmqError):
    """CALLBACK_NOT_ALLOWED (422): a listener's callback URL resolves outside the broker's allowed networks."""

    code, status = "CALLBACK_NOT_ALLOWED", 422


class InvalidSessionTimeoutError(HalfmqError):
    """INVALID_SESSION_TIMEOUT (422): a session timeout outside the broker's configured range."""

    code, status = "INVALID_SESSION_TIMEOUT", 422


class ShareGroupNotFoundError(HalfmqError):
    """SHARE_GROUP_NOT_FOUND (404): the share group has never received from any topic."""

    code, status = "SHARE_GROUP_NOT_FOUND", 404


class ShareGroupInUseError(HalfmqError):
    """SHARE_GROUP_IN_USE (409): deleting a share group while some of its records are locked."""

    code, status = "SHARE_GROUP_IN_USE", 409


# --- raised by the SDK itself ----------------------------------------------------------


class IllegalStateError(HalfmqError):
    """ILLEGAL_STATE: the call is not allowed in the producer's or consumer's current state.

    For example ``send`` outside a transaction, ``commit_transaction`` twice, or any
    call before ``init_transactions()`` / ``start()`` or after ``close()``.
    """

    code = "ILLEGAL_STATE"


class BrokerUnavailableError(HalfmqError):
    """BROKER_UNAVAILABLE: the broker could not be reached (or kept failing) after all retries.

    The outcome of the last request is unknown: it may or may not have taken effect.
    """

    code = "BROKER_UNAVAILABLE"


class ReceiptExpiredError(HalfmqError):
    """RECEIPT_EXPIRED: a receipt no longer holds its lock (it ran out, was given back or taken again).

    Raised by :meth:`TransactionalProducer.send_acks_to_transaction` when the broker did
    not take every receipt into the transaction; the transaction must then be aborted.
    """

    code = "RECEIPT_EXPIRED"


class UnknownReceiptError(HalfmqError):
    """UNKNOWN_RECEIPT: a receipt the broker did not sign for this share group."""

    code = "UNKNOWN_RECEIPT"


ERRORS_BY_CODE: dict[str, type[HalfmqError]] = {
    cls.code: cls
    for cls in (
        InvalidRequestError,
        ValidationError,
        InvalidTagExpressionError,
        DeliveryTimeTooFarError,
        DelayedMessageNotFoundError,
        ReservedTopicError,
        TopicNotFoundError,
        PartitionNotFoundError,
        UnknownProducerIdError,
        HalfMessageNotFoundError,
        TransactionNotFoundError,
        ListenerNotFoundError,
        NotFoundError,
        MethodNotAllowedError,
        TopicExistsError,
        TopicInUseError,
        InvalidPartitionsError,
        OutOfOrderSequenceError,
        ProducerFencedError,
        AlreadyResolvedError,
        InvalidTxnStateError,
        ConcurrentTransactionsError,
        ArrowUnavailableError,
        MessageTooLargeError,
        UnsupportedMediaTypeError,
        OffsetOutOfRangeError,
        TooManyRequestsError,
        RequestTimeoutError,
        UriTooLongError,
        StorageUnavailableError,
        InternalError,
        InvalidTransactionTimeoutError,
        UnauthenticatedError,
        ForbiddenError,
        PrincipalExistsError,
        PrincipalNotFoundError,
        TokenNotFoundError,
        AclNotFoundError,
        CallbackNotAllowedError,
        UnknownMemberError,
        GroupNotFoundError,
        FencedMemberEpochError,
        InvalidSessionTimeoutError,
        ShareGroupNotFoundError,
        ShareGroupInUseError,
    )
}
"""Every broker error code this SDK knows, mapped to its exception class."""


def error_from_response(status: int, body: Any, fallback_text: str = "") -> HalfmqError:
    """Build the typed error for a non-2xx broker answer.

    ``body`` is the decoded JSON (or ``None`` when the answer was not JSON, e.g. a
    proxy's HTML error page); unknown codes give a plain :class:`HalfmqError`.
    """
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        code = error["code"]
        message = str(error.get("message") or code)
    else:
        code = f"HTTP_{status}"
        message = fallback_text[:500] or f"HTTP {status}"
    cls = ERRORS_BY_CODE.get(code, HalfmqError)
    return cls(message, code=code, status=status)
