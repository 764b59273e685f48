"""Kafka-protocol figures beside their REST equivalents, on one broker process, in one run.

Each row is a number of client processes, each one client repeating one step for the same
time (``bench.rocketmq.run_steps``); what a step is:

- ``produce``: confluent-kafka (librdkafka) producing 1,000 messages of 1 KiB to one
  partition each, then ``flush()``: the messages counted are the delivered ones. Twice:
  librdkafka's defaults (``linger.ms`` 5, ``acks=all``) and ``linger.ms=0``. The REST twin:
  ``POST /v1/topics/{t}/partitions/{p}/messages`` of 100 messages (httpx, keep-alive);
- ``txn``: a transactional producer's ``begin_transaction``, 10 messages, ``commit_transaction``
  (one transaction a step; txn/s), against REST mode 2: ``POST /v1/transactions``, 10 messages
  with its ``txn_id``, ``POST /v1/transactions/{id}/commit``;
- ``consume``: a consumer assigned to a partition of a topic filled beforehand, polling
  (``consume(500)``), against ``GET /v1/topics/{t}/partitions/{p}/messages`` of 500 from the
  previous ``next_offset``; each client process reads its own partition.

``python -m bench --only kafka`` runs these rows for each database (its broker runs the Kafka
listener); ``python -m bench.kafka [--db sqlite|postgresql] [--duration 10] [--clients 2]`` runs only them.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable
from typing import Any

from bench import payloads
from bench.rocketmq import client_row, protocol_main, run_steps
from bench.scenarios import Row, http_json, log

TOPIC = "kafka-bench"
FILLED = "kafka-bench-filled"
PARTITIONS = 4
BODY = payloads.VALUE.encode()
PRODUCE_STEP = 1000
REST_PRODUCE_STEP = 100
TXN_MESSAGES = 10
READ_STEP = 500
OPERATIONS = ("produce", "produce-linger0", "txn", "consume")


def _partition() -> int:
    """Each client process its own partition (by pid), so consumers do not read the same records."""
    return os.getpid() % PARTITIONS


def _kafka_client(bootstrap: str, operation: str, group: str) -> Callable[[], int]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    partition = _partition()
    if operation == "consume":
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        _, high = consumer.get_watermark_offsets(TopicPartition(FILLED, partition), timeout=30)
        read = [0]

        def consume() -> int:
            if not consumer.assignment():
                # Assigned when the clock runs, not before: librdkafka fetches ahead in the background,
                # and records fetched while the clients wait for the start would be counted for free.
                consumer.assign([TopicPartition(FILLED, partition, 0)])
            if read[0] >= high:
                return 0  # drained: the clock stops here, not after a poll that waits for more
            got = sum(1 for m in consumer.consume(READ_STEP, timeout=5) if m.error() is None)
            read[0] += got
            return got

        return consume
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap}
    if operation == "produce-linger0":
        conf["linger.ms"] = 0
    if operation == "txn":
        conf["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(conf)
    if operation == "txn":
        producer.init_transactions(30)

        def transaction() -> int:
            producer.begin_transaction()
            for _ in range(TXN_MESSAGES):
                producer.produce(TOPIC, value=BODY, partition=partition)
            producer.commit_transaction(30)
            return TXN_MESSAGES

        return transaction
    failed: list[Any] = []

    def delivered(error: Any, _: Any) -> None:
        if error is not None:
            failed.append(error)

    def produce() -> int:
        for _ in range(PRODUCE_STEP):
            producer.produce(TOPIC, value=BODY, partition=partition, on_delivery=delivered)
            producer.poll(0)
        producer.flush(30)
        if failed:
            raise RuntimeError(f"delivery failed: {failed[0]}")
        return PRODUCE_STEP

    return produce


def _rest_client(url: str, operation: str, group: str) -> Callable[[], int]:
    import httpx

    client = httpx.Client(base_url=url, timeout=30)
    partition = _partition()
    if operation == "consume":
        position = [0]

        def read() -> int:
            page = client.get(f"/v1/topics/{FILLED}/partitions/{partition}/messages",
                              params={"offset": position[0], "max_messages": READ_STEP}).raise_for_status().json()
            position[0] = page["next_offset"]
            return len(page["messages"])

        return read
    path = f"/v1/topics/{TOPIC}/partitions/{partition}/messages"
    if operation == "txn":
        body = {"messages": [{"value": payloads.VALUE}] * TXN_MESSAGES}

        def transaction() -> int:
            txn_id = client.post("/v1/transactions", json={}).raise_for_status().json()["txn_id"]
            client.post(path, json={**body, "txn_id": txn_id}).raise_for_status()
            client.post(f"/v1/transactions/{txn_id}/commit").raise_for_status()
            return TXN_MESSAGES

        return transaction
    batch = {"messages": [{"value": payloads.VALUE}] * REST_PRODUCE_STEP}
    return lambda: (client.post(path, json=batch).raise_for_status(), REST_PRODUCE_STEP)[1]


_LABELS = {
    "produce": "produce 1 KiB, librdkafka defaults (linger.ms 5)",
    "produce-linger0": "produce 1 KiB, linger.ms=0",
    "txn": f"transactions of {TXN_MESSAGES} x 1 KiB",
    "consume": f"consume ({READ_STEP} a poll)",
}
_REST_LABELS = {
    "produce": f"REST produce 1 KiB ({REST_PRODUCE_STEP} a request)",
    "txn": f"REST mode-2 transactions of {TXN_MESSAGES} x 1 KiB",
    "consume": f"REST fetch ({READ_STEP} a request)",
}


def measure(db: str, broker_url: str, bootstrap: str, seconds: float, clients: int) -> list[Row]:
    """The operations over the Kafka protocol and their REST twins, against one running broker."""
    for name in (TOPIC, FILLED):
        http_json("POST", f"{broker_url}/v1/topics", {"name": name, "partitions": PARTITIONS})
    rows: list[Row] = []
    for operation in OPERATIONS:
        if operation == "consume":
            _fill(broker_url, 25_000)
        sides: list[tuple[str, Any, str, str]] = [("kafka", _kafka_client, bootstrap, _LABELS[operation])]
        if operation in _REST_LABELS:
            sides.append(("rest", _rest_client, broker_url, _REST_LABELS[operation]))
        for protocol, factory, address, name in sides:
            result = run_steps(factory, address, operation, clients, seconds, group=f"bench-{protocol}-{operation}")
            label = f"{'Kafka' if protocol == 'kafka' else ''} {name} (x{clients})".strip()
            unit = "txn/s" if operation == "txn" else "msgs/s"
            rate = result["rate"] / TXN_MESSAGES if operation == "txn" else result["rate"]
            loadgen = "confluent-kafka (librdkafka)" if protocol == "kafka" else "httpx"
            rows.append(client_row(db, f"{protocol}-{operation}", label, unit, rate, result, clients, loadgen))
            log(f"  {label}: {rate:,.0f} {unit} (p50 {result['p50_ms']} ms a step, p99 {result['p99_ms']} ms)")
    return rows


def _fill(url: str, per_partition: int) -> None:
    batch = {"messages": [{"value": payloads.VALUE} for _ in range(1000)]}
    for partition in range(PARTITIONS):
        for _ in range(per_partition // 1000):
            http_json("POST", f"{url}/v1/topics/{FILLED}/partitions/{partition}/messages", batch)


def main(argv: list[str] | None = None) -> int:
    return protocol_main(argv, "kafka", "kafka_port", 2, measure, __doc__ or "")


if __name__ == "__main__":
    sys.exit(main())
