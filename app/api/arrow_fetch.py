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

Exactly one of ``value`` and ``value_base64`` is set, as in JSON. The columns are built
straight from the stored values (JSON text and bytes, as the core process hands them
over): no value is parsed or serialised. Only header JSON objects are parsed.

pyarrow is imported on the first Arrow fetch, not at start-up: a broker that only ever
answers JSON does not pay its ~40 MB of memory. Arrays are made from buffers
(``Array.from_buffers``), never with ``pyarrow.array`` on Python lists, which imports
pandas when it is installed (0.4 s and 60 MB more on the first call).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Callable, Sequence
from functools import cache
from itertools import accumulate, repeat
from operator import sub
from typing import Any, Literal

import orjson
from starlette.responses import Response

from half_store.domain.constants import VALUE_BINARY, VALUE_JSON
from half_store.domain.errors import ArrowUnavailable
from half_store.domain.message_page import MessagePage
from half_store.domain.records import FetchResult, StoredMessage

ARROW_STREAM = "application/vnd.apache.arrow.stream"
JSON = "application/json"
NEXT_OFFSET_HEADER = "X-Halfmq-Next-Offset"
HIGH_WATERMARK_HEADER = "X-Halfmq-High-Watermark"
LAST_STABLE_OFFSET_HEADER = "X-Halfmq-Last-Stable-Offset"

# What ends an IPC stream: the continuation marker and a message of length 0.
END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"

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


def negotiate(accept: str | None, *, arrow_available: Callable[[], bool]) -> FetchFormat:
    """JSON or Arrow for a fetch with this ``Accept`` header.

    Arrow only when the client names its media type (``*/*`` means JSON, as it always
    has) with a quality at least that of JSON. When this broker cannot make Arrow, a
    client that also accepts JSON gets JSON; one that accepts only Arrow gets 406
    ``ARROW_UNAVAILABLE``. Any other ``Accept`` gets JSON, as before this endpoint knew
    Arrow. ``arrow_available`` is asked only when Arrow is wanted: it imports pyarrow.
    """
    if not accept:
        return "json"
    ranges = _accepted(accept)
    arrow_quality = ranges.get(ARROW_STREAM, 0.0)
    if arrow_quality <= 0.0:
        return "json"
    json_quality = next((ranges[r] for r in (JSON, "application/*", "*/*") if r in ranges), 0.0)
    if arrow_quality >= json_quality:
        if arrow_available():
            return "arrow"
        if json_quality <= 0.0:
            raise ArrowUnavailable(
                f"this broker cannot answer {ARROW_STREAM} (pyarrow is not installed); "
                f"accept {JSON} too, or install pyarrow where the broker runs"
            )
    return "json"


@cache
def _pyarrow() -> Any:
    """pyarrow and its IPC module, imported once on first use; None when it is missing."""
    try:
        import pyarrow
        import pyarrow.ipc
    except ImportError:
        return None
    return pyarrow


def arrow_available() -> bool:
    return _pyarrow() is not None


# -- the stream ------------------------------------------------------------------------------


@cache
def _schema() -> Any:
    pa = _pyarrow()
    return pa.schema(
        [
            pa.field("topic", pa.utf8(), nullable=False),
            pa.field("partition", pa.int32(), nullable=False),
            pa.field("offset", pa.int64(), nullable=False),
            pa.field("timestamp", pa.timestamp("ms", tz="UTC"), nullable=False),
            pa.field("key", pa.utf8()),
            pa.field("value", pa.utf8()),
            pa.field("value_base64", pa.binary()),
            pa.field("headers", pa.map_(pa.utf8(), pa.utf8()), nullable=False),
        ]
    )


def fetch_schema() -> Any:
    """The schema of every Arrow fetch answer (without the page's metadata)."""
    return _schema()


def arrow_response(result: FetchResult) -> Response:
    """The page as an Arrow IPC stream, its positions in the ``X-Halfmq-*`` headers."""
    positions = {
        NEXT_OFFSET_HEADER: str(result.next_offset),
        HIGH_WATERMARK_HEADER: str(result.state.high_watermark),
        LAST_STABLE_OFFSET_HEADER: str(result.state.last_stable_offset),
    }
    return ArrowResponse(encode_page(result), headers=positions)


def encode_page(result: FetchResult) -> bytes:
    """The IPC stream of one fetch answer: schema (with the page's positions), its batches, the end.

    The stream's messages are serialised one by one and joined, which is what a stream
    writer does, for a third of its per-call cost (a 100-message page is mostly that).
    """
    pa = _pyarrow()
    schema = _schema()
    positions = {
        "halfmq.next_offset": str(result.next_offset),
        "halfmq.high_watermark": str(result.state.high_watermark),
        "halfmq.last_stable_offset": str(result.state.last_stable_offset),
    }
    parts = [schema.with_metadata(positions).serialize()]
    page = _as_page(result.messages)
    # Batches are made against the schema without metadata: against a fresh schema object
    # from_arrays took 200 µs instead of 70 µs for 100 messages.
    parts.extend(_record_batch(pa, schema, page, start, stop).serialize() for start, stop in _chunks(page))
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


