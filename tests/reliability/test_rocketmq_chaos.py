"""Chaos over the RocketMQ protocol: the official client's transactional producer and SimpleConsumer
against a broker SIGKILLed and restarted again and again.

Every committed message is consumed at least once and acked exactly once; no rolled-back or
undecided message (one the producer never ended: its back-check rolls it back) is ever
delivered; nothing committed is lost — everything that reached the topic reaches the group.
The short run (2 kills, 21 transactions) is part of the suite; the long one (20 kills) runs with ``-m slow``.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.rocketmq_fixtures import RocketMQClient, create_topic
from tests.support.broker_process import BrokerProcess, free_port

pytestmark = pytest.mark.e2e

SETTINGS: dict[str, object] = {
    "check_interval_seconds": 0.5,
    "transaction_timeout_seconds": 1,
    "check_max": 1000,
    "lease_seconds": 2,
    "poll_check_lease_seconds": 2,
    "grpc_check_poll_seconds": 0.3,
    "share_min_lock_ms": 100,
    "share_max_deliveries": 1000,
}
TOPIC = "rmq-chaos"


def _run(broker: BrokerProcess, home: Path, kills: int, transactions: int) -> None:
    create_topic(broker, TOPIC, partitions=2)
    endpoint = f"127.0.0.1:{broker.settings['grpc_port']}"
    producer = RocketMQClient(endpoint, [TOPIC], home / "producer")
    consumer = RocketMQClient(endpoint, [TOPIC], home / "consumer")
    results: dict[str, Any] = {}
    try:
        produce = threading.Thread(
            target=lambda: results.update(producer.call("transactions", topic=TOPIC, count=transactions, prefix="x"))
        )
        consume = threading.Thread(
            target=lambda: results.update(
                first=consumer.call(
                    "drain", group="chaos", topic=TOPIC, min_s=2 * kills + 2, idle_s=2, deadline_s=120
                )
            )
        )
        started = time.monotonic()
        produce.start()
        consume.start()
        chance = random.Random(11)
        for _ in range(kills):
            time.sleep(chance.uniform(1.0, 2.0))
            broker.kill()
            broker.start(timeout=60)
        produce.join(180)
        consume.join(180)
        phases = {"produced and first drain": round(time.monotonic() - started, 1)}
        # The Python client 5.1.2 rebuilds its Telemetry stream only when its settings sync (every
        # 5 minutes) fails, so after a broker restart no back-check reaches it for minutes: the
        # application restarts its producer, and the new one answers the checks left.
        producer.close()
        producer = RocketMQClient(endpoint, [TOPIC], home / "producer-again")
        _wait_until_no_half_is_prepared(broker)
        phases["resolved"] = round(time.monotonic() - started, 1)
        # Longer than a lock (5 s): a delivery whose answer a kill cut off comes back once its lock runs out.
        last = consumer.call("drain", group="chaos", topic=TOPIC, min_s=7, idle_s=3, deadline_s=60)
        phases["drained"] = round(time.monotonic() - started, 1)
        print(f"RocketMQ chaos: {kills} kills, {transactions} transactions, seconds {phases}")
    finally:
        producer.close()
        consumer.close()
    _verify(broker, results["transactions"], results["first"]["seen"] + last["seen"])


def _wait_until_no_half_is_prepared(broker: BrokerProcess, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    params = {"producer_group": f"rmq.{TOPIC}", "state": "PREPARED"}
    while httpx.get(f"{broker.url}/v1/half-messages", params=params).json()["half_messages"]:
        assert time.monotonic() < deadline, "half messages left unresolved after the back-checks"
        time.sleep(0.3)


def _verify(broker: BrokerProcess, transactions: list[dict[str, Any]], seen: list[dict[str, Any]]) -> None:
    kinds = {t["body"]: t["kind"] for t in transactions}
    delivered = {s["body"] for s in seen}
    wrong = sorted(b for b in delivered if kinds.get(b) != "c")
    assert not wrong, f"delivered though rolled back or undecided: {wrong[:10]}"
    committed = {t["body"] for t in transactions if t["kind"] == "c" and t["ok"]}
    assert committed <= delivered, f"committed but never consumed: {sorted(committed - delivered)[:10]}"
    acks = Counter(s["message_id"] for s in seen if s["acked"])
    assert all(n == 1 for n in acks.values()), f"acked more than once: {[m for m, n in acks.items() if n > 1][:10]}"
    in_log = set()
    for partition in range(2):
        page = httpx.get(f"{broker.url}/v1/topics/{TOPIC}/partitions/{partition}/messages", params={"offset": 0}).json()
        in_log |= {m["headers"]["rocketmq.message_id"] for m in page["messages"]}
    assert in_log == {s["message_id"] for s in seen}, "a message of the topic never reached the group (or one not in it did)"
    group = httpx.get(f"{broker.url}/v1/share-groups/chaos").json()["topics"][0]
    assert (group["available"], group["locked"]) == (0, 0), group
    assert committed, "no transaction got through: the run proved nothing"


@pytest.fixture()
def chaos_broker(tmp_path: Path) -> Callable[[], BrokerProcess]:
    started: list[BrokerProcess] = []

    def start() -> BrokerProcess:
        broker = BrokerProcess(
            f"sqlite:///{tmp_path}/broker.db", log_path=tmp_path / "broker.log", grpc_port=free_port(), **SETTINGS
        )
        started.append(broker)
        return broker.start()

    yield start  # type: ignore[misc]
    for broker in started:
        broker.stop()


@pytest.mark.timeout(300)
def test_rocketmq_chaos_short(chaos_broker: Callable[[], BrokerProcess], tmp_path: Path) -> None:
    _run(chaos_broker(), tmp_path, kills=2, transactions=21)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_rocketmq_chaos_long(chaos_broker: Callable[[], BrokerProcess], tmp_path: Path) -> None:
    _run(chaos_broker(), tmp_path, kills=20, transactions=600)
