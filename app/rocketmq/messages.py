"""RocketMQ messages ↔ halfmq records: bodies, properties, tags, keys and message ids (CONTRACT v1.2).

Over REST a RocketMQ message shows its tag in ``headers["rocketmq.tag"]``, its keys
space-joined in ``headers["rocketmq.keys"]``, each user property as a header of its own
name, and its body as a value by the one byte rule (:mod:`half_store.domain.wire_values`).
The client's message id and a FIFO message's group are kept in headers too
(``rocketmq.message_id``, ``rocketmq.message_group``), so every broker process answers a
message under the id its producer gave it. A REST message reaching a RocketMQ consumer
gets its headers as user properties, a message id derived from where it is stored, and its
key as its one key.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from dataclasses import dataclass
from typing import Any

import orjson

from app.rocketmq.protocol import enum_name, enum_value, new
from app.rocketmq.status import RocketMQError
from half_store.domain.constants import VALUE_BINARY
from half_store.domain.half_records import CheckPayload
from half_store.domain.message_limits import MessageLimits, encode_headers
from half_store.domain.records import Record, StoredMessage, now_ms
from half_store.domain.tags import TAG_HEADER
from half_store.domain.wire_values import value_as_bytes, value_from_bytes

KEYS_HEADER = "rocketmq.keys"
MESSAGE_ID_HEADER = "rocketmq.message_id"
MESSAGE_GROUP_HEADER = "rocketmq.message_group"
_SYSTEM_HEADERS = frozenset({TAG_HEADER, KEYS_HEADER, MESSAGE_ID_HEADER, MESSAGE_GROUP_HEADER})
# A Timestamp whose seconds are past this is milliseconds (year 5138 in seconds): the Python
# client 5.1.2 writes a millisecond delivery time into the seconds field.
_SECONDS_THAT_ARE_MILLISECONDS = 10**11


@dataclass(frozen=True, slots=True)
class Inbound:
    """One message of a SendMessage, as halfmq stores it."""

    topic: str
    record: Record
    message_id: str
    message_type: str  # NORMAL, FIFO, DELAY or TRANSACTION
    delivery_ms: int | None  # DELAY: when it may be received
    recovery_seconds: float | None  # TRANSACTION: how long before the first back-check


def timestamp_ms(timestamp: Any) -> int:
    """A protobuf Timestamp in ms; seconds that can only be milliseconds are taken as such."""
    seconds, nanos = int(timestamp.seconds), int(timestamp.nanos)
    if seconds >= _SECONDS_THAT_ARE_MILLISECONDS:
        return seconds
    return seconds * 1000 + nanos // 1_000_000


def duration_ms(duration: Any) -> int:
    return int(duration.seconds) * 1000 + int(duration.nanos) // 1_000_000


def inbound(message: Any, limits: MessageLimits) -> Inbound:
    """A SendMessage entry as a record to append; RocketMQ's status for what is wrong with it."""
    system = message.system_properties
    topic = message.topic.name
    message_id = system.message_id
    if not message_id:
        raise RocketMQError("ILLEGAL_MESSAGE_ID", "a message needs its message_id (the client sets it)")
    body = _body(message, limits)
    message_type = enum_name("MessageType", system.message_type)
    group = system.message_group if system.HasField("message_group") else ""
    headers: dict[str, str] = {}
    for name, value in message.user_properties.items():
        if name in _SYSTEM_HEADERS:
            raise RocketMQError("ILLEGAL_MESSAGE_PROPERTY_KEY", f"user property {name!r} is reserved for halfmq")
        headers[name] = value
    headers[MESSAGE_ID_HEADER] = message_id
    if system.HasField("tag"):
        if not system.tag or "|" in system.tag:
            raise RocketMQError("ILLEGAL_MESSAGE_TAG", f"tag {system.tag!r} is empty or holds '|'")
        headers[TAG_HEADER] = system.tag
    keys = list(system.keys)
    if any(not k or " " in k for k in keys):
        raise RocketMQError("ILLEGAL_MESSAGE_KEY", "a message key may be neither empty nor hold a space")
    if keys:
        headers[KEYS_HEADER] = " ".join(keys)
    if group:
        headers[MESSAGE_GROUP_HEADER] = group
    delivery_ms = timestamp_ms(system.delivery_timestamp) if system.HasField("delivery_timestamp") else None
    if message_type == "TRANSACTION" and (group or delivery_ms is not None):
        raise RocketMQError(
            "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", "a TRANSACTION message has neither a message group nor a delivery time"
        )
    recovery = (
        system.orphaned_transaction_recovery_duration if system.HasField("orphaned_transaction_recovery_duration") else None
    )
    value, kind = value_from_bytes(body)
    # FIFO: the message group is the key, so it picks the partition and orders the group's
    # messages; otherwise the first key does (and no key: round-robin).
    key = group or (keys[0] if keys else None)
    encoded = encode_headers(headers, limits)
    limits.check_size(value, key, encoded)
    born = timestamp_ms(system.born_timestamp) if system.HasField("born_timestamp") else 0
    return Inbound(
        topic,
        Record(key, value, kind, encoded, born if born > 0 else now_ms()),
        message_id,
        message_type,
        delivery_ms,
        duration_ms(recovery) / 1000 if recovery is not None else None,
    )


