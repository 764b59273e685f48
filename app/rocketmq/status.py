"""RocketMQ status codes: the broker's errors in ``apache.rocketmq.v2.Code`` terms.

Every RocketMQ answer carries a ``Status {code, message}``; a failed call is an answer with
a non-OK status, never a gRPC error, because that is what the official clients read (they
retry on some codes and surface the rest as exceptions naming the code).
"""

from __future__ import annotations

from typing import Any

from app.rocketmq.protocol import enum_value, new
from half_store.domain.errors import BrokerError

# The broker's error codes (half_store.domain.errors) → RocketMQ's Code names.
_CODES: dict[str, str] = {
    "TOPIC_NOT_FOUND": "TOPIC_NOT_FOUND",
    "PARTITION_NOT_FOUND": "BAD_REQUEST",
    "RESERVED_TOPIC": "FORBIDDEN",  # a system topic: no client reads or writes it
    "MESSAGE_TOO_LARGE": "MESSAGE_BODY_TOO_LARGE",
    "UNAUTHENTICATED": "UNAUTHORIZED",
    "FORBIDDEN": "FORBIDDEN",
    "TOO_MANY_REQUESTS": "TOO_MANY_REQUESTS",
    "HALF_MESSAGE_NOT_FOUND": "INVALID_TRANSACTION_ID",
    "ALREADY_RESOLVED": "BAD_REQUEST",
    "SHARE_GROUP_NOT_FOUND": "CONSUMER_GROUP_NOT_FOUND",
    "DELIVERY_TIME_TOO_FAR": "ILLEGAL_DELIVERY_TIME",
    "INVALID_TAG_EXPRESSION": "ILLEGAL_FILTER_EXPRESSION",
    "STORAGE_UNAVAILABLE": "INTERNAL_SERVER_ERROR",
    "INTERNAL_ERROR": "INTERNAL_SERVER_ERROR",
}


class RocketMQError(Exception):
    """A refusal the front itself makes, in RocketMQ's own terms (a malformed request, an unsupported feature)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def code_of(error: BrokerError) -> str:
    return _CODES.get(error.code, "BAD_REQUEST" if error.status < 500 else "INTERNAL_SERVER_ERROR")


def status(code: str = "OK", message: str = "OK") -> Any:
    return new("Status", code=enum_value("Code", code), message=message)


def status_of(error: BaseException) -> Any:
    if isinstance(error, RocketMQError):
        return status(error.code, error.message)
    if isinstance(error, BrokerError):
        return status(code_of(error), f"{error.code}: {error.message}")
    return status("INTERNAL_SERVER_ERROR", "internal error; see the broker's log")
