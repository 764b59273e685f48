"""The row shape of the ``halfmq`` source, and fetched messages (Arrow or JSON) in it.

Columns (the contract's "Spark" section): ``topic, partition, offset, key, value,
headers, timestamp``.

``value`` is a string column, and a broker message value is any JSON value or
bytes, so the mapping is:

* a JSON string -> the string itself (``"hello"`` -> ``hello``);
* any other JSON value -> its compact JSON text (``{"a": 1}`` -> ``{"a":1}``,
  ``42`` -> ``42``, ``null`` -> ``null``), so ``from_json(value, schema)`` works;
* ``value_base64`` -> the decoded bytes read as UTF-8, invalid sequences replaced
  by U+FFFD. Text payloads sent as bytes come through intact; true binary is
  lossy, which is the price of one string column (the contract's shape).

The broker's Arrow answer (``docs/arrow.md``) carries every value's JSON text, or a
binary value's raw bytes; :func:`from_arrow_fetch` maps those columns to the same
``value`` with Arrow compute functions, and falls back to Python only for the rows that
need it (JSON strings with escapes, bytes that are not UTF-8).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

SCHEMA = StructType(
    [
        StructField("topic", StringType(), nullable=False),
        StructField("partition", IntegerType(), nullable=False),
        StructField("offset", LongType(), nullable=False),
        StructField("key", StringType(), nullable=True),
        StructField("value", StringType(), nullable=True),
        StructField("headers", MapType(StringType(), StringType(), valueContainsNull=True), nullable=True),
        StructField("timestamp", TimestampType(), nullable=True),
    ]
)

# Spark compares a returned batch's schema with exactly this (nullability, map
# field names, timestamp unit and zone included), so derive it rather than spell it.
ARROW_SCHEMA: pa.Schema = to_arrow_schema(SCHEMA, timezone="UTC")
_HEADERS_TYPE = ARROW_SCHEMA.field("headers").type


def value_text(message: dict[str, Any]) -> str | None:
    """The ``value`` column for one fetched message (see the module docstring)."""
    if "value_base64" in message and message["value_base64"] is not None:
        return base64.b64decode(message["value_base64"]).decode("utf-8", errors="replace")
    value = message.get("value")
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def to_record_batch(topic: str, partition: int, messages: list[dict[str, Any]]) -> pa.RecordBatch:
    """Fetched message dicts of one partition as one Arrow batch in :data:`ARROW_SCHEMA`."""
    count = len(messages)
    header_offsets = [0]
    header_keys: list[str] = []
    header_values: list[str | None] = []
    for message in messages:
        headers = message.get("headers") or {}
        header_keys.extend(headers.keys())
        header_values.extend(headers.values())
        header_offsets.append(len(header_keys))
    headers_array = pa.MapArray.from_arrays(
        pa.array(header_offsets, pa.int32()),
        pa.array(header_keys, pa.string()),
        pa.array(header_values, pa.string()),
        type=_HEADERS_TYPE,
    )
    # The broker sends milliseconds since the epoch; Spark's TimestampType is microseconds in UTC.
    timestamps = pa.array([m.get("timestamp") for m in messages], pa.int64())
    timestamps = pc.multiply(timestamps, 1000).cast(ARROW_SCHEMA.field("timestamp").type)
    return pa.RecordBatch.from_arrays(
        [
            pa.repeat(pa.scalar(topic, pa.string()), count),
            pa.repeat(pa.scalar(partition, pa.int32()), count),
            pa.array([m["offset"] for m in messages], pa.int64()),
            pa.array([m.get("key") for m in messages], pa.string()),
            pa.array([value_text(m) for m in messages], pa.string()),
            headers_array,
            timestamps,
        ],
        schema=ARROW_SCHEMA,
    )


def from_arrow_fetch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """One batch of the broker's Arrow fetch answer in :data:`ARROW_SCHEMA`."""
    return pa.RecordBatch.from_arrays(
        [
            batch.column("topic"),
            batch.column("partition"),
            batch.column("offset"),
            batch.column("key"),
            _value_column(batch.column("value"), batch.column("value_base64")),
            batch.column("headers").cast(_HEADERS_TYPE),
            # Milliseconds on the wire; Spark's TimestampType is microseconds in UTC.
            batch.column("timestamp").cast(ARROW_SCHEMA.field("timestamp").type),
        ],
        schema=ARROW_SCHEMA,
    )


def _value_column(json_texts: pa.Array, raw_bytes: pa.Array) -> pa.Array:
    """``value`` from the wire's ``value`` (JSON text) and ``value_base64`` (raw bytes) columns."""
    values = _unquoted_json_strings(json_texts)
    if raw_bytes.null_count < len(raw_bytes):
        values = pc.coalesce(values, _utf8_with_replacement(raw_bytes))
    return values


def _unquoted_json_strings(texts: pa.Array) -> pa.Array:
    """JSON strings as the strings themselves; any other JSON text as it is."""
    starts_quoted = pc.starts_with(texts, '"')  # null where the value is binary
    quoted = pc.fill_null(starts_quoted, False)
    unquoted = pc.utf8_slice_codeunits(texts, 1, -1)
    # A page of string values (the usual case) needs no choice per row: if_else copied
    # every value again, 2 ms of the 2.6 ms this took for 5,000 values of 1 KiB.
    values = unquoted if pc.all(starts_quoted).as_py() is not False else pc.if_else(quoted, unquoted, texts)
    # Without a backslash the text between the quotes is the string; with one, json decodes it.
    # One search of the whole data buffer (0.3 ms for 5 MB) usually shows there is none;
    # match_substring, row by row, took 10 ms.
    data = texts.buffers()[2]
    if data is None or data.to_pybytes().find(b"\\") < 0:
        return values
    escaped = pc.and_(quoted, pc.fill_null(pc.match_substring(texts, "\\"), False))
    if pc.any(escaped).as_py():
        decoded = [json.loads(text) for text in pc.filter(texts, escaped).to_pylist()]
        values = pc.replace_with_mask(values, escaped, pa.array(decoded, pa.string()))
    return values


def _utf8_with_replacement(raw: pa.Array) -> pa.Array:
    """Bytes as UTF-8 text; invalid sequences become U+FFFD (Arrow's cast refuses them)."""
    try:
        return raw.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array(
            [None if item is None else item.decode("utf-8", errors="replace") for item in raw.to_pylist()],
            pa.string(),
        )
