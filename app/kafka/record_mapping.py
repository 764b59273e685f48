"""Kafka records ↔ halfmq records (CONTRACT v1.3, "Records across the two APIs").

A Kafka record becomes a halfmq record that REST, the SDK and Spark read as a message:
its key as UTF-8 text, its value by the shared rule of :mod:`half_store.domain.wire_values`
(text stays text, other bytes are binary), its headers as a JSON object of UTF-8 strings.
What that form cannot hold — a key or header value that is not UTF-8, a null value
(a tombstone), a null header value, a header name given twice — is kept beside it in the
record's properties (``{"kafka": {...}}``), which only this front reads, so a Kafka
consumer gets back exactly the bytes that were sent. REST shows such a key as null, and
such a header as its value's UTF-8 text with the undecodable bytes replaced.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import orjson

from app.kafka.record_batches import KafkaRecord
from half_store.domain.constants import VALUE_BATCH
from half_store.domain.log_batches import LogBatch
from half_store.domain.records import Record
from half_store.domain.wire_values import value_as_bytes, value_from_bytes
from half_store.storage import record_batch

_NULL_VALUE = b"null"


def to_record(record: KafkaRecord) -> Record:
    """A produced Kafka record in halfmq's form."""
    extra: dict[str, Any] = {}
    key: str | None = None
    if record.key is not None:
        try:
            key = record.key.decode()
        except UnicodeDecodeError:
            extra["key"] = base64.b64encode(record.key).decode()
    if record.value is None:
        value, kind = _NULL_VALUE, 0
        extra["null_value"] = True
    else:
        value, kind = value_from_bytes(record.value)
    headers: str | None = None
    if record.headers:
        shown: dict[str, str] = {}
        exact = len({name for name, _ in record.headers}) == len(record.headers)
        for name, raw in record.headers:
            if raw is None:
                exact = False
                shown[name] = ""
                continue
            try:
                shown[name] = raw.decode()
            except UnicodeDecodeError:
                exact = False
                shown[name] = raw.decode(errors="replace")
        headers = orjson.dumps(shown).decode()
        if not exact:
            extra["headers"] = [[name, None if raw is None else base64.b64encode(raw).decode()] for name, raw in record.headers]
    properties = orjson.dumps({"kafka": extra}).decode() if extra else None
    return Record(key, value, kind, headers, record.timestamp, properties)


def from_stored(
    offset_delta: int,
    timestamp: int,
    key: str | None,
    value: bytes,
    value_kind: int,
    headers: str | None,
    properties: str | None,
) -> KafkaRecord:
    """A stored record (made by any front) as a Kafka consumer gets it."""
    extra: dict[str, Any] = {}
    if properties is not None and '"kafka"' in properties:
        found = orjson.loads(properties).get("kafka")
        if isinstance(found, dict):
            extra = found
    raw_key = key.encode() if key is not None else None
    if "key" in extra:
        raw_key = base64.b64decode(extra["key"])
    raw_value = None if extra.get("null_value") else value_as_bytes(value, value_kind)
    raw_headers: tuple[tuple[str, bytes | None], ...] = ()
    if "headers" in extra:
        raw_headers = tuple((name, None if v is None else base64.b64decode(v)) for name, v in extra["headers"])
    elif headers is not None:
        parsed = orjson.loads(headers)
        raw_headers = tuple((name, str(v).encode()) for name, v in parsed.items())
    return KafkaRecord(offset_delta, timestamp, raw_key, raw_value, raw_headers)


def records_of(batch: LogBatch) -> Iterator[KafkaRecord]:
    """The Kafka records of one stored row, offset deltas from the row's offset."""
    if batch.value_kind != VALUE_BATCH:
        yield from_stored(0, batch.timestamp, batch.key, batch.value, batch.value_kind, batch.headers, batch.properties)
        return
    c = record_batch.decode_columns(batch.value)
    for index, (ts, key, value, kind, headers, properties) in enumerate(
        zip(c.timestamps, c.keys, c.value_list(), c.kinds, c.headers, c.properties, strict=True)
    ):
        yield from_stored(index, ts, key, value, kind, headers, properties)
