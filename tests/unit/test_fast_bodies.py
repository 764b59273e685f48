"""The direct path's own produce decoding takes only bodies whose stored bytes it is sure of."""

from __future__ import annotations

import orjson
import pytest

from app.api.fast_bodies import decode_produce, raw_records
from half_store.domain.message_limits import MessageLimits

LIMITS = MessageLimits(4 * 1024 * 1024, 64, 16 * 1024)


@pytest.mark.parametrize("value", ["plain", "", "é ü 漢字", 0, 7, -12, 123456789012345678, True, False, None])
def test_a_value_orjson_would_write_the_same_is_stored_as_sent(value: object) -> None:
    decoded = decode_produce(orjson.dumps({"messages": [{"value": value, "key": "k", "headers": {"h": "v"}}]}))
    assert decoded is not None
    [record] = raw_records(decoded, LIMITS)
    assert record.value == orjson.dumps(value) and record.key == "k"


@pytest.mark.parametrize(
    "body",
    [
        b'{"messages": [{"value": {"a": 1}}]}',  # objects and arrays: parsed and written again by the general path
        b'{"messages": [{"value": [1, 2]}]}',
        b'{"messages": [{"value": 1.50}]}',  # floats: orjson writes 1.5
        b'{"messages": [{"value": 1e2}]}',
        b'{"messages": [{"value": -0}]}',
        b'{"messages": [{"value": 1234567890123456789012}]}',  # past 64 bits: the general path's 422
        b'{"messages": [{"value": "tab\\there"}]}',  # an escape
        b'{"messages": [{"value": "\\ud800"}]}',  # a lone surrogate
        b'{"messages": [{"value": "\xff"}]}',  # not UTF-8
        b'{"messages": [{"value": 1, "value_base64": "AA=="}]}',  # both
        b'{"messages": [{}]}',  # neither
        b'{"messages": []}',
        b'{"messages": [{"value": 1, "partition": "1"}]}',  # no coercion
        b'{"messages": [{"value": 1, "partition": -1}]}',
        b'{"messages": [{"value": 1, "key": "a\\u0000b"}]}',
        b'{"messages": [{"value": 1, "tag": "a|b"}]}',
        b'{"messages": [{"value": 1, "surprise": 1}]}',
        b'\xef\xbb\xbf{"messages": [{"value": 1}]}',  # a BOM
        b'{"messages": [{"value": 1}',
        b'{"messages": [{"value": ' + b"[" * 3000 + b"]" * 3000 + b"}]}",  # msgspec raises RecursionError
    ],
)
def test_anything_else_is_left_to_the_general_path(body: bytes) -> None:
    assert decode_produce(body) is None


def test_a_binary_value_is_decoded_as_the_general_path_decodes_it() -> None:
    decoded = decode_produce(b'{"messages": [{"value_base64": "AAE=", "tag": "t", "timestamp": 5}]}')
    assert decoded is not None
    [record] = raw_records(decoded, LIMITS)
    assert record.value == b"\x00\x01" and record.timestamp == 5


def test_one_look_at_the_whole_body_still_judges_each_value() -> None:
    """A backslash or a non-ASCII byte elsewhere in the body neither spares a value its check nor refuses a plain one."""
    escaped_key = decode_produce(b'{"messages": [{"value": "plain", "key": "a\\"b"}, {"value": 5, "key": "\xc3\xa9"}]}')
    assert escaped_key is not None
    assert [r.value for r in raw_records(escaped_key, LIMITS)] == [b'"plain"', b"5"]
    assert decode_produce(b'{"messages": [{"value": "plain"}, {"value": "a\\"b"}]}') is None
    assert decode_produce(b'{"messages": [{"value": "\xc3\xa9", "key": "k"}, {"value": "\xff"}]}') is None
