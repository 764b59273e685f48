"""The peers our users would otherwise reach for, on this machine, with the same 1 KiB messages.

- RabbitMQ (127.0.0.1:5672, guest/guest) through pika's BlockingConnection: a
  durable queue, persistent messages, either publisher confirms (``confirm_delivery``:
  every ``basic_publish`` waits for its ack) or AMQP transactions per message
  (``tx_select``; ``basic_publish`` + ``tx_commit`` for each message). pika is
  synchronous, so concurrency comes from client processes, one connection each.
- NATS JetStream (127.0.0.1:4222) through nats-py: a file-backed stream; every
  ``js.publish`` awaits its ack; concurrency is that many publishers awaiting at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import time
from dataclasses import dataclass
from typing import Any

from bench.loadgen import percentile
from bench.payloads import PEER_PAYLOAD

RABBIT_QUEUE = "halfmq-bench"
NATS_STREAM = "HALFMQBENCH"
NATS_SUBJECT = "halfmqbench.messages"


@dataclass
class PeerResult:
    name: str
    clients: int
    messages: int
    seconds: float
    p50_ms: float
    p99_ms: float
    error: str | None = None

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0


def _rabbit_connection() -> Any:  # a pika BlockingConnection; pika has no type information
    import pika

    params = pika.ConnectionParameters(
        "127.0.0.1", 5672, credentials=pika.PlainCredentials("guest", "guest"), heartbeat=0
    )
    return pika.BlockingConnection(params)


def _rabbit_worker(mode: str, start_at: float, duration: float, out: multiprocessing.Queue[Any]) -> None:
    import pika

    try:
        connection = _rabbit_connection()
        channel = connection.channel()
        channel.queue_declare(RABBIT_QUEUE, durable=True)
        if mode == "confirm":
            channel.confirm_delivery()
        else:
            channel.tx_select()
        properties = pika.BasicProperties(delivery_mode=2, content_type="application/octet-stream")
        time.sleep(max(0.0, start_at - time.time()))
        latencies: list[float] = []
        began = time.monotonic()
        deadline = began + duration
        while time.monotonic() < deadline:
            sent = time.perf_counter()
            channel.basic_publish("", RABBIT_QUEUE, PEER_PAYLOAD, properties, mandatory=False)
            if mode == "tx":
                channel.tx_commit()
            latencies.append(time.perf_counter() - sent)
        out.put({"messages": len(latencies), "seconds": time.monotonic() - began, "latencies": latencies})
        connection.close()
    except Exception as error:  # noqa: BLE001
        out.put({"failure": repr(error)})


def rabbitmq(mode: str, clients: int, duration: float) -> PeerResult:
    name = "RabbitMQ publisher confirms" if mode == "confirm" else "RabbitMQ AMQP tx per message"
    try:
        connection = _rabbit_connection()
        channel = connection.channel()
        channel.queue_declare(RABBIT_QUEUE, durable=True)
        channel.queue_purge(RABBIT_QUEUE)
        connection.close()
    except Exception as error:  # noqa: BLE001
        return PeerResult(name, clients, 0, 0.0, 0.0, 0.0, f"unreachable: {error!r}")
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    start_at = time.time() + 1.0
    workers = [context.Process(target=_rabbit_worker, args=(mode, start_at, duration, out), daemon=True) for _ in range(clients)]
    for worker in workers:
        worker.start()
    try:
        results = [out.get(timeout=duration + 60) for _ in workers]
    except Exception as error:  # noqa: BLE001 - a client process died without answering
        results = [{"failure": f"client process gave no result: {error!r}"}]
    for worker in workers:
        worker.join(10)
    try:
        connection = _rabbit_connection()
        connection.channel().queue_delete(RABBIT_QUEUE)
        connection.close()
    except Exception:  # noqa: BLE001 - best-effort clean-up
        pass
    failures = [r["failure"] for r in results if "failure" in r]
    if failures:
        return PeerResult(name, clients, 0, 0.0, 0.0, 0.0, "; ".join(failures))
    latencies = [lat for r in results for lat in r["latencies"]]
    return PeerResult(
        name,
        clients,
        sum(r["messages"] for r in results),
        max(r["seconds"] for r in results),
        percentile(latencies, 50) * 1000,
        percentile(latencies, 99) * 1000,
    )


async def _nats(concurrency: int, duration: float) -> PeerResult:
    import nats
    from nats.js.api import StorageType, StreamConfig

    name = "NATS JetStream publish, await ack"
    nc = await nats.connect("nats://127.0.0.1:4222", connect_timeout=5, max_reconnect_attempts=0)
    js = nc.jetstream()
    try:
        with contextlib.suppress(Exception):  # not there yet
            await js.delete_stream(NATS_STREAM)
        await js.add_stream(StreamConfig(name=NATS_STREAM, subjects=[NATS_SUBJECT], storage=StorageType.FILE))
        latencies: list[float] = []
        began = time.monotonic()
        deadline = began + duration

        async def publisher() -> None:
            while time.monotonic() < deadline:
                sent = time.perf_counter()
                await js.publish(NATS_SUBJECT, PEER_PAYLOAD, timeout=10)
                latencies.append(time.perf_counter() - sent)

        await asyncio.gather(*(publisher() for _ in range(concurrency)))
        seconds = time.monotonic() - began
        return PeerResult(
            name, concurrency, len(latencies), seconds, percentile(latencies, 50) * 1000, percentile(latencies, 99) * 1000
        )
    finally:
        try:
            await js.delete_stream(NATS_STREAM)
        finally:
            await nc.close()


def nats_jetstream(concurrency: int, duration: float) -> PeerResult:
    try:
        return asyncio.run(_nats(concurrency, duration))
    except Exception as error:  # noqa: BLE001
        return PeerResult("NATS JetStream publish, await ack", concurrency, 0, 0.0, 0.0, 0.0, f"failed: {error!r}")
