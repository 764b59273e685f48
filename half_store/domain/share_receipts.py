"""Share-group receipts: self-contained, signed handles for one delivery's lock.

As with RocketMQ 5's receipt handle, a receipt carries everything needed to find its
record again: the group, the topic (by id), the partition, the offset, the delivery
count and the lock generation. An HMAC-SHA256 (cut to 128 bits) with the broker's
secret seals it, so no broker process keeps receipts anywhere, any process sharing
the secret accepts them, and a client cannot turn its receipt into another message's
or another group's. Wire form: URL-safe base64 without padding of::

    version (1 byte) | topic_id (4) | partition (4) | offset (8) | delivery_count (4)
    | generation (8) | group (UTF-8, the rest) | MAC (16)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import struct
from dataclasses import dataclass

from half_store.domain.share_state import SharePartitionKey

_VERSION = 1
_FIXED = struct.Struct("!BIIqIq")
_MAC_BYTES = 16
_MAX_GROUP_BYTES = 1024  # far above any valid group name; bounds the work on a forged one


class MalformedReceipt(ValueError):
    """Not a receipt this broker signed (forged, damaged, for another secret or version)."""


@dataclass(frozen=True, slots=True)
class Receipt:
    group: str
    topic_id: int
    partition: int
    offset: int
    delivery_count: int
    generation: int

    @property
    def share_key(self) -> SharePartitionKey:
        return (self.group, self.topic_id, self.partition)


def peek_topic_id(text: str) -> int | None:
    """The topic id a receipt names, read without checking its MAC (None if it cannot be one).

    For the rights rule of acknowledgements, which needs the topic before the service (which
    has the secret) checks the receipt: a forged receipt gets nothing from naming a topic, since
    the service refuses it whatever the rule allowed.
    """
    if len(text) > 4 * (_FIXED.size + _MAX_GROUP_BYTES + _MAC_BYTES) // 3 + 4:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    if len(raw) < _FIXED.size + _MAC_BYTES or raw[0] != _VERSION:
        return None
    topic_id: int = _FIXED.unpack_from(raw)[1]
    return topic_id


class ReceiptCodec:
    """Signs and checks receipts with one secret (the same on every broker process of a database)."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("a receipt secret needs at least 16 bytes")
        self._secret = secret

    def encode(self, receipt: Receipt) -> str:
        body = _FIXED.pack(
            _VERSION,
            receipt.topic_id,
            receipt.partition,
            receipt.offset,
            receipt.delivery_count,
            receipt.generation,
        ) + receipt.group.encode()
        return base64.urlsafe_b64encode(body + self._mac(body)).rstrip(b"=").decode("ascii")

    def decode(self, text: str) -> Receipt:
        """The receipt ``text`` stands for; raises :class:`MalformedReceipt` unless this codec signed it."""
        if len(text) > 4 * (_FIXED.size + _MAX_GROUP_BYTES + _MAC_BYTES) // 3 + 4:
            raise MalformedReceipt("receipt too long")
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError) as error:
            raise MalformedReceipt("receipt is not URL-safe base64") from error
        if len(raw) < _FIXED.size + _MAC_BYTES:
            raise MalformedReceipt("receipt too short")
        body, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
        if not hmac.compare_digest(mac, self._mac(body)):
            raise MalformedReceipt("receipt signature does not match")
        version, topic_id, partition, offset, delivery_count, generation = _FIXED.unpack_from(body)
        if version != _VERSION:
            raise MalformedReceipt(f"receipt version {version} is not supported")
        try:
            group = body[_FIXED.size :].decode()
        except UnicodeDecodeError as error:  # only a signed body gets here; kept for safety
            raise MalformedReceipt("receipt group is not UTF-8") from error
        return Receipt(group, topic_id, partition, offset, delivery_count, generation)

    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self._secret, body, hashlib.sha256).digest()[:_MAC_BYTES]
