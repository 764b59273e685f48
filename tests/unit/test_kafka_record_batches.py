"""Kafka's record batch v2: what the Kafka front reads from producers and writes to consumers."""

from __future__ import annotations

import struct

import cramjam
import pytest
from crc32c import crc32c

from app.kafka.record_batches import (
    CorruptBatch,
    KafkaRecord,
    OutgoingBatch,
    UnsupportedBatch,
    control_record,
    control_type,
    read_batches,
    write_batch,
)

RECORDS = [
    KafkaRecord(0, 1_700_000_000_123, b"k", b"v" * 300, (("h", b"1"), ("n", None))),
    KafkaRecord(1, 1_700_000_000_125, None, None, ()),
    KafkaRecord(2, 1_700_000_000_124, b"\xff", b"", ()),
]


def test_a_written_batch_reads_back_record_for_record_with_millisecond_timestamps() -> None:
    data = write_batch(OutgoingBatch(40, RECORDS, producer_id=7, producer_epoch=2, base_sequence=11, transactional=True))
    (batch,) = read_batches(data)
    assert batch.records == tuple(RECORDS)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.transactional) == (7, 2, 11, True)


@pytest.mark.parametrize(
    ("codec", "compress"),
    [
        (1, lambda body: bytes(cramjam.gzip.compress(body))),
        (2, lambda body: bytes(cramjam.snappy.compress_raw(body))),
        (3, lambda body: bytes(cramjam.lz4.compress(body))),
        (4, lambda body: bytes(cramjam.zstd.compress(body))),
    ],
    ids=["gzip", "snappy", "lz4", "zstd"],
)
def test_compressed_batches_are_read_decompressed(codec: int, compress: object) -> None:
    plain = write_batch(OutgoingBatch(0, RECORDS))
    header_end = 61  # base offset .. record count: the records follow
    body = compress(plain[header_end:])  # type: ignore[operator]
    after_crc = bytearray(plain[21:header_end] + body)
    struct.pack_into(">h", after_crc, 0, codec)
    prefix = bytearray(plain[:21])
    struct.pack_into(">i", prefix, 8, len(after_crc) + 9)
    struct.pack_into(">I", prefix, 17, crc32c(bytes(after_crc)))
    (batch,) = read_batches(bytes(prefix + after_crc))
    assert batch.records == tuple(RECORDS)


def test_a_batch_whose_crc_does_not_match_is_corrupt() -> None:
    data = bytearray(write_batch(OutgoingBatch(0, RECORDS)))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptBatch):
        read_batches(bytes(data))


@pytest.mark.parametrize("cut", [10, 70, -3])
def test_a_cut_batch_is_corrupt(cut: int) -> None:
    with pytest.raises(CorruptBatch):
        read_batches(write_batch(OutgoingBatch(0, RECORDS))[:cut])


def test_an_old_message_format_is_refused() -> None:
    data = bytearray(write_batch(OutgoingBatch(0, RECORDS)))
    data[16] = 1  # magic
    with pytest.raises(UnsupportedBatch):
        read_batches(bytes(data))


def test_control_records_carry_their_marker_type() -> None:
    assert control_type(control_record(True, 0)) == 1
    assert control_type(control_record(False, 0)) == 0
