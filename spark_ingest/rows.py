"""The row shape of the ``halfmq`` source and the conversion of fetched messages to Arrow.

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
