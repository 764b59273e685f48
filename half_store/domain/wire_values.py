"""Values between halfmq's JSON messages and the byte payloads of Kafka records and RocketMQ bodies.

halfmq stores a value as JSON text (``value``) or as raw bytes (``value_base64``). The byte
protocols carry bytes. One rule maps the two ways, for every front (CONTRACT v1.2 and v1.3):

- to bytes: a JSON string is its UTF-8 text, bare (not quoted); any other JSON value is its
  JSON text; a binary value is its bytes.
- from bytes: bytes that decode as UTF-8 are kept as a JSON string (JSON-looking text too:
  never parsed); anything else is kept as binary.

So text round-trips as text both ways, and a REST consumer of a Kafka or RocketMQ message
sees a string where the producer sent text.
"""

from __future__ import annotations

import orjson

from half_store.domain.constants import VALUE_BINARY, VALUE_JSON
from half_store.domain.json_bytes import stored_json


def value_as_bytes(value: bytes, value_kind: int) -> bytes:
    """A stored value as a byte protocol carries it."""
    if value_kind == VALUE_BINARY or value[:1] != b'"':
        return value
    text: str = orjson.loads(value)
    return text.encode()


def value_from_bytes(payload: bytes) -> tuple[bytes, int]:
    """A byte protocol's payload as halfmq stores it: ``(value, value_kind)``."""
    try:
        text = payload.decode()
    except UnicodeDecodeError:
        return payload, VALUE_BINARY
    return stored_json(text), VALUE_JSON
