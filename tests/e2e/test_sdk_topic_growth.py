"""After a topic gains partitions, the SDK's keyed sends land where the broker's own key routing puts them.

The SDK partitions on the client, by a partition count it caches; ``PATCH /v1/topics/{t}`` adds
partitions. The broker's routing is read from a keyed REST produce that names no partition
(``Client.produce``); the SDK's from its producers' answers. One real broker process per
database (SQLite and PostgreSQL).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sdk import (
    AsyncProducer,
    AsyncTransactionalProducer,
    Client,
    Message,
    PartitionNotFoundError,
    Producer,
    TransactionalProducer,
    calls,
)
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.e2e

KEYS = [f"customer-{i}" for i in range(40)]
AGE_MS = 400  # a short metadata_max_age_ms, so a test sees the count read again without waiting minutes


@pytest.fixture(scope="module")
def broker(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    log = Path(tmp_path_factory.mktemp("growth")) / "broker.log"
    with BrokerProcess(module_database_url, log_path=log) as process:
        yield process


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[Client]:
    with Client(broker.url) as client:
        yield client


def new_topic(admin: Client, partitions: int) -> str:
    name = f"grow-{uuid.uuid4().hex[:10]}"
    admin.create_topic(name, partitions)
    return name


def grow(admin: Client, topic: str, partitions: int) -> None:
    """``PATCH /v1/topics/{topic}`` through the SDK's public call builder."""
    assert admin.call(calls.alter_topic(topic, partitions=partitions)).partition_count == partitions


def broker_routing(admin: Client, topic: str) -> dict[str, int]:
    """Where the broker itself puts each key: a keyed REST produce without a partition."""
    written = admin.produce(topic, [Message(topic, "probe", key=key) for key in KEYS])
    return {key: partition for key, (partition, _) in zip(KEYS, written, strict=True)}


def outlive_the_cached_count() -> None:
    time.sleep(AGE_MS / 1000)  # a lower bound on elapsed time, not a race: the count is then too old


def test_keyed_sends_follow_a_grown_topic_once_the_cached_count_is_too_old(admin: Client, broker: BrokerProcess) -> None:
    topic = new_topic(admin, 2)
    with Producer(broker.url, metadata_max_age_ms=AGE_MS) as producer, TransactionalProducer(
        broker.url, f"grow-{uuid.uuid4().hex[:8]}", metadata_max_age_ms=AGE_MS
    ) as transactional:
        transactional.init_transactions()
        before = broker_routing(admin, topic)
        assert {key: producer.send(topic, "v", key=key)[0] for key in KEYS} == before

        grow(admin, topic, 6)
        after = broker_routing(admin, topic)
        assert after != before  # the broker routes some keys to the new partitions now
        outlive_the_cached_count()

        assert {key: producer.send(topic, "v", key=key)[0] for key in KEYS} == after
        with transactional.transaction():
            assert {key: transactional.send(topic, "v", key=key)[0] for key in KEYS} == after
        assert producer.partitions_for(topic) == 6


def test_a_send_to_a_new_partition_reads_the_count_again_at_once(admin: Client, broker: BrokerProcess) -> None:
    topic = new_topic(admin, 2)
    with Producer(broker.url) as producer:  # the default age: minutes
        assert producer.partitions_for(topic) == 2
        with pytest.raises(PartitionNotFoundError):  # refused before any request: the topic has two
            producer.send(topic, "v", partition=2)

        grow(admin, topic, 3)
        assert producer.send(topic, "to the new one", partition=2)[0] == 2
        # The count was read again for it, so keyed sends follow the broker's routing from now on.
        assert {key: producer.send(topic, "v", key=key)[0] for key in KEYS} == broker_routing(admin, topic)
        assert producer.partitions_for(topic) == 3


def test_the_async_producers_follow_a_grown_topic_too(admin: Client, broker: BrokerProcess) -> None:
    topic = new_topic(admin, 3)
    grow_to = 8

    async def scenario() -> None:
        async with AsyncProducer(broker.url, metadata_max_age_ms=AGE_MS) as producer, AsyncTransactionalProducer(
            broker.url, f"grow-{uuid.uuid4().hex[:8]}", metadata_max_age_ms=AGE_MS
        ) as transactional:
            await transactional.init_transactions()
            assert await producer.partitions_for(topic) == 3
            assert await transactional.partitions_for(topic) == 3

            grow(admin, topic, grow_to)
            after = broker_routing(admin, topic)
            outlive_the_cached_count()

            assert {key: (await producer.send(topic, "v", key=key))[0] for key in KEYS} == after
            async with transactional.transaction():
                assert {key: (await transactional.send(topic, "v", key=key))[0] for key in KEYS} == after

    asyncio.run(scenario())
