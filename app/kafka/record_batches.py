"""Kafka's record batch format (magic v2): what Produce carries in and Fetch carries out.

kio gives every request and response its types, but its ``kio.records`` reader cuts record
timestamps to whole seconds and reads no compressed batch, so the batch format is written
here: one batch is

    base_offset i64, batch_length i32, partition_leader_epoch i32, magic i8 (2), crc u32
    (CRC-32C of everything after it), attributes i16, last_offset_delta i32,
    base_timestamp i64, max_timestamp i64, producer_id i64, producer_epoch i16,
    base_sequence i32, record count i32, then the records (compressed as a whole when the
    attributes' low three bits say so)

and one record is ``length varint, attributes i8, timestamp_delta varlong, offset_delta
varint, key (varint length, -1 = null), value (same), header count varint, headers (key
and value as above)``. A control record's key is ``version i16, type i16`` (0 abort,
1 commit) and its value ``version i16, coordinator_epoch i32``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import cramjam
from crc32c import crc32c

MAGIC = 2
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

COMPRESSION_MASK = 0x07
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

# base_offset .. magic: the part before the CRC.
_PREFIX = struct.Struct(">qiibI")
# attributes .. record count: the part after the CRC that every batch has.
_HEADER = struct.Struct(">hiqqqhii")
_PREFIX_AND_HEADER = _PREFIX.size + _HEADER.size
_BATCH_LENGTH_EXCLUDES = 12  # base_offset and batch_length themselves
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


class CorruptBatch(ValueError):
    """A batch that does not parse: Kafka's CORRUPT_MESSAGE."""


class UnsupportedBatch(ValueError):
    """A well-formed batch this broker does not take (an old magic, an unknown codec)."""


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    offset_delta: int
    timestamp: int  # ms since the epoch
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class ReceivedBatch:
    """A batch as a producer sent it, its records decompressed."""

    attributes: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: tuple[KafkaRecord, ...]

    @property
    def transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def codec(self) -> str:
        return CODECS.get(self.attributes & COMPRESSION_MASK, "unknown")

    @property
    def idempotent(self) -> bool:
        return self.producer_id >= 0


@dataclass(frozen=True, slots=True)
class OutgoingBatch:
    """A batch for a Fetch answer: records already at their offsets."""

    base_offset: int
    records: Sequence[KafkaRecord]
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    transactional: bool = False
    control: bool = False


# -- reading ---------------------------------------------------------------------------------------


def read_batches(data: bytes) -> list[ReceivedBatch]:
    """Every batch in a produce request's records, checked (CRC, lengths) and decompressed."""
    batches = []
    at = 0
    while at < len(data):
        if len(data) - at < _PREFIX_AND_HEADER:
            raise CorruptBatch("a record batch is cut short")
        _, length, _, magic, crc = _PREFIX.unpack_from(data, at)
        if magic != MAGIC:
            raise UnsupportedBatch(f"record batch magic {magic}: this broker takes magic 2 (Produce v3+)")
        end = at + _BATCH_LENGTH_EXCLUDES + length
        if length < _PREFIX_AND_HEADER - _BATCH_LENGTH_EXCLUDES or end > len(data):
            raise CorruptBatch("a record batch's length does not fit the request")
        if crc32c(memoryview(data)[at + _PREFIX.size : end]) != crc:
            raise CorruptBatch("a record batch's CRC does not match its contents")
        batches.append(_read_batch(data, at + _PREFIX.size, end))
        at = end
    return batches


def _read_batch(data: bytes, at: int, end: int) -> ReceivedBatch:
    attributes, _, base_timestamp, _, producer_id, producer_epoch, base_sequence, count = _HEADER.unpack_from(data, at)
    body = data[at + _HEADER.size : end]
    codec = attributes & COMPRESSION_MASK
    if codec:
        body = decompress(codec, body)
    if count < 0:
        raise CorruptBatch("a record batch has a negative record count")
    records = []
    reader = _Reader(body)
    for _ in range(count):
        records.append(reader.record(base_timestamp))
    if reader.at != len(body):
        raise CorruptBatch("a record batch has bytes past its last record")
    return ReceivedBatch(attributes, producer_id, producer_epoch, base_sequence, tuple(records))


def decompress(codec: int, body: bytes) -> bytes:
    try:
        if codec == 1:
            return bytes(cramjam.gzip.decompress(body))
        if codec == 2:
            return _snappy(body)
        if codec == 3:
            return bytes(cramjam.lz4.decompress(body))
        if codec == 4:
            return bytes(cramjam.zstd.decompress(body))
    except cramjam.DecompressionError as error:
        raise CorruptBatch(f"a {CODECS[codec]} record batch does not decompress: {error}") from error
    raise UnsupportedBatch(f"unknown compression codec {codec}")


