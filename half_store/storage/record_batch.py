"""The stored form of a record batch: the records of one produce request to one partition, in one row.

Kafka keeps what one request brings to a partition together, as a batch whose offsets
run ``base_offset .. base_offset + count - 1``. Here such a batch is one ``messages``
row: ``offset`` is its base offset, ``record_count`` its length, ``value_kind`` is
:data:`VALUE_BATCH`, and ``value`` holds the records in the layout below. Storing one
row instead of ``count`` is what lets batched produce run past the database's rate of
inserting rows.

The layout is columnar and little-endian, so that both ends are a handful of C-level
operations per column rather than per-record parsing:

    version     u8         1
    count       u32        n
    timestamps  i64 × n
    kinds       u8 × n     each record's value kind (JSON or binary)
    present     u8 × n     bit 0: it has a key, bit 1: headers, bit 2: properties
    lengths     u32 × 4n   key lengths, value lengths, header lengths, property lengths
                           (0 where absent)
    data                   the keys' UTF-8 bytes, then the values, then the headers,
                           then the properties, each column's bytes back to back

Whatever reads the log sees records, never this form: :func:`decode` turns a batch
back into the records it was made of.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Sequence
from itertools import accumulate, pairwise, repeat
from typing import NamedTuple

from half_store.domain.errors import InternalError
from half_store.domain.records import Record

VERSION = 1
_HEADER = struct.Struct("<BI")
# The bytes of the layout itself: what a stored batch holds beyond its records' keys, values, headers and properties.
HEADER_BYTES = _HEADER.size
BYTES_PER_RECORD = 8 + 1 + 1 + 4 * 4
_KEY, _HEADERS, _PROPERTIES = 1, 2, 4
# Per bit, a table that keeps only that bit of each flags byte: a column's presence in one C call.
_ONLY = {bit: bytes(flags & bit for flags in range(256)) for bit in (_KEY, _HEADERS, _PROPERTIES)}


class BatchColumns(NamedTuple):
    """A decoded batch, column by column: what readers zip into their own rows.

    The values stay as they are stored, back to back in one string with their lengths
    beside them: a fetch page carries them on that way, and only a reader that wants
    them one by one cuts them apart (:meth:`value_list`).
    """

    timestamps: array[int]
    keys: list[str | None]
    values: bytes
    value_lengths: array[int]
    kinds: bytes
    headers: list[str | None]
    properties: list[str | None]

    def value_list(self) -> list[bytes]:
        ends = accumulate(self.value_lengths, initial=0)
        return [self.values[a:b] for a, b in pairwise(ends)]


def encode(records: Sequence[Record]) -> bytes:
    """The stored form of ``records`` (two or more; a lone record is stored as a plain row)."""
    count = len(records)
    keys = [b"" if r.key is None else r.key.encode() for r in records]
    headers = [b"" if r.headers is None else r.headers.encode() for r in records]
    properties = [b"" if r.properties is None else r.properties.encode() for r in records]
    values = [r.value for r in records]
    present = bytes(
        (r.key is not None) * _KEY + (r.headers is not None) * _HEADERS + (r.properties is not None) * _PROPERTIES
        for r in records
    )
    lengths = array("I", map(len, keys))
    lengths.extend(map(len, values))
    lengths.extend(map(len, headers))
    lengths.extend(map(len, properties))
    timestamps = array("q", [r.timestamp for r in records])
    if sys.byteorder == "big":  # pragma: no cover - the stored form is little-endian everywhere
        lengths.byteswap()
        timestamps.byteswap()
    return b"".join(
        (
            _HEADER.pack(VERSION, count),
            timestamps.tobytes(),
            bytes(r.value_kind for r in records),
            present,
            lengths.tobytes(),
            *keys,
            *values,
            *headers,
            *properties,
        )
    )


def decode(blob: bytes) -> list[Record]:
    """The records of a stored batch, in offset order."""
    c = decode_columns(blob)
    columns = zip(c.keys, c.value_list(), c.kinds, c.headers, c.timestamps, c.properties, strict=True)
    return list(map(tuple.__new__, repeat(Record), columns))


def decode_columns(blob: bytes, first: int = 0, stop: int | None = None) -> BatchColumns:
    """Records ``first`` to ``stop - 1`` (by default all) of a stored batch, as columns.

    The whole layout is checked; only the records asked for are cut out of it.
    """
    if len(blob) < _HEADER.size:
        raise InternalError("a stored record batch is shorter than its header")
    version, count = _HEADER.unpack_from(blob)
    if version != VERSION:
        raise InternalError(f"a stored record batch has layout version {version}; this broker reads version {VERSION}")
    if len(blob) < HEADER_BYTES + BYTES_PER_RECORD * count:
        raise InternalError("a stored record batch is shorter than its record count says")
    stop = count if stop is None else min(stop, count)
    at = _HEADER.size
    timestamps = array("q")
    timestamps.frombytes(blob[at + 8 * first : at + 8 * stop])
    at += 8 * count
    kinds = blob[at + first : at + stop]
    present = blob[at + count + first : at + count + stop]
    at += 2 * count
    lengths = array("I")
    lengths.frombytes(blob[at : at + 16 * count])
    at += 16 * count
    if sys.byteorder == "big":  # pragma: no cover
        timestamps.byteswap()
        lengths.byteswap()
    # Where each column's items end in the blob, with the column's start in front.
    bounds = list(accumulate(lengths, initial=at))
    if bounds[-1] != len(blob):
        raise InternalError("a stored record batch's data does not match its lengths")
    key_ends, value_ends, header_ends, property_ends = (
        bounds[column * count + first : column * count + stop + 1] for column in range(4)
    )
    value_lengths = lengths[count + first : count + stop]
    return BatchColumns(
        timestamps,
        _texts(blob, present, _KEY, key_ends),
        blob[value_ends[0] : value_ends[-1]],
        value_lengths,
        kinds,
        _texts(blob, present, _HEADERS, header_ends),
        _texts(blob, present, _PROPERTIES, property_ends),
    )


def _texts(blob: bytes, present: bytes, bit: int, ends: list[int]) -> list[str | None]:
    """A text column: UTF-8 items where ``present`` has ``bit``, None elsewhere."""
    if not present.translate(_ONLY[bit]).strip(b"\x00"):
        return [None] * len(present)
    return [blob[a:b].decode() if flags & bit else None for flags, (a, b) in zip(present, pairwise(ends), strict=True)]
