"""The messages every benchmark sends: 1 KiB values, the same bytes for halfmq, the ceilings and the peers."""

from __future__ import annotations

import orjson

TOPIC = "bench"
PARTITIONS = 4
PRODUCER_GROUP = "bench-producers"
VALUE_BYTES = 1024

# A JSON string value whose text is exactly 1 KiB: 1022 characters plus the quotes.
VALUE = "v" * (VALUE_BYTES - 2)
RAW_VALUE = orjson.dumps(VALUE)  # what the broker stores for it
assert len(RAW_VALUE) == VALUE_BYTES
PEER_PAYLOAD = b"v" * VALUE_BYTES  # RabbitMQ / NATS bodies


def produce_body(count: int) -> bytes:
    """``POST /v1/topics/{topic}/messages`` with ``count`` keyless 1 KiB messages (round-robin partitions)."""
    return orjson.dumps({"messages": [{"value": VALUE} for _ in range(count)]})


def partition_body(
    count: int, txn_id: str | None = None, *, producer: dict[str, int] | None = None, base_sequence: int | None = None
) -> bytes:
    """``POST /v1/topics/{topic}/partitions/{p}/messages``, optionally inside a mode-2 transaction.

    With ``producer`` and no ``txn_id`` the batch is transactional: it goes into (or begins)
    that producer's transaction.
    """
    body: dict[str, object] = {"messages": [{"value": VALUE} for _ in range(count)]}
    if producer is not None:
        body.update(producer, base_sequence=base_sequence)
        if txn_id is None:
            body["transactional"] = True
    if txn_id is not None:
        body["txn_id"] = txn_id
    return orjson.dumps(body)


def half_body() -> bytes:
    """``POST /v1/half-messages``: one 1 KiB half message."""
    return orjson.dumps({"topic": TOPIC, "producer_group": PRODUCER_GROUP, "value": VALUE})
