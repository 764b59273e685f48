"""Chaos over the Kafka protocol, in the style of Jepsen's Kafka workload: confluent-kafka's transactional
consume-transform-produce while the broker is SIGKILLed and restarted on the same database again and again.

A seeding producer (idempotent) writes numbered values into ``in``; a transformer reads them
``read_committed`` and, per batch, in one transaction writes each value to ``out`` (tagged with
the attempt) and commits the input offsets; on any error it aborts if it can, and starts over
with new instances (the new producer fences the old). The history is then checked:

- lost writes: every value whose produce was acknowledged is in ``in``, and in ``out``;
- duplicates: no value is in ``out`` (read_committed) twice;
- aborted reads: no record of an attempt the transformer saw abort is read_committed;
- torn transactions: a committed attempt is read whole, every record of it, or not at all;
- poll skips: within one consumer instance, per partition, offsets come one after the other
  (``in`` holds no transactions, so every offset is a record) or go back (a re-read), never jump.

The short run (2 kills, 40 values) is part of the suite; the long one (12 kills) runs with ``-m slow``.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.reliability.chaos import Supervisor
from tests.support.broker_process import BrokerProcess, free_port, wait_for

pytestmark = pytest.mark.e2e

IN, OUT, PARTITIONS, GROUP, TXN_ID = "in", "out", 2, "transformer", "transformer-1"
SETTINGS: dict[str, object] = {
    "check_interval_seconds": 0.5,  # the transaction-timeout job: a killed attempt's transaction ends soon
    "lease_seconds": 2,
    "group_min_session_timeout_ms": 1000,
}
# log_level 2: the connection failures of every kill are expected, not worth a line each.
CLIENT = {"socket.timeout.ms": 5000, "reconnect.backoff.max.ms": 500, "topic.metadata.refresh.interval.ms": 1000,
          "log_level": 2}


@dataclass
class History:
    acked: set[int] = field(default_factory=set)  # seeded values whose produce was acknowledged
    attempts: dict[str, str] = field(default_factory=dict)  # attempt -> committed / aborted / unknown
    sizes: dict[str, int] = field(default_factory=dict)  # attempt -> records it produced
    skips: list[str] = field(default_factory=list)
    instances: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def seed(bootstrap: str, values: int, history: History, stop: threading.Event) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "message.timeout.ms": 60000,
                         "linger.ms": 20, **CLIENT})

    def report(error: Any, message: Any) -> None:
        if error is None:
            with history.lock:
                history.acked.add(int(message.value()))

    for value in range(values):
        producer.produce(IN, value=str(value), partition=value % PARTITIONS, on_delivery=report)
        producer.poll(0)
        time.sleep(0.05)
    while len(producer) and not stop.is_set():
        producer.flush(1)


def transform(bootstrap: str, history: History, stop: threading.Event) -> None:
    """Consume-transform-produce until ``stop``; every failure ends the instances and starts new ones."""
    while not stop.is_set():
        history.instances += 1
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID, "transaction.timeout.ms": 10000,
                             "message.timeout.ms": 10000, **CLIENT})
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "isolation.level": "read_committed",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest", **CLIENT})
        attempt = None
        try:
            producer.init_transactions(15)
            consumer.assign([TopicPartition(IN, p) for p in range(PARTITIONS)])
            last: dict[int, int] = {}
            while not stop.is_set():
                batch = [m for m in consumer.consume(10, timeout=0.5) if m.error() is None]
                if not batch:
                    continue
                for message in batch:  # poll skips: within this instance, offsets only follow or go back
                    previous = last.get(message.partition())
                    if previous is not None and message.offset() > previous + 1:
                        history.skips.append(f"instance {history.instances}: {IN}/{message.partition()} "
                                             f"{previous} -> {message.offset()}")
                    last[message.partition()] = message.offset()
                attempt = uuid.uuid4().hex[:12]
                history.attempts[attempt], history.sizes[attempt] = "unknown", len(batch)
                producer.begin_transaction()
                for message in batch:
                    producer.produce(OUT, value=message.value(), partition=message.partition(),
                                     headers=[("attempt", attempt.encode())])
                positions = [TopicPartition(IN, m.partition(), m.offset() + 1) for m in batch]
                producer.send_offsets_to_transaction(_latest(positions), consumer.consumer_group_metadata(), 15)
                producer.commit_transaction(15)
                history.attempts[attempt] = "committed"
                attempt = None
        except KafkaException:
            if attempt is not None:
                try:
                    producer.abort_transaction(10)
                    history.attempts[attempt] = "aborted"
                except KafkaException:
                    pass  # its outcome stays unknown: the broker decides it (timeout, or the next instance's fence)
        finally:
            consumer.close()


def _latest(positions: list[TopicPartition]) -> list[TopicPartition]:
    found: dict[int, int] = {}
    for tp in positions:
        found[tp.partition] = max(found.get(tp.partition, 0), tp.offset)
    return [TopicPartition(IN, p, o) for p, o in found.items()]


def read(bootstrap: str, topic: str, isolation: str, want: int) -> list[Any]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"checker-{uuid.uuid4().hex[:6]}",
                       "isolation.level": isolation, "enable.auto.commit": False, **CLIENT})
    reader.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[Any] = []
    idle_until = time.monotonic() + 3
    deadline = time.monotonic() + 60
    while time.monotonic() < min(deadline, idle_until) or (len(got) < want and time.monotonic() < deadline):
        message = reader.poll(0.2)
        if message is not None and message.error() is None:
            got.append(message)
            idle_until = time.monotonic() + 2
    reader.close()
    return got


def run(broker: BrokerProcess, kills: int, values: int) -> None:
    for name in (IN, OUT):
        assert httpx.post(f"{broker.url}/v1/topics", json={"name": name, "partitions": PARTITIONS}).status_code == 201
    bootstrap, history, stop = broker.kafka_bootstrap, History(), threading.Event()
    supervisor = Supervisor([broker])
    threads = [threading.Thread(target=seed, args=(bootstrap, values, history, stop)),
               threading.Thread(target=transform, args=(bootstrap, history, stop))]
    for thread in threads:
        thread.start()
    chance = random.Random(7)
    try:
        for _ in range(kills):
            time.sleep(chance.uniform(1.0, 2.5))
            supervisor.kill_and_restart(0)
        threads[0].join(120)

        def transformed_everything() -> bool:
            offsets = httpx.get(f"{broker.url}/v1/groups/{GROUP}/offsets", timeout=10).json()["offsets"]
            ends = {p: httpx.get(f"{broker.url}/v1/topics/{IN}/partitions/{p}/messages", timeout=10,
                                 params={"offset": 0, "max_messages": 1}).json()["high_watermark"] for p in range(PARTITIONS)}
            return {o["partition"]: o["offset"] for o in offsets} == ends

        wait_for(transformed_everything, "the transformer to commit every input offset", timeout=90)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    check(bootstrap, history, values)
    print(f"Kafka chaos: {supervisor.kills} kills, {len(history.acked)}/{values} values acked, "
          f"{history.instances} transformer instances, attempts {Counter(history.attempts.values())}")


def check(bootstrap: str, history: History, values: int) -> None:
    seeded = Counter(int(m.value()) for m in read(bootstrap, IN, "read_uncommitted", len(history.acked)))
    committed = read(bootstrap, OUT, "read_committed", len(seeded))
    out = Counter(int(m.value()) for m in committed)
    by_attempt: dict[str, int] = defaultdict(int)
    for message in committed:
        by_attempt[dict(message.headers() or [])["attempt"].decode()] += 1
    problems = []
    problems += [f"lost write: acked {v} is not in {IN}" for v in sorted(history.acked - set(seeded))]
    problems += [f"duplicate in {IN}: {v} x{n}" for v, n in seeded.items() if n > 1]
    problems += [f"lost: {v} is in {IN} but not in {OUT}" for v in sorted(set(seeded) - set(out))]
    problems += [f"duplicate in {OUT}: {v} x{n}" for v, n in out.items() if n > 1]
    problems += [f"aborted read: attempt {a}" for a in by_attempt if history.attempts.get(a) == "aborted"]
    problems += [f"torn transaction: attempt {a} has {n} of {history.sizes[a]} records"
                 for a, n in by_attempt.items() if n != history.sizes.get(a)]
    problems += [f"committed attempt {a} is not read" for a, s in history.attempts.items()
                 if s == "committed" and a not in by_attempt]
    problems += [f"poll skip: {s}" for s in history.skips]
    assert not problems, "\n".join(problems)
    assert len(history.acked) == values, "the seeding producer gave up on values (its timeout outlasts every kill)"


@pytest.fixture()
def kafka_broker(rel_database_url: str, start_broker: Callable[..., BrokerProcess]) -> BrokerProcess:
    return start_broker(rel_database_url, kafka_port=free_port(), **SETTINGS)


@pytest.mark.timeout(300)
def test_kafka_chaos_short(kafka_broker: BrokerProcess) -> None:
    run(kafka_broker, kills=2, values=40)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_kafka_chaos_long(kafka_broker: BrokerProcess) -> None:
    run(kafka_broker, kills=12, values=400)
