"""RocketMQ 5 protocol figures beside their REST equivalents, on one broker process, in one run.

Three operations, each measured twice with the same number of client processes, each
process one synchronous client doing one operation after another for the same time:

- ``send``: the official RocketMQ Python client's ``Producer.send`` of one 1 KiB message,
  against ``POST /v1/topics/{t}/messages`` of one message (httpx, keep-alive);
- ``txn``: ``begin_transaction`` + ``send`` + ``commit`` (a half message and its commit),
  against ``POST /v1/half-messages`` + ``POST /v1/half-messages/{id}/commit``;
- ``receive``: a SimpleConsumer's ``receive(32)`` and one ``ack`` per message (the client's
  API acks one by one), against ``POST /v1/share-groups/{g}/receive`` of 32 carrying the
  previous batch's ACCEPTs. The topic is filled beforehand; each side drains its own group.

``python -m bench`` adds these rows for each database (its broker runs the gRPC listener);
``python -m bench.rocketmq [--db sqlite|postgresql] [--duration 10] [--clients 4]`` runs
only them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench import payloads
from bench.scenarios import Row, ScratchDatabase, http_json, log

TOPIC = "rmq-bench"
PARTITIONS = 4
BODY = payloads.VALUE.encode()
RECEIVE_BATCH = 32
OPERATIONS = ("send", "txn", "receive")


# -- one client process ------------------------------------------------------------------------


def _rocketmq_client(endpoint: str, operation: str, group: str) -> Callable[[], int]:
    # The client rewrites the logging configuration of the process that imports it and logs under ~/logs.
    os.environ["HOME"] = tempfile.mkdtemp(prefix="rmq-bench-home-")
    from rocketmq import (
        ClientConfiguration,
        Credentials,
        FilterExpression,
        Message,
        Producer,
        SimpleConsumer,
        TransactionChecker,
        TransactionResolution,
    )

    class Commit(TransactionChecker):  # type: ignore[misc]
        def check(self, message: Any) -> Any:
            return TransactionResolution.COMMIT

    config = ClientConfiguration(endpoint, Credentials())
    if operation == "receive":
        consumer = SimpleConsumer(config, group, {TOPIC: FilterExpression("*")}, await_duration=1)
        consumer.startup()

        def receive() -> int:
            received = consumer.receive(RECEIVE_BATCH, 30)
            for message in received:
                consumer.ack(message)
            return len(received)

        return receive
    producer = Producer(config, (TOPIC,), Commit() if operation == "txn" else None)
    producer.startup()

    def message() -> Any:
        built = Message()
        built.topic, built.body = TOPIC, BODY
        return built

    if operation == "send":
        return lambda: (producer.send(message()), 1)[1]

    def transaction() -> int:
        txn = producer.begin_transaction()
        producer.send(message(), txn)
        txn.commit()
        return 1

    return transaction


def _rest_client(url: str, operation: str, group: str) -> Callable[[], int]:
    import httpx

    client = httpx.Client(base_url=url, timeout=30)
    one = {"messages": [{"value": payloads.VALUE}]}
    if operation == "send":
        return lambda: (client.post(f"/v1/topics/{TOPIC}/messages", json=one).raise_for_status(), 1)[1]
    if operation == "txn":

        def transaction() -> int:
            half = {"topic": TOPIC, "producer_group": payloads.PRODUCER_GROUP, "value": payloads.VALUE}
            prepared = client.post("/v1/half-messages", json=half).raise_for_status().json()
            client.post(f"/v1/half-messages/{prepared['message_id']}/commit").raise_for_status()
            return 1

        return transaction
    pending: list[dict[str, str]] = []

    def receive() -> int:
        body = {"topic": TOPIC, "max_messages": RECEIVE_BATCH, "lock_ms": 30_000, "acks": list(pending)}
        answer = client.post(f"/v1/share-groups/{group}/receive", json=body).raise_for_status().json()
        pending[:] = [{"receipt": m["receipt"], "type": "ACCEPT"} for m in answer["messages"]]
        return len(answer["messages"])

    return receive


StepFactory = Callable[[str, str, str], Callable[[], int]]
"""``(address, operation, group)`` -> one client's step: it does one operation and returns how many messages it moved."""


def _client_process(
    factory: StepFactory, address: str, operation: str, group: str, start_at: float, seconds: float, answers: Any
) -> None:
    try:
        step = factory(address, operation, group)
        while time.time() < start_at:
            time.sleep(0.005)
        done, latencies, deadline = 0, [], start_at + seconds
        while time.time() < deadline:
            began = time.perf_counter()
            count = step()
            if count == 0:
                break  # a reading step found nothing left: drained
            latencies.append(time.perf_counter() - began)
            done += count
        answers.put({"messages": done, "seconds": min(time.time(), deadline) - start_at, "latencies": latencies})
    except Exception as error:  # noqa: BLE001 - reported in the row
        answers.put({"error": f"{type(error).__name__}: {error}"})
    finally:
        answers.close()
        answers.join_thread()  # the answer is out before the process ends
        sys.stdout.flush()
        os._exit(0)  # the RocketMQ client's threads would keep the process


