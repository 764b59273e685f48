"""One ``read_committed`` page from the broker as Arrow batches in the source's row shape.

The source asks for the broker's Arrow answer (``docs/arrow.md``): the page arrives
columnar and goes to Spark without a JSON parse or a Python object per message. A
broker older than the Arrow fetch answers JSON instead, because the request accepts
both; that page is converted message by message.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.ipc

from sdk.calls import ARROW_STREAM
from spark_ingest.client import BrokerClient
from spark_ingest.rows import from_arrow_fetch, to_record_batch

# Arrow first; JSON from a broker older than the Arrow fetch.
ACCEPT_ARROW_OR_JSON = f"{ARROW_STREAM}, application/json;q=0.5"


@dataclass(frozen=True)
class RowsPage:
    """One fetch: its rows (in :data:`spark_ingest.rows.ARROW_SCHEMA`) and where to continue."""

    batches: list[pa.RecordBatch]
    next_offset: int
    high_watermark: int
    last_stable_offset: int


def fetch_rows(
    client: BrokerClient, topic: str, partition: int, offset: int, max_messages: int, tag: str | None = None
) -> RowsPage:
    """One ``read_committed`` page starting at ``offset`` (with ``tag``: the rows that tag filter keeps).

    Offsets of the rows have gaps (aborted transactions, control markers); continue
    from ``next_offset``, never from the last row's offset + 1.
    """
    response = client.fetch_arrow(topic, partition, offset, max_messages, accept=ACCEPT_ARROW_OR_JSON, tag=tag)
    if response.headers.get("content-type", "").startswith(ARROW_STREAM):
        with pa.ipc.open_stream(response.content) as reader:
            batches = [from_arrow_fetch(batch) for batch in reader if batch.num_rows]
        return RowsPage(
            batches,
            next_offset=int(response.headers["X-Halfmq-Next-Offset"]),
            high_watermark=int(response.headers["X-Halfmq-High-Watermark"]),
            last_stable_offset=int(response.headers["X-Halfmq-Last-Stable-Offset"]),
        )
    body = response.json()
    messages = body["messages"]
    return RowsPage(
        [to_record_batch(topic, partition, messages)] if messages else [],
        next_offset=int(body["next_offset"]),
        high_watermark=int(body["high_watermark"]),
        last_stable_offset=int(body["last_stable_offset"]),
    )
