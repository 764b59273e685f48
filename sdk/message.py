"""The :class:`Message` users send and receive, and its JSON wire form.

Values are any JSON value; ``bytes`` travel as ``value_base64`` and come back as
``bytes``, so binary payloads round-trip unchanged and text payloads stay readable
on the wire (``curl`` users see them as they are).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sdk.errors import HalfmqError


@dataclass(frozen=True)
class Message:
    """One message: ``Message(topic, value, key=None, headers=None)``.

    Messages the SDK hands back (fetched, or passed to a transaction listener) also
    carry where they live (``partition``, ``offset``, ``timestamp`` in ms since the
    epoch) and, for half messages, ``message_id``, ``transaction_id`` and
    ``check_times``. ``value`` is any JSON value or ``bytes``.
    """

    topic: str
    value: Any
    key: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    partition: int | None = None
    offset: int | None = None
    timestamp: int | None = None
    message_id: str | None = None
    transaction_id: str | None = None
    check_times: int | None = None

    def __post_init__(self) -> None:
        # Accept headers=None as the contract's signature promises, but always
        # expose a mapping so user code never has to test for None.
        if self.headers is None:
            object.__setattr__(self, "headers", {})

    __hash__ = None  # type: ignore[assignment]  # headers is a dict: equality yes, hashing no


def encode_value(value: Any) -> dict[str, Any]:
    """The wire fields for ``value``: ``{"value_base64": ...}`` for bytes, else ``{"value": ...}``."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"value_base64": base64.b64encode(bytes(value)).decode("ascii")}
    return {"value": value}


def decode_value(payload: Mapping[str, Any]) -> Any:
    """The user-facing value of a wire message: ``bytes`` if it came as ``value_base64``."""
    if payload.get("value_base64") is not None:
        try:
            return base64.b64decode(payload["value_base64"], validate=True)
        except (binascii.Error, ValueError, TypeError) as exc:
            raise HalfmqError(f"broker sent invalid value_base64: {exc}", code="INVALID_RESPONSE") from exc
    return payload.get("value")


def to_wire(value: Any, key: str | None = None, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One message in the contract's produce shape ``{"key", "value"|"value_base64", "headers"}``."""
    wire: dict[str, Any] = {"key": key, "headers": dict(headers or {})}
    wire.update(encode_value(value))
    return wire


def placed_on_wire(message: Message) -> dict[str, Any]:
    """``message`` in the produce shape of ``POST /v1/topics/{topic}/messages``: with its
    ``partition`` when it names one (else the broker picks it by key)."""
    wire = to_wire(message.value, message.key, message.headers)
    if message.partition is not None:
        wire["partition"] = message.partition
    return wire


def message_fields(payload: Mapping[str, Any], topic: str | None = None) -> dict[str, Any]:
    """The :class:`Message` fields of a message on the wire (fetched, received from a share
    group, or a back-check's body), by name: the one mapping from the wire to a message, which
    every kind of message the SDK hands out is built from."""
    return {
        "topic": str(payload.get("topic") or topic or ""),
        "value": decode_value(payload),
        "key": payload.get("key"),
        "headers": dict(payload.get("headers") or {}),
        "partition": payload.get("partition"),
        "offset": payload.get("offset"),
        "timestamp": payload.get("timestamp", payload.get("born_timestamp")),
        "message_id": payload.get("message_id"),
        "transaction_id": payload.get("transaction_id"),
        "check_times": payload.get("check_times"),
    }


TAG_HEADER = "rocketmq.tag"  # where the broker keeps a message's tag (RocketMQ's)


def tagged(headers: Mapping[str, str] | None, tag: str | None) -> dict[str, str]:
    """``headers`` with the message's tag added (a tag filter matches it; RocketMQ consumers read it as the tag)."""
    merged = dict(headers or {})
    if tag is not None:
        merged[TAG_HEADER] = tag
    return merged


def delayed_wire(
    value: Any, key: str | None, headers: Mapping[str, str] | None, partition: int | None,
    deliver_at: int | None, delay_ms: int | None,
) -> dict[str, Any]:
    """A delay message's produce shape: a message plus ``deliver_at`` (ms since the epoch) or ``delay_ms``."""
    if (deliver_at is None) == (delay_ms is None):
        raise ValueError("give exactly one of deliver_at and delay_ms")
    wire = to_wire(value, key, headers)
    wire.update({"deliver_at": deliver_at} if deliver_at is not None else {"delay_ms": delay_ms})
    if partition is not None:
        wire["partition"] = partition
    return wire




def from_wire(payload: Mapping[str, Any], topic: str | None = None) -> Message:
    """A :class:`Message` from a fetched message or a back-check request body."""
    return Message(**message_fields(payload, topic))
