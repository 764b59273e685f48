"""Several broker processes on one database as one Kafka cluster (CONTRACT v1.3, docs/kafka.md).

Metadata lists the live processes and spreads partition leadership over them, groups and
transactional ids have one coordinator each, and when the process a client bootstrapped on
is killed, its registration expires and the client goes on with the other. On both databases.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.join_group.v7.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.static.primitive import i8, i32Timedelta

from tests.support.broker_process import BrokerProcess, brokers_on, wait_for
from tests.support.kafka_wire import KafkaWire

pytestmark = pytest.mark.e2e

SETTINGS = {"broker_heartbeat_seconds": 0.5, "broker_expiry_seconds": 2.0, "group_min_session_timeout_ms": 1000}


@pytest.fixture(scope="module")
def brokers(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProcess]]:
    """Two processes on the one database, for the module (its last test kills the first)."""
    with brokers_on(module_database_url, tmp_path_factory.mktemp("kafka-brokers"), 2, **SETTINGS) as started:
        yield started


def new_topic(broker: BrokerProcess, partitions: int) -> str:
    name = f"k-{uuid.uuid4().hex[:10]}"
    assert httpx.post(f"{broker.url}/v1/topics", json={"name": name, "partitions": partitions}).status_code == 201
    return name


def kafka_ports(brokers: list[BrokerProcess]) -> set[int]:
    return {int(str(b.settings["kafka_port"])) for b in brokers}


def metadata_naming(asked: BrokerProcess, brokers: list[BrokerProcess], topic: str | None = None) -> Any:
    """``asked``'s Metadata once it lists exactly ``brokers`` (registrations come and go with heartbeats)."""
    admin = AdminClient({"bootstrap.servers": asked.kafka_bootstrap})

    def listing() -> Any:
        found = admin.list_topics(topic, timeout=10)
        return found if {b.port for b in found.brokers.values()} == kafka_ports(brokers) else None

    return wait_for(listing, f"{asked.kafka_bootstrap} to list exactly {sorted(kafka_ports(brokers))}", timeout=20)


def test_metadata_lists_every_live_broker_and_spreads_leadership(brokers: list[BrokerProcess]) -> None:
    topic = new_topic(brokers[0], 8)
    views = [metadata_naming(broker, brokers, topic) for broker in brokers]
    leaders = [{p.id: p.leader for p in view.topics[topic].partitions.values()} for view in views]
    assert leaders[0] == leaders[1]  # both processes tell the same story
    assert set(leaders[0].values()) == set(views[0].brokers)  # each process leads some partitions


def test_a_group_has_one_coordinator_and_the_other_broker_says_not_coordinator(brokers: list[BrokerProcess]) -> None:
    for broker in brokers:
        metadata_naming(broker, brokers)
    found = []
    for group in (f"g-{n}-{uuid.uuid4().hex[:6]}" for n in range(8)):
        answers = []
        for broker in brokers:
            with KafkaWire(broker.kafka_bootstrap) as wire:
                answer = wire.call(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,)))
            (coordinator,) = answer.coordinators
            answers.append(coordinator.port)
        assert answers[0] == answers[1]  # one coordinator, whichever process is asked
        found.append((group, answers[0]))
    assert {port for _, port in found} == kafka_ports(brokers)  # eight groups: both processes coordinate some
    group, port = found[0]
    other = next(b for b in brokers if int(str(b.settings["kafka_port"])) != port)
    six_seconds = i32Timedelta.parse(datetime.timedelta(seconds=6))
    join = JoinGroupRequest(
        group_id=group, session_timeout=six_seconds, rebalance_timeout=six_seconds, member_id="",
        protocol_type="consumer", protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
    )
    with KafkaWire(other.kafka_bootstrap) as wire:
        assert wire.call(join).error_code is ErrorCode.not_coordinator


def test_when_the_bootstrap_broker_is_killed_clients_go_on_with_the_other(brokers: list[BrokerProcess]) -> None:
    """Last in the module: it kills the first process."""
    first, second = brokers
    topic, group = new_topic(first, 4), f"g-{uuid.uuid4().hex[:8]}"
    metadata_naming(first, brokers)
    producer = Producer({"bootstrap.servers": first.kafka_bootstrap, "enable.idempotence": True})
    reader = Consumer({"bootstrap.servers": first.kafka_bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                       "session.timeout.ms": 6000, "enable.auto.commit": False})
    reader.subscribe([topic])
    try:
        for n in range(8):
            producer.produce(topic, value=f"before-{n}", partition=n % 4)
        assert producer.flush(20) == 0
        got = poll_values(reader, 8)
        reader.commit(asynchronous=False)
        first.kill()
        metadata_naming(second, [second])  # the dead process's registration expired
        for n in range(8):
            producer.produce(topic, value=f"after-{n}", partition=n % 4)
        assert producer.flush(60) == 0  # the partitions the dead process led moved to the live one
        after = {f"after-{n}" for n in range(8)}
        got_after = poll_values(reader, 8, timeout=60, until_seen=after)
        # Every one arrives. A consumer whose coordinator died may rejoin and resume from its last
        # commit, so an uncommitted "after" message may come twice (Kafka's at least once); the
        # committed "before" ones never again.
        assert set(got_after) == after and sorted(got) == sorted(f"before-{n}" for n in range(8)), (got, got_after)
    finally:
        reader.close()


def poll_values(reader: Consumer, want: int, timeout: float = 30.0, until_seen: set[str] | None = None) -> list[str]:
    """Values polled until ``want`` came, or, with ``until_seen``, until each of those came at least once."""
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while (len(got) < want if until_seen is None else not until_seen <= set(got)) and time.monotonic() < deadline:
        message = reader.poll(0.2)
        if message is not None and message.error() is None:
            got.append(message.value().decode())
    return got
