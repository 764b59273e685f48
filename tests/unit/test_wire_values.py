"""The one mapping between halfmq's JSON values and the byte payloads of Kafka records and RocketMQ bodies."""

from __future__ import annotations

import pytest

from half_store.domain.constants import VALUE_BINARY, VALUE_JSON
from half_store.domain.wire_values import value_as_bytes, value_from_bytes


@pytest.mark.parametrize(
    ("stored", "kind", "wire"),
    [
        (b'"hello"', VALUE_JSON, b"hello"),  # a string goes bare
        (b'"caf\\u00e9 \\"q\\""', VALUE_JSON, 'café "q"'.encode()),
        (b'{"total":12}', VALUE_JSON, b'{"total":12}'),  # other JSON as its text
        (b"12", VALUE_JSON, b"12"),
        (b"null", VALUE_JSON, b"null"),
        (b"\xff\x00\x01", VALUE_BINARY, b"\xff\x00\x01"),  # binary as it is
        (b'"x', VALUE_BINARY, b'"x'),  # binary that looks like JSON is still binary
    ],
)
def test_a_stored_value_goes_out_as_bytes(stored: bytes, kind: int, wire: bytes) -> None:
    assert value_as_bytes(stored, kind) == wire


@pytest.mark.parametrize(
    ("wire", "stored", "kind"),
    [
        (b"hello", b'"hello"', VALUE_JSON),
        (b'{"total":12}', b'"{\\"total\\":12}"', VALUE_JSON),  # JSON-looking text is never parsed
        (b"", b'""', VALUE_JSON),
        (b"\xff\xfe", b"\xff\xfe", VALUE_BINARY),
    ],
)
def test_bytes_come_in_as_text_when_they_are_utf8(wire: bytes, stored: bytes, kind: int) -> None:
    assert value_from_bytes(wire) == (stored, kind)


@pytest.mark.parametrize("payload", [b"plain text", "ünïcode".encode(), b"\x00\x01\xff", b'["a", 1]'])
def test_bytes_round_trip(payload: bytes) -> None:
    assert value_as_bytes(*value_from_bytes(payload)) == payload