def run_clients(protocol: str, address: str, operation: str, clients: int, seconds: float, group: str) -> dict[str, Any]:
    return run_steps(_rocketmq_client if protocol == "rocketmq" else _rest_client, address, operation, clients, seconds, group)


def run_steps(
    factory: StepFactory, address: str, operation: str, clients: int, seconds: float, group: str
) -> dict[str, Any]:
    """``clients`` processes, each repeating ``factory``'s step for ``seconds`` from one common start; rate and latency.

    ``factory`` must be a module-level function (the processes are spawned)."""
    context = multiprocessing.get_context("spawn")
    answers = context.Queue()
    start_at = time.time() + 8.0  # every client started (the RocketMQ client takes a few seconds) before the clock
    processes = [
        context.Process(target=_client_process, args=(factory, address, operation, group, start_at, seconds, answers))
        for _ in range(clients)
    ]
    for process in processes:
        process.start()
    results = [answers.get(timeout=start_at - time.time() + seconds + 60) for _ in processes]
    for process in processes:
        process.join(10)
    errors = [r["error"] for r in results if "error" in r]
    finished = [r for r in results if "error" not in r]
    messages = sum(r["messages"] for r in finished)
    elapsed = max((r["seconds"] for r in finished), default=seconds)
    latencies = sorted(latency for r in finished for latency in r["latencies"])

    def percentile(q: float) -> float | None:
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000, 2) if latencies else None

    return {
        "rate": messages / elapsed if elapsed > 0 else 0.0,
        "messages": messages,
        "p50_ms": percentile(0.5),
        "p99_ms": percentile(0.99),
        "errors": errors,
    }


# -- rows beside a running broker ----------------------------------------------------------------


def measure(db: str, broker_url: str, grpc_endpoint: str, seconds: float, clients: int) -> list[Row]:
    """The three operations over RocketMQ and over REST, against one running broker."""
    http_json("POST", f"{broker_url}/v1/topics", {"name": TOPIC, "partitions": PARTITIONS})
    rows: list[Row] = []
    for operation in OPERATIONS:
        if operation == "receive":
            _fill(broker_url, 40_000)
        for protocol, address in (("rocketmq", grpc_endpoint), ("rest", broker_url)):
            result = run_clients(protocol, address, operation, clients, seconds, group=f"bench-{protocol}")
            label = f"{'RocketMQ client' if protocol == 'rocketmq' else 'REST'} {operation} (x{clients})"
            unit = "msgs/s" if operation != "txn" else "txn/s"
            loadgen = "rocketmq-python-client 5.1.2" if protocol == "rocketmq" else "httpx"
            rows.append(client_row(db, f"{protocol}-{operation}", label, unit, result["rate"], result, clients, loadgen))
            log(f"  {label}: {result['rate']:,.0f} {unit} (p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms)")
    return rows


def client_row(
    db: str, scenario: str, label: str, unit: str, rate: float, result: dict[str, Any], clients: int, loadgen: str
) -> Row:
    """A protocol bench's row: ``rate`` in ``unit``, beside the messages/s, latencies and errors of ``result``."""
    return Row(
        "halfmq", db, scenario, label, unit, round(rate, 1),
        messages_per_s=round(result["rate"], 1), p50_ms=result["p50_ms"], p99_ms=result["p99_ms"],
        concurrency=clients, loadgen=f"{loadgen}, one process each",
        errors=len(result["errors"]), extra={"errors": result["errors"][:3]} if result["errors"] else {},
    )


def _fill(url: str, count: int) -> None:
    batch = {"messages": [{"value": payloads.VALUE} for _ in range(1000)]}
    for _ in range(count // 1000):
        http_json("POST", f"{url}/v1/topics/{TOPIC}/messages", batch)


Measure = Callable[[str, str, str, float, int], list[Row]]


def protocol_main(
    argv: list[str] | None, protocol: str, port_setting: str, default_clients: int, measure: Measure, doc: str
) -> int:
    """``python -m bench.<protocol>``: one broker with the protocol's listener on a free port, its rows as JSON.

    ``port_setting`` is the broker setting of the listener's port (``grpc_port``, ``kafka_port``);
    ``measure(db, broker_url, address, seconds, clients)`` makes the rows.
    """
    from bench import procs

    parser = argparse.ArgumentParser(prog=f"python -m bench.{protocol}", description=doc.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=default_clients)
    parser.add_argument("--output", default=None, help="write the rows as JSON")
    args = parser.parse_args(argv)
    with ScratchDatabase(args.db, protocol) as url:
        port = procs.free_port()
        broker = procs.broker(url, **{port_setting: port}).start()
        try:
            rows = measure(args.db, broker.url, f"127.0.0.1:{port}", args.duration, args.clients)
        finally:
            broker.stop()
    table = [{k: v for k, v in vars(r).items() if v not in (None, {}, "")} for r in rows]
    for row in table:
        print(json.dumps(row))
    if args.output:
        with open(args.output, "w") as out:
            json.dump(table, out, indent=2)
    return 0


def main(argv: list[str] | None = None) -> int:
    return protocol_main(argv, "rocketmq", "grpc_port", 4, measure, __doc__ or "")


if __name__ == "__main__":
    sys.exit(main())
