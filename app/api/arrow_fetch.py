"""The fetch endpoint's Arrow answer (CONTRACT "Arrow fetch"), built from the stored rows.

A client that sends ``Accept: application/vnd.apache.arrow.stream`` gets the page as an
Arrow IPC stream instead of JSON: the same messages, one row each, in the columns below,
and the page's ``next_offset``, ``high_watermark`` and ``last_stable_offset`` in the
``X-Halfmq-*`` response headers (and in the stream's schema metadata, so a saved page
still says where to continue).

============  ==========================  =================================================
column        Arrow type                  content
============  ==========================  =================================================
topic         utf8, not null              the topic
partition     int32, not null             the partition
offset        int64, not null             the message's offset
timestamp     timestamp[ms, UTC], not null  the JSON answer's ``timestamp`` (ms since epoch)
key           utf8                        the key; null for none
value         utf8                        the value's JSON text, exactly as the JSON answer
                                          carries it (``"hello"`` with its quotes, ``{"a":1}``);
                                          null when the value is binary
value_base64  binary                      a binary value's bytes, *raw* (Arrow carries bytes:
                                          no base64 here, the name is the JSON field's);
                                          null when the value is JSON
headers       map<utf8, utf8>, not null   the headers; an empty map for none
============  ==========================  =================================================

Exactly one of ``value`` and ``value_base64`` is set, as in JSON. The columns are the
page's own buffers where they can be (``MessagePage`` hands over offsets, timestamps and
values as arrays and one byte string), framed by :mod:`app.api.arrow_ipc`: no value is
parsed or serialised, and no Arrow library is loaded. Only header JSON objects are parsed.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate, repeat
from operator import sub
from typing import Literal

import orjson
from starlette.responses import Response

from app.api import arrow_ipc as ipc
from app.api.arrow_ipc import END_OF_STREAM, BodyBuffer, RecordBatch
from half_store.domain.constants import VALUE_BINARY, VALUE_JSON
from half_store.domain.message_page import MessagePage
from half_store.domain.records import FetchResult, StoredMessage

ARROW_STREAM = "application/vnd.apache.arrow.stream"
JSON = "application/json"
NEXT_OFFSET_HEADER = "X-Halfmq-Next-Offset"
HIGH_WATERMARK_HEADER = "X-Halfmq-High-Watermark"
LAST_STABLE_OFFSET_HEADER = "X-Halfmq-Last-Stable-Offset"

# A record batch's string columns use 32-bit offsets (utf8, binary): at most 2 GiB of data
# each. Pages are cut into batches of about this many value bytes, far below that.
BATCH_VALUE_BYTES = 64 * 1024 * 1024

FetchFormat = Literal["json", "arrow"]


class ArrowResponse(Response):
    media_type = ARROW_STREAM


# -- content negotiation ---------------------------------------------------------------------


def _accepted(accept: str) -> dict[str, float]:
    """``Accept`` as {media range: q}; a range without a valid q counts as q=1."""
    ranges: dict[str, float] = {}
    for part in accept.split(","):
        media, *parameters = (piece.strip() for piece in part.split(";"))
        if not media:
            continue
        quality = 1.0
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    quality = 1.0
        ranges[media.lower()] = max(quality, ranges.get(media.lower(), 0.0))
    return ranges


def negotiate(accept: str | None) -> FetchFormat:
    """JSON or Arrow for a fetch with this ``Accept`` header.

    Arrow only when the client names its media type (``*/*`` means JSON, as it always
    has) with a quality at least that of JSON. Any other ``Accept`` gets JSON, as before
    this endpoint knew Arrow.
    """
    if not accept:
        return "json"
    ranges = _accepted(accept)
    arrow_quality = ranges.get(ARROW_STREAM, 0.0)
    json_quality = next((ranges[r] for r in (JSON, "application/*", "*/*") if r in ranges), 0.0)
    return "arrow" if arrow_quality > 0.0 and arrow_quality >= json_quality else "json"


# -- the stream ------------------------------------------------------------------------------


def _utf8_field(name: str, *, nullable: bool) -> ipc.Table:
    return ipc.field(name, ipc.UTF8, ipc.EMPTY_TYPE, nullable=nullable)


# The schema's fields, encoded once: every answer has the same ones.
FIELDS = ipc.written(
    ipc.TableVector(
        [
            _utf8_field("topic", nullable=False),
            ipc.field("partition", ipc.INT, ipc.int_type(32), nullable=False),
            ipc.field("offset", ipc.INT, ipc.int_type(64), nullable=False),
            ipc.field("timestamp", ipc.TIMESTAMP, ipc.timestamp_type(ipc.MILLISECOND, "UTC"), nullable=False),
            _utf8_field("key", nullable=True),
            _utf8_field("value", nullable=True),
            ipc.field("value_base64", ipc.BINARY, ipc.EMPTY_TYPE, nullable=True),
            ipc.field(
                "headers", ipc.MAP, ipc.map_type(), nullable=False,
                children=[
                    ipc.field(
                        "entries", ipc.STRUCT, ipc.EMPTY_TYPE, nullable=False,
                        children=[_utf8_field("key", nullable=False), _utf8_field("value", nullable=True)],
                    )
                ],
            ),
        ]
    )
)


def arrow_response(result: FetchResult) -> Response:
    """The page as an Arrow IPC stream, its positions in the ``X-Halfmq-*`` headers."""
    positions = {
        NEXT_OFFSET_HEADER: str(result.next_offset),
        HIGH_WATERMARK_HEADER: str(result.state.high_watermark),
        LAST_STABLE_OFFSET_HEADER: str(result.state.last_stable_offset),
    }
    return ArrowResponse(encode_page(result), headers=positions)


def encode_page(result: FetchResult) -> bytes:
    """The IPC stream of one fetch answer: schema (with the page's positions), its batches, the end."""
    positions = {
        "halfmq.next_offset": str(result.next_offset),
        "halfmq.high_watermark": str(result.state.high_watermark),
        "halfmq.last_stable_offset": str(result.state.last_stable_offset),
    }
    parts: list[BodyBuffer] = [ipc.schema_message(FIELDS, positions)]
    page = _as_page(result.messages)
    for start, stop in _chunks(page):
        parts += _record_batch(page, start, stop).message()
    parts.append(END_OF_STREAM)
    return b"".join(parts)


def _as_page(messages: Sequence[StoredMessage]) -> MessagePage:
    if isinstance(messages, MessagePage):
        return messages
    return MessagePage.of(messages[0].topic, messages[0].partition, messages) if messages else MessagePage.of("", 0)


def _chunks(page: MessagePage) -> list[tuple[int, int]]:
    """The page cut where its values pass :data:`BATCH_VALUE_BYTES` (almost always one chunk), as index ranges."""
    ends = page.value_ends
    chunks: list[tuple[int, int]] = []
    start = 0
    while start < len(page):
        # The longest run from ``start`` within the limit, and at least its first message.
        stop = max(bisect_right(ends, ends[start] + BATCH_VALUE_BYTES) - 1, start + 1)
        chunks.append((start, min(stop, len(page))))
        start = stop
    return chunks


def _record_batch(page: MessagePage, start: int, stop: int) -> RecordBatch:
    """The rows ``start:stop`` of the page, column by column in the schema's order."""
    count = stop - start
    batch = RecordBatch(count)
    _repeated_utf8(batch, page.topic.encode(), count)
    batch.node(count, 0, NO_NULLS, array("i", [page.partition]) * count)
    batch.node(count, 0, NO_NULLS, page.offsets[start:stop])
    batch.node(count, 0, NO_NULLS, page.timestamps[start:stop])
    keys = page.keys[start:stop]
    _variable_width(batch, [key.encode() if key is not None else None for key in keys])
    _value_columns(batch, page, start, stop)
    _headers(batch, page.headers[start:stop])
    return batch


NO_NULLS = b""  # a validity buffer may be left out when an array has no nulls


def _zero_offsets(count: int) -> bytes:
    """The 32-bit offsets of ``count`` empty items (or nulls): all of them 0."""
    return bytes(4 * (count + 1))


def _repeated_utf8(batch: RecordBatch, text: bytes, count: int) -> None:
    ends = array("i", range(0, (count + 1) * len(text), len(text))) if text else _zero_offsets(count)
    batch.node(count, 0, NO_NULLS, ends, text * count)


def _variable_width(batch: RecordBatch, items: Sequence[bytes | None]) -> None:
    """A utf8 or binary array from encoded items (None for null)."""
    nulls = items.count(None)
    if nulls == len(items):
        _all_null(batch, len(items))
        return
    present: Sequence[bytes] = [item or b"" for item in items] if nulls else items  # type: ignore[assignment]
    ends = array("i", accumulate(map(len, present), initial=0))
    batch.node(len(items), nulls, _validity(items) if nulls else NO_NULLS, ends, b"".join(present))


def _all_null(batch: RecordBatch, count: int) -> None:
    """A utf8 or binary array of ``count`` nulls: every bit clear, every offset 0."""
    batch.node(count, count, bytes((count + 7) // 8), _zero_offsets(count), b"")


def _validity(items: Sequence[object]) -> bytes:
    """Arrow's validity bitmap for ``items``: bit ``i`` (least significant first) set where item ``i`` is not None."""
    bits = "".join("0" if item is None else "1" for item in reversed(items))
    return int(bits, 2).to_bytes((len(items) + 7) // 8, "little")


def _value_columns(batch: RecordBatch, page: MessagePage, start: int, stop: int) -> None:
    """``value`` (JSON text) and ``value_base64`` (raw bytes): for each row, one of them is null.

    When the run's values are all of one kind (the usual case), that column is the page's
    value buffer itself, with its ends moved to start at 0.
    """
    count = stop - start
    kinds = page.kinds[start:stop]
    binary = count - kinds.count(VALUE_JSON)
    if binary in (0, count):
        ends = page.value_ends[start : stop + 1]
        first, last = ends[0], ends[-1]
        offsets = array("i", map(sub, ends, repeat(first)) if first else ends)
        data = memoryview(page.values)[first:last]
        if binary:
            _all_null(batch, count)
        batch.node(count, 0, NO_NULLS, offsets, data)
        if not binary:
            _all_null(batch, count)
        return
    values = list(page.value_slices(start, stop))
    _variable_width(batch, [value if kind != VALUE_BINARY else None for value, kind in zip(values, kinds, strict=True)])
    _variable_width(batch, [value if kind == VALUE_BINARY else None for value, kind in zip(values, kinds, strict=True)])


def _headers(batch: RecordBatch, headers: Sequence[str | None]) -> None:
    """The ``map<utf8, utf8>`` column: the map's entry ends, its entries struct, then the keys and the values."""
    count = len(headers)
    names: list[bytes] = []
    texts: list[bytes] = []
    ends: BodyBuffer = _zero_offsets(count)  # no message has headers: every map is empty
    if headers.count(None) != count:
        ends = array("i", [0])
        for stored in headers:
            if stored:
                for name, text in orjson.loads(stored).items():
                    names.append(name.encode())
                    texts.append(text.encode())
            ends.append(len(names))
    batch.node(count, 0, NO_NULLS, ends)
    batch.node(len(names), 0, NO_NULLS)
    _variable_width(batch, names)
    _variable_width(batch, texts)
