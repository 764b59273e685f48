"""Arrow IPC stream messages written without pyarrow: FlatBuffers metadata, 8-byte aligned bodies.

The fetch answer's schema is fixed and its columns arrive as buffers already
(``MessagePage``), so the broker needs only the stream's framing, not an Arrow library:
pyarrow and numpy were 44 MB of the front once it had answered one Arrow fetch.

What is written follows the Arrow columnar format's IPC chapter and its ``Schema.fbs``
and ``Message.fbs``: each message is the continuation marker, the metadata's length,
a FlatBuffers ``Message`` padded to 8 bytes, then the body, whose buffers each start on
an 8-byte boundary. Readers verify the metadata (pyarrow runs the FlatBuffers verifier
on it), so every table, vector and scalar is aligned as FlatBuffers requires.

The FlatBuffers writer lays a buffer out front to back: a table's vtable, then the
table, then what its fields refer to. References are unsigned offsets forward from
where they are stored, so a subtree written once at an 8-byte boundary can be copied
into any other buffer at an 8-byte boundary (:class:`Written`): the schema's fields
are encoded once per process.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

# -- FlatBuffers -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scalar:
    """A scalar field: ``format`` is its ``struct`` code (``?``, ``B``, ``h``, ``i``, ``q``)."""

    format: str
    value: int


@dataclass(frozen=True, slots=True)
class String:
    utf8: bytes


@dataclass(frozen=True, slots=True)
class Table:
    """A table's fields by id; None where a field is absent (the schema's default)."""

    fields: tuple[FieldValue | None, ...] = ()


@dataclass(frozen=True, slots=True)
class TableVector:
    tables: Sequence[Table | Written]


@dataclass(frozen=True, slots=True)
class LongPairVector:
    """A vector of structs of two longs (Arrow's ``FieldNode`` and ``Buffer``), as flat values."""

    values: Sequence[int]


@dataclass(frozen=True, slots=True)
class Written:
    """An object already laid out from an 8-byte boundary; ``start`` is where references point."""

    data: bytes
    start: int


FieldValue: TypeAlias = Scalar | String | Table | TableVector | LongPairVector | Written


def flatbuffer(root: Table) -> bytes:
    """``root`` as a finished FlatBuffer (no file identifier), padded to 8 bytes."""
    out = bytearray(4)
    _point(out, 0, _table(out, root))
    _pad(out, 8)
    return bytes(out)


def written(item: Table | TableVector) -> Written:
    """``item`` laid out once, to be placed into any number of buffers as it is."""
    out = bytearray()
    start = _object(out, item)
    return Written(bytes(out), start)


def _pad(out: bytearray, alignment: int, skew: int = 0) -> None:
    """Zero bytes until ``len(out) + skew`` is a multiple of ``alignment``."""
    out += bytes(-(len(out) + skew) % alignment)


def _point(out: bytearray, slot: int, target: int) -> None:
    struct.pack_into("<I", out, slot, target - slot)


def _object(out: bytearray, item: FieldValue) -> int:
    """Writes ``item`` at the end of ``out``; returns where a reference to it points."""
    if isinstance(item, Table):
        return _table(out, item)
    if isinstance(item, String):
        _pad(out, 4)
        at = len(out)
        out += struct.pack("<I", len(item.utf8))
        out += item.utf8
        out += b"\0"
        return at
    if isinstance(item, LongPairVector):
        _pad(out, 8, skew=4)  # the structs after the 4-byte length start on an 8-byte boundary
        at = len(out)
        out += struct.pack(f"<I{len(item.values)}q", len(item.values) // 2, *item.values)
        return at
    if isinstance(item, TableVector):
        _pad(out, 4)
        at = len(out)
        out += struct.pack("<I", len(item.tables))
        out += bytes(4 * len(item.tables))
        for slot, table in enumerate(item.tables):
            _point(out, at + 4 + 4 * slot, _object(out, table))
        return at
    if isinstance(item, Written):
        _pad(out, 8)
        at = len(out)
        out += item.data
        return at + item.start
    raise TypeError(f"not an object: {item!r}")  # a Scalar is stored inline, never referred to


def _table(out: bytearray, table: Table) -> int:
    # Inline layout: the vtable offset first, then each present field at its own alignment.
    field_offsets: list[int] = []
    size, alignment = 4, 4
    for value in table.fields:
        if value is None:
            field_offsets.append(0)
            continue
        width = struct.calcsize(value.format) if isinstance(value, Scalar) else 4
        size += -size % width
        field_offsets.append(size)
        size += width
        alignment = max(alignment, width)
    _pad(out, 2)
    vtable_at = len(out)
    out += struct.pack(f"<{2 + len(field_offsets)}H", 4 + 2 * len(field_offsets), size, *field_offsets)
    _pad(out, alignment)
    at = len(out)
    out += bytes(size)
    struct.pack_into("<i", out, at, at - vtable_at)
    references: list[tuple[int, FieldValue]] = []
    for offset, value in zip(field_offsets, table.fields, strict=True):
        if isinstance(value, Scalar):
            struct.pack_into("<" + value.format, out, at + offset, value.value)
        elif value is not None:
            references.append((at + offset, value))
    for slot, value in references:
        _point(out, slot, _object(out, value))
    return at


# -- Arrow -----------------------------------------------------------------------------------

CONTINUATION: Final = b"\xff\xff\xff\xff"
# What ends a stream: the continuation marker and a message of length 0.
END_OF_STREAM: Final = CONTINUATION + bytes(4)

_METADATA_V5: Final = 4
_SCHEMA_MESSAGE: Final = 1
_RECORD_BATCH_MESSAGE: Final = 3

# ``Type`` union members, and ``TimeUnit``.
INT, BINARY, UTF8, TIMESTAMP, STRUCT, MAP = 2, 4, 5, 10, 13, 17
MILLISECOND: Final = 1


def field(name: str, type_id: int, type_table: Table, *, nullable: bool, children: Sequence[Table] = ()) -> Table:
    """A ``Field``: readers want its children vector even when it is empty."""
    return Table(
        (String(name.encode()), Scalar("?", nullable), Scalar("B", type_id), type_table, None, TableVector(children))
    )


def int_type(bit_width: int, *, signed: bool = True) -> Table:
    return Table((Scalar("i", bit_width), Scalar("?", signed)))


def timestamp_type(unit: int, timezone: str) -> Table:
    return Table((Scalar("h", unit), String(timezone.encode())))


def map_type(*, keys_sorted: bool = False) -> Table:
    return Table((Scalar("?", keys_sorted),))


EMPTY_TYPE: Final = Table()  # Utf8, Binary and Struct_ have no parameters


def schema_message(fields: Written, metadata: dict[str, str]) -> bytes:
    """The stream's first message: ``fields`` (a :func:`written` vector of :func:`field`) and the schema's metadata."""
    key_values = TableVector([Table((String(k.encode()), String(v.encode()))) for k, v in metadata.items()])
    little_endian = Scalar("h", 0)
    return _message(_SCHEMA_MESSAGE, Table((little_endian, fields, key_values)), 0)


# What a body is joined from: the page's own arrays and byte strings, never copied before the join.
BodyBuffer: TypeAlias = "bytes | memoryview | array[int]"


class RecordBatch:
    """One record batch: add each column's node with its buffers, depth first, then :meth:`message`."""

    def __init__(self, length: int) -> None:
        self.length = length
        self._nodes: list[int] = []
        self._buffers: list[int] = []
        self._body: list[BodyBuffer] = []
        self._body_length = 0

    def node(self, length: int, null_count: int, *buffers: BodyBuffer) -> None:
        """One array: its length, its nulls, and its buffers in the layout's order (validity first)."""
        self._nodes += (length, null_count)
        for buffer in buffers:
            size = memoryview(buffer).nbytes
            self._buffers += (self._body_length, size)
            padding = -size % 8
            self._body += (buffer, bytes(padding)) if padding else (buffer,)
            self._body_length += size + padding

    def message(self) -> list[BodyBuffer]:
        """The encapsulated message, as parts to join (the body's buffers are not copied here)."""
        header = Table((Scalar("q", self.length), LongPairVector(self._nodes), LongPairVector(self._buffers)))
        return [_message(_RECORD_BATCH_MESSAGE, header, self._body_length), *self._body]


def _message(header_type: int, header: Table, body_length: int) -> bytes:
    metadata = flatbuffer(Table((Scalar("h", _METADATA_V5), Scalar("B", header_type), header, Scalar("q", body_length))))
    return CONTINUATION + struct.pack("<i", len(metadata)) + metadata