def _snappy(body: bytes) -> bytes:
    """Raw snappy (librdkafka), or the Java client's xerial framing: chunks of int32 length + raw snappy."""
    if not body.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(body))
    out = []
    at = 16  # magic, version, compatible version
    while at < len(body):
        if at + 4 > len(body):
            raise CorruptBatch("a snappy chunk header is cut short")
        (size,) = struct.unpack_from(">i", body, at)
        at += 4
        out.append(bytes(cramjam.snappy.decompress_raw(body[at : at + size])))
        at += size
    return b"".join(out)


class _Reader:
    """Walks a batch's records: varints and length-prefixed byte strings."""

    __slots__ = ("at", "data")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def varint(self) -> int:
        data, at = self.data, self.at
        shift = result = 0
        while True:
            if at >= len(data):
                raise CorruptBatch("a varint runs past the end of its record batch")
            byte = data[at]
            at += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
            if shift > 63:
                raise CorruptBatch("a varint is longer than ten bytes")
        self.at = at
        return (result >> 1) ^ -(result & 1)  # zig-zag

    def nullable_bytes(self) -> bytes | None:
        length = self.varint()
        if length < 0:
            return None
        start = self.at
        self.at = start + length
        if self.at > len(self.data):
            raise CorruptBatch("a key, value or header runs past the end of its record batch")
        return self.data[start : self.at]

    def record(self, base_timestamp: int) -> KafkaRecord:
        length = self.varint()
        start = self.at
        self.at += 1  # record attributes: unused in v2
        timestamp_delta = self.varint()
        offset_delta = self.varint()
        key = self.nullable_bytes()
        value = self.nullable_bytes()
        headers = []
        for _ in range(self.varint()):
            name = self.nullable_bytes()
            if name is None:
                raise CorruptBatch("a record header has a null key")
            try:
                text = name.decode()
            except UnicodeDecodeError as error:
                raise CorruptBatch("a record header key is not UTF-8") from error
            headers.append((text, self.nullable_bytes()))
        if self.at != start + length:
            raise CorruptBatch("a record's length does not match its contents")
        return KafkaRecord(offset_delta, base_timestamp + timestamp_delta, key, value, tuple(headers))


# -- writing ---------------------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while encoded >= 0x80:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)
    return bytes(out)


_SMALL_VARINTS = [_varint(n) for n in range(-1, 128)]


def _len_varint(value: int) -> bytes:
    return _SMALL_VARINTS[value + 1] if value < 128 else _varint(value)


def _nullable(value: bytes | None) -> bytes:
    if value is None:
        return _SMALL_VARINTS[0]
    return _len_varint(len(value)) + value


def write_batch(batch: OutgoingBatch) -> bytes:
    """One uncompressed batch as Kafka's Fetch returns it."""
    records = batch.records
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_timestamp = records[0].timestamp
    max_timestamp = max(r.timestamp for r in records)
    parts: list[bytes] = []
    for record in records:
        headers = b"".join(_nullable(name.encode()) + _nullable(value) for name, value in record.headers)
        body = b"".join(
            (
                b"\x00",
                _varint(record.timestamp - base_timestamp),
                _len_varint(record.offset_delta),
                _nullable(record.key),
                _nullable(record.value),
                _len_varint(len(record.headers)),
                headers,
            )
        )
        parts.append(_len_varint(len(body)))
        parts.append(body)
    attributes = (TRANSACTIONAL_BIT if batch.transactional else 0) | (CONTROL_BIT if batch.control else 0)
    after_crc = _HEADER.pack(
        attributes,
        records[-1].offset_delta,
        base_timestamp,
        max_timestamp,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        len(records),
    ) + b"".join(parts)
    length = len(after_crc) + _PREFIX.size - _BATCH_LENGTH_EXCLUDES
    return _PREFIX.pack(batch.base_offset, length, 0, MAGIC, crc32c(after_crc)) + after_crc


def control_record(commit: bool, timestamp: int) -> KafkaRecord:
    """The one record of a transaction marker's control batch."""
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    return KafkaRecord(0, timestamp, key, _CONTROL_VALUE.pack(0, 0), ())


def control_type(record: KafkaRecord) -> int | None:
    """A control record's type (abort 0, commit 1), None if its key is not a control key."""
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        return None
    kind: int = _CONTROL_KEY.unpack_from(record.key)[1]
    return kind


def batch_offsets(data: bytes) -> Iterator[tuple[int, int]]:
    """(base offset, last offset delta) of each batch in ``data``: for tests and tools."""
    at = 0
    while at + _PREFIX_AND_HEADER <= len(data):
        base, length, _, _, _ = _PREFIX.unpack_from(data, at)
        (last_delta,) = struct.unpack_from(">i", data, at + _PREFIX.size + 2)
        yield base, last_delta
        at += _BATCH_LENGTH_EXCLUDES + length
