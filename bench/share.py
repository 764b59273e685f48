"""``python -m bench.share``: share-group consumption (receive 100 + ACCEPT) against RabbitMQ, in one run.

Both sides drain the same number of the same 1 KiB messages, prefilled before the clock
starts, with 1 and 4 consumer processes:

- halfmq: a broker process (``python -m app``) on SQLite and/or PostgreSQL, a topic of
  four partitions; each consumer process runs the SDK's :class:`~sdk.ShareConsumer`
  (httpx): ``receive(100)`` carrying the ACCEPTs of the batch before (``acknowledge``,
  as Kafka's share consumer sends them with its next fetch), until a receive comes back
  empty; then the last batch's ACCEPTs. Each consumer count uses a share group of its
  own on the same log.
- RabbitMQ (127.0.0.1:5672, guest/guest) through pika's BlockingConnection: a durable
  queue of persistent messages; each consumer process sets ``basic_qos(prefetch_count=100)``
  and acknowledges every message with ``basic_ack`` (manual acks), until the queue is idle.

The rate is messages / (last acknowledgement - start), the start being a moment all
consumer processes wait for. The drains are interleaved (halfmq, then RabbitMQ, per
consumer count) and repeated; the table shows each one's median round and the ratio
halfmq / RabbitMQ.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import multiprocessing
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import payloads, procs
from bench.peers import RABBIT_QUEUE, _rabbit_connection
from bench.scenarios import POSTGRESQL, SQLITE, ScratchDatabase, http_json

TOPIC = "share-bench"
PARTITIONS = 4
BATCH = 100
PREFILL_BATCH = 1000


@dataclass
class Drain:
    system: str
    db: str
    consumers: int
    messages: int
    seconds: float
    error: str | None = None

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0


# -- halfmq -----------------------------------------------------------------------------------


def _refused(results: list[Any]) -> None:
    if not all(r.ok for r in results):
        raise RuntimeError(f"{sum(not r.ok for r in results)} acknowledgements refused")


def _halfmq_consumer(url: str, group: str, start_at: float, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    from sdk import ShareConsumer

    try:
        with ShareConsumer(
            url, group, TOPIC, max_messages=BATCH, lock_ms=120_000, auto_extend=False, on_acknowledged=_refused
        ) as consumer:
            time.sleep(max(0.0, start_at - time.time()))
            count = 0
            while batch := consumer.receive(timeout=0):  # carries the previous batch's ACCEPTs
                consumer.acknowledge(batch)
                count += len(batch)
            _refused(consumer.flush())
            last = time.time()
        out.put({"messages": count, "last": last})
    except Exception as error:  # noqa: BLE001 - reported as the run's error
        out.put({"failure": repr(error)})


def _drain(target: Any, args_of: Any, consumers: int) -> tuple[int, float, str | None]:
    """Run ``consumers`` processes of ``target`` from one start moment; (messages, seconds, error)."""
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    start_at = time.time() + 1.0
    workers = [context.Process(target=target, args=(*args_of(i), start_at, out), daemon=True) for i in range(consumers)]
    for worker in workers:
        worker.start()
    try:
        results = [out.get(timeout=600) for _ in workers]
    except Exception as error:  # noqa: BLE001 - a consumer process died without answering
        results = [{"failure": f"consumer process gave no result: {error!r}"}]
    for worker in workers:
        worker.join(10)
    failures = [r["failure"] for r in results if "failure" in r]
    if failures:
        return 0, 0.0, "; ".join(failures)
    return sum(r["messages"] for r in results), max(r["last"] for r in results) - start_at, None


class HalfmqBroker:
    """A broker process on a scratch database, its topic prefilled with ``messages`` messages.

    Every drain uses a share group of its own, so each reads the whole log again.
    """

    def __init__(self, db: str, messages: int) -> None:
        self.db = db
        self.messages = messages
        self._database = ScratchDatabase(db, "share")
        self._drains = itertools.count()

    def __enter__(self) -> HalfmqBroker:
        url = self._database.__enter__()
        self.broker = procs.broker(url).start()
        http_json("POST", f"{self.broker.url}/v1/topics", {"name": TOPIC, "partitions": PARTITIONS})
        for start in range(0, self.messages, PREFILL_BATCH):
            count = min(PREFILL_BATCH, self.messages - start)
            body = {"messages": [{"value": payloads.VALUE}] * count}
            http_json("POST", f"{self.broker.url}/v1/topics/{TOPIC}/messages", body)
        return self

    def __exit__(self, *exc: object) -> None:
        self.broker.stop()
        self._database.__exit__(*exc)

    def drain(self, consumers: int) -> Drain:
        group = f"bench-{next(self._drains)}"
        count, seconds, error = _drain(_halfmq_consumer, lambda _i: (self.broker.url, group), consumers)
        if error is None and count != self.messages:
            error = f"drained {count} of {self.messages}"
        return Drain("halfmq", self.db, consumers, count, seconds, error)


# -- RabbitMQ ---------------------------------------------------------------------------------


def _connection() -> Any:
    """A pika BlockingConnection to the local RabbitMQ, as bench.peers opens them."""
    return _rabbit_connection()


def _rabbit_consumer(start_at: float, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    try:
        connection = _connection()
        channel = connection.channel()
        channel.basic_qos(prefetch_count=BATCH)
        time.sleep(max(0.0, start_at - time.time()))
        count, last = 0, time.time()
        for method, _properties, _body in channel.consume(RABBIT_QUEUE, auto_ack=False, inactivity_timeout=1.0):
            if method is None:  # idle for a second: the queue is drained
                break
            channel.basic_ack(method.delivery_tag)
            count, last = count + 1, time.time()
        channel.cancel()
        connection.close()
        out.put({"messages": count, "last": last})
    except Exception as error:  # noqa: BLE001 - reported as the run's error
        out.put({"failure": repr(error)})


def _rabbit_prefill(messages: int) -> None:
    import pika

    connection = _connection()
    channel = connection.channel()
    channel.queue_declare(RABBIT_QUEUE, durable=True)
    channel.queue_purge(RABBIT_QUEUE)
    channel.confirm_delivery()  # every message is on the broker before the clock starts
    properties = pika.BasicProperties(delivery_mode=2, content_type="application/octet-stream")
    for _ in range(messages):
        channel.basic_publish("", RABBIT_QUEUE, payloads.PEER_PAYLOAD, properties)
    connection.close()


def rabbitmq(messages: int, consumers: int) -> Drain:
    try:
        _rabbit_prefill(messages)
    except Exception as unreachable:  # noqa: BLE001
        return Drain("RabbitMQ", "-", consumers, 0, 0.0, f"unreachable: {unreachable!r}")
    count, seconds, error = _drain(_rabbit_consumer, lambda _i: (), consumers)
    if error is None and count != messages:
        error = f"drained {count} of {messages}"
    return Drain("RabbitMQ", "-", consumers, count, seconds, error)


def _rabbit_clean_up() -> None:
    try:
        connection = _connection()
        connection.channel().queue_delete(RABBIT_QUEUE)
        connection.close()
    except Exception:  # noqa: BLE001 - best-effort clean-up
        pass


# -- the run ----------------------------------------------------------------------------------


def median_drains(drains: list[Drain]) -> list[Drain]:
    """Per (system, db, consumers), the round with the median rate."""
    grouped: dict[tuple[str, str, int], list[Drain]] = {}
    for drain in drains:
        grouped.setdefault((drain.system, drain.db, drain.consumers), []).append(drain)
    return [sorted(found, key=lambda d: d.rate)[len(found) // 2] for found in grouped.values()]


def render(drains: list[Drain]) -> str:
    peer = {d.consumers: d.rate for d in drains if d.system == "RabbitMQ" and d.error is None}
    lines = [f"{'system':<10}{'db':<12}{'consumers':>10}{'messages':>10}{'seconds':>9}{'msg/s':>10}{'vs RabbitMQ':>13}"]
    for d in sorted(drains, key=lambda d: (d.consumers, d.system != "halfmq", d.db)):
        ratio = f"{d.rate / peer[d.consumers]:.2f}x" if d.system == "halfmq" and peer.get(d.consumers) else ""
        lines.append(
            f"{d.system:<10}{d.db:<12}{d.consumers:>10}{d.messages:>10}{d.seconds:>9.2f}{d.rate:>10,.0f}{ratio:>13}"
            + (f"  {d.error}" if d.error else "")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.share", description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=[SQLITE, POSTGRESQL, "both"], default="both")
    parser.add_argument("--messages", type=int, default=20_000, help="messages each drain takes (default 20000)")
    parser.add_argument("--consumers", default="1,4", help="consumer process counts (default 1,4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each drain; the median counts (default 3)")
    parser.add_argument("--output", type=Path, default=None, help="write the results as JSON")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.consumers.split(",")]
    dbs = [SQLITE, POSTGRESQL] if args.db == "both" else [args.db]
    started = time.time()
    drains: list[Drain] = []
    with contextlib.ExitStack() as stack:
        brokers = [stack.enter_context(HalfmqBroker(db, args.messages)) for db in dbs]
        # Interleaved: each halfmq drain runs seconds from RabbitMQ's, on a machine others share.
        for round_number in range(1, args.rounds + 1):
            for consumers in counts:
                for broker in brokers:
                    drains.append(broker.drain(consumers))
                drains.append(rabbitmq(args.messages, consumers))
                for drain in drains[-len(brokers) - 1 :]:
                    print(f"  round {round_number}: {drain.system} {drain.db} x{consumers}: "
                          f"{drain.rate:,.0f} msg/s {drain.error or ''}", flush=True)
    _rabbit_clean_up()
    medians = median_drains(drains)
    print()
    print(render(medians))
    with open("/proc/loadavg") as loadavg:
        print(f"\n(median of {args.rounds} rounds; total {time.time() - started:.0f}s; "
              f"load average now {loadavg.read().split()[0]})")
    if args.output is not None:
        args.output.write_text(json.dumps({
            "command": "python -m bench.share " + " ".join(argv if argv is not None else sys.argv[1:]),
            "medians": [asdict(d) | {"rate": round(d.rate, 1)} for d in medians],
            "rounds": [asdict(d) | {"rate": round(d.rate, 1)} for d in drains],
        }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
