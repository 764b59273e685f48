"""The produce body read in one pass, each value kept as the JSON text it came as.

The front's CPU for a 100-message produce went mostly to three steps of the general
path (issue 37; bench/results/history.md, round 12): pydantic building a model per
message, each value parsed into Python objects, and ``to_record`` writing that value's
JSON again. Here msgspec decodes the body into structs whose ``value`` is
:class:`msgspec.Raw`, the value's own bytes, which go to storage as they are.

It serves only what it is sure of and leaves the rest to the general path, whose answers
(every refusal included) stay the reference:

- the structs carry the pydantic models' constraints (strict types, ranges, lengths,
  patterns, unknown fields refused); any error here is not answered here;
- a value is kept as sent only where its text is exactly what ``orjson.dumps`` would
  write for it: a string without escapes, an integer of up to 18 digits other than
  ``-0``, ``true``, ``false``, ``null``. Anything else (objects, arrays, floats, escapes,
  text that is not UTF-8) and the whole body takes the general path, so stored bytes
  never differ from what the general path stores.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec
from starlette.responses import Response

from app.api.encoding import record_of
from half_store.domain.message_limits import MessageLimits
from half_store.domain.records import PackedList, Record

# The constraints of app/api/models.py, as msgspec declares them.
_NO_NUL = r"^[^\x00]*$"
_Key = Annotated[str, msgspec.Meta(pattern=_NO_NUL)]
_Partition = Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)]
_Timestamp = Annotated[int, msgspec.Meta(ge=0, le=253_402_300_799_999)]
_Tag = Annotated[str, msgspec.Meta(min_length=1, max_length=255, pattern=r"^[^|]+$")]

_LITERALS = frozenset({b"true", b"false", b"null"})
_NUMBER_STARTS = frozenset(b"-0123456789")


class RawMessage(msgspec.Struct, forbid_unknown_fields=True):
    value: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    value_base64: str | None = None
    key: _Key | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    partition: _Partition | None = None
    tag: _Tag | None = None
    timestamp: _Timestamp | None = None


class RawProduce(msgspec.Struct, forbid_unknown_fields=True):
    messages: Annotated[list[RawMessage], msgspec.Meta(min_length=1)]


_DECODER = msgspec.json.Decoder(RawProduce)


@dataclass(frozen=True)
class DecodedProduce:
    """A produce body this module serves: its messages, and each one's value as the JSON text to store."""

    messages: list[RawMessage]
    values: list[bytes | None]  # None: the message's value is in value_base64


def decode_produce(body: bytes) -> DecodedProduce | None:
    """The body of ``POST /v1/topics/{topic}/messages``, if it is one this module serves."""
    # One look at the whole body spares one at each value: without a backslash anywhere no string
    # is escaped (so none is a lone surrogate), and an ASCII body is valid UTF-8 throughout.
    escapes = b"\\" in body
    if escapes and b"\\u" in body:  # an escaped code point, maybe a lone surrogate: the general path decides
        return None
    ascii_only = body.isascii()
    try:
        messages = _DECODER.decode(body).messages
    except Exception:  # noqa: BLE001 - whatever msgspec refuses (deep nesting: RecursionError), the general path answers
        return None
    values: list[bytes | None] = []
    for message in messages:
        value = message.value
        if value is msgspec.UNSET:
            if message.value_base64 is None:
                return None  # neither value nor value_base64: the general path's 422
            values.append(None)
            continue
        if message.value_base64 is not None:
            return None  # both
        text = bytes(value)
        if not _as_dumped(text, escapes) or (not ascii_only and not text.isascii() and not _utf8(text)):
            return None
        values.append(text)
    return DecodedProduce(messages, values)


def _as_dumped(text: bytes, escapes: bool = True) -> bool:
    """Whether ``orjson.dumps`` writes the value of this (well-formed) JSON text as this very text.

    A string without escapes, an integer of up to 18 digits other than ``-0``, a literal.
    Byte tests, not a regular expression: this runs on every value (a regex took 6 µs a KiB).
    ``escapes``: whether the body holds a backslash anywhere (else no string needs looking into).
    """
    if text[0] == 0x22:  # '"': msgspec checked the token, so without a backslash nothing is escaped
        return not escapes or b"\\" not in text
    if text[0] in _NUMBER_STARTS:
        digits = text[1:] if text[0] == 0x2D else text  # '-'
        return digits.isdigit() and len(digits) <= 18 and text != b"-0"
    return text in _LITERALS


def _utf8(text: bytes) -> bool:
    try:
        text.decode()
    except UnicodeDecodeError:
        return False
    return True


def raw_records(
    body: DecodedProduce, limits: MessageLimits, trace: dict[str, str] | None = None
) -> PackedList[Record]:
    """The log records of a decoded body, each value as it was sent (raises what ``to_record`` raises)."""
    return PackedList(
        Record,
        (
            record_of(m.key, value, m.value_base64, m.headers, m.tag, limits, m.timestamp, trace)
            for m, value in zip(body.messages, body.values, strict=True)
        ),
    )


@dataclass(frozen=True)
class RawBody:
    """How the direct path serves a route on its own decoding: the decoder, and the route's twin to call."""

    decode: Callable[[bytes], Any | None]  # None: leave the request to the route's pydantic model
    endpoint: Callable[..., Awaitable[Response]]