def _body(message: Any, limits: MessageLimits) -> bytes:
    body: bytes = message.body
    system = message.system_properties
    if len(body) > limits.max_message_bytes:
        raise RocketMQError("MESSAGE_BODY_TOO_LARGE", f"body of {len(body)} bytes is over {limits.max_message_bytes}")
    if system.HasField("body_digest") and system.body_digest.checksum:
        expected = system.body_digest.checksum.upper()
        if _digest(enum_name("DigestType", system.body_digest.type), body) not in (expected, None):
            raise RocketMQError("MESSAGE_CORRUPTED", "the body does not match its digest")
    if enum_name("Encoding", system.body_encoding) == "GZIP":
        try:
            inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
            body = inflater.decompress(body, limits.max_message_bytes + 1)
        except zlib.error as error:
            raise RocketMQError("MESSAGE_CORRUPTED", f"the GZIP body does not inflate: {error}") from error
        if len(body) > limits.max_message_bytes:
            raise RocketMQError("MESSAGE_BODY_TOO_LARGE", f"the inflated body is over {limits.max_message_bytes} bytes")
    return body


def _digest(kind: str, body: bytes) -> str | None:
    if kind == "MD5":
        return hashlib.md5(body).hexdigest().upper()
    if kind == "SHA1":
        return hashlib.sha1(body).hexdigest().upper()
    if kind == "CRC32":
        return format(zlib.crc32(body) & 0xFFFFFFFF, "08X")
    return None  # none stated: nothing to check


def message_id_of(message: StoredMessage, headers: dict[str, str]) -> str:
    """The producer's id for a RocketMQ message; for any other, one derived from where it is stored,
    the same on every broker process (RocketMQ's ids are 34 hex digits starting with the version 01)."""
    given = headers.get(MESSAGE_ID_HEADER)
    if given:
        return given
    where = f"{message.topic}/{message.partition}/{message.offset}".encode()
    return "01" + hashlib.sha1(where).hexdigest()[:32].upper()


def _keys(headers: dict[str, str], key: str | None, group: str | None) -> list[str]:
    """A message's RocketMQ keys: its own, or a REST or Kafka message's key (a FIFO message's key is its
    message group, not one of its keys)."""
    if headers.get(KEYS_HEADER):
        return headers[KEYS_HEADER].split(" ")
    return [key] if key and not group else []


def outbound(
    message: StoredMessage,
    namespace: str,
    *,
    receipt: str | None = None,
    delivery_attempt: int | None = None,
    invisible_ms: int | None = None,
    message_type: str | None = None,
) -> Any:
    """A stored message as a RocketMQ consumer (or a back-check) receives it."""
    headers: dict[str, str] = orjson.loads(message.headers) if message.headers else {}
    body = value_as_bytes(message.value, message.value_kind)
    group = headers.get(MESSAGE_GROUP_HEADER)
    keys = _keys(headers, message.key, group)
    system = new(
        "SystemProperties",
        keys=keys,
        message_id=message_id_of(message, headers),
        body_digest=new("Digest", type=enum_value("DigestType", "MD5"), checksum=hashlib.md5(body).hexdigest().upper()),
        body_encoding=enum_value("Encoding", "IDENTITY"),
        message_type=enum_value("MessageType", message_type or ("FIFO" if group else "NORMAL")),
        born_host="halfmq",
        store_host="halfmq",
        queue_id=message.partition,
        queue_offset=message.offset,
    )
    system.born_timestamp.FromMilliseconds(message.timestamp)
    system.store_timestamp.FromMilliseconds(message.timestamp)
    if TAG_HEADER in headers:
        system.tag = headers[TAG_HEADER]
    if group:
        system.message_group = group
    if receipt is not None:
        system.receipt_handle = receipt
    if delivery_attempt is not None:
        system.delivery_attempt = delivery_attempt
    if invisible_ms is not None:
        system.invisible_duration.FromMilliseconds(invisible_ms)
    properties = {name: value for name, value in headers.items() if name not in _SYSTEM_HEADERS}
    return new(
        "Message",
        topic=new("Resource", name=message.topic, resource_namespace=namespace),
        user_properties=properties,
        system_properties=system,
        body=body,
    )


def checked_message(payload: CheckPayload, namespace: str) -> Any:
    """A back-check's half message as RocketMQ's RecoverOrphanedTransactionCommand carries it."""
    encoded = payload.get("value_base64")
    body = base64.b64decode(encoded) if encoded is not None else json_value_bytes(payload.get("value"))
    headers = orjson.dumps(payload["headers"]).decode() if payload["headers"] else None
    stored = StoredMessage(payload["topic"], 0, 0, payload["born_timestamp"], payload["key"], body, VALUE_BINARY, headers)
    return outbound(stored, namespace, message_type="TRANSACTION")


def json_value_bytes(value: Any) -> bytes:
    """A JSON value (already parsed) as a byte body: a string bare, anything else as its JSON text."""
    if isinstance(value, str):
        return value.encode()
    return orjson.dumps(value)