def _record_batch(pa: Any, schema: Any, page: MessagePage, start: int, stop: int) -> Any:
    count = stop - start
    return pa.RecordBatch.from_arrays(
        [
            _repeated_utf8(pa, page.topic, count),
            pa.Array.from_buffers(pa.int32(), count, [None, pa.py_buffer(array("i", [page.partition]) * count)]),
            _int_column(pa, pa.int64(), page.offsets[start:stop]),
            _int_column(pa, schema.field("timestamp").type, page.timestamps[start:stop]),
            _keys(pa, page.keys[start:stop]),
            *_value_columns(pa, page, start, stop),
            _headers(pa, schema.field("headers").type, page.headers[start:stop], count),
        ],
        schema=schema,
    )


def _int_column(pa: Any, arrow_type: Any, values: array[int]) -> Any:
    """A 64-bit column from an array of typecode ``q``, its buffer as it is."""
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(values)])


def _variable_width(pa: Any, arrow_type: Any, items: Sequence[bytes | None]) -> Any:
    """A utf8 or binary array from encoded items (None for null), buffer by buffer."""
    count = len(items)
    validity = None
    present: Sequence[bytes]
    if None in items:
        validity = _validity(pa, items)
        present = [item or b"" for item in items]
    else:
        present = items  # type: ignore[assignment]  # no None in it: checked just above
    ends = array("i", accumulate(map(len, present), initial=0))
    return pa.Array.from_buffers(arrow_type, count, [validity, pa.py_buffer(ends), pa.py_buffer(b"".join(present))])


def _validity(pa: Any, items: Sequence[object]) -> Any:
    """Arrow's validity bitmap for ``items``: bit ``i`` (least significant first) set where item ``i`` is not None."""
    bits = "".join("0" if item is None else "1" for item in reversed(items))
    return pa.py_buffer(int(bits, 2).to_bytes((len(items) + 7) // 8, "little"))


def _repeated_utf8(pa: Any, text: str, count: int) -> Any:
    encoded = text.encode()
    ends = array("i", range(0, (count + 1) * len(encoded), len(encoded))) if encoded else array("i", [0]) * (count + 1)
    return pa.Array.from_buffers(pa.utf8(), count, [None, pa.py_buffer(ends), pa.py_buffer(encoded * count)])


def _keys(pa: Any, keys: Sequence[str | None]) -> Any:
    if keys.count(None) == len(keys):
        return pa.nulls(len(keys), pa.utf8())
    return _variable_width(pa, pa.utf8(), [key.encode() if key is not None else None for key in keys])


def _value_columns(pa: Any, page: MessagePage, start: int, stop: int) -> tuple[Any, Any]:
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
        # Arrow's 32-bit offsets, from 0. Not with pyarrow.compute: importing it costs the
        # front 9 MB and a cast 4 MB more, and subtract's first call 50 MB (kernels).
        offsets = pa.py_buffer(array("i", map(sub, ends, repeat(first)) if first else ends))
        data = pa.py_buffer(page.values).slice(first, last - first)
        arrow_type = pa.utf8() if binary == 0 else pa.binary()
        column = pa.Array.from_buffers(arrow_type, count, [None, offsets, data])
        if binary == 0:
            return column, pa.nulls(count, pa.binary())
        return pa.nulls(count, pa.utf8()), column
    values = list(page.value_slices(start, stop))
    texts = [value if kind != VALUE_BINARY else None for value, kind in zip(values, kinds, strict=True)]
    raw = [value if kind == VALUE_BINARY else None for value, kind in zip(values, kinds, strict=True)]
    return _variable_width(pa, pa.utf8(), texts), _variable_width(pa, pa.binary(), raw)


def _headers(pa: Any, map_type: Any, headers: Sequence[str | None], count: int) -> Any:
    if headers.count(None) == count:
        return _no_headers(pa, map_type, count)
    names: list[bytes] = []
    texts: list[bytes] = []
    ends = array("i", [0])
    for stored in headers:
        if stored:
            for name, text in orjson.loads(stored).items():
                names.append(name.encode())
                texts.append(text.encode())
        ends.append(len(names))
    entry_ends = pa.Array.from_buffers(pa.int32(), count + 1, [None, pa.py_buffer(ends)])
    return pa.MapArray.from_arrays(
        entry_ends, _variable_width(pa, pa.utf8(), names), _variable_width(pa, pa.utf8(), texts), type=map_type
    )


_empty_maps: list[Any] = []


def _no_headers(pa: Any, map_type: Any, count: int) -> Any:
    """``count`` empty maps: a slice of one kept array, grown to the largest page seen."""
    if not _empty_maps or len(_empty_maps[0]) < count:
        ends = pa.Array.from_buffers(pa.int32(), count + 1, [None, pa.py_buffer(bytes(4 * (count + 1)))])
        empty = _variable_width(pa, pa.utf8(), [])
        _empty_maps[:] = [pa.MapArray.from_arrays(ends, empty, empty, type=map_type)]
    return _empty_maps[0].slice(0, count)
