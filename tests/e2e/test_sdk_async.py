"""The asyncio twins against a real broker process (each test drives its own event loop)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from sdk import (
    AlreadyResolvedError,
    AsyncClient,
    AsyncConsumer,
    AsyncProducer,
    AsyncTransactionalProducer,
    Client,
    IllegalStateError,
    LocalTransactionState,
    Message,
    ProducerFencedError,
    RetryPolicy,
    TopicExistsError,
    TopicNotFoundError,
    TransactionListener,
    TransactionNotFoundError,
    TransactionProducer,
    TransactionState,
)
from sdk._partitioner import partition_for_key
from tests.e2e.sdk_fixtures import (  # noqa: F401
    FaultyProxy,
    admin,
    broker,
    faulty_proxy,
    new_topic,
    read_all,
    unique,
)

pytestmark = pytest.mark.e2e


def test_async_client(admin: Client) -> None:
    async def scenario() -> None:
        async with AsyncClient(admin.url) as client:
            name = unique("async")
            await client.create_topic(name, 2)
            await client.create_topic(name, 2, exist_ok=True)
            with pytest.raises(TopicExistsError):
                await client.create_topic(name, 2)
            assert (await client.list_topics())[name] == 2
            assert (await client.get_topic(name)).partition_count == 2
            assert (await client.fetch(name, 0)).messages == []
            offsets_group = unique("g")
            await client.commit_offsets(offsets_group, {(name, 0): 0})
            assert [c.offset for c in await client.committed_offsets(offsets_group)] == [0]
            assert await client.partitions_for(name) == 2
            assert await client.produce(name, [Message(name, "x", key="k")]) == [(partition_for_key("k", 2), 0)]
            assert await client.health() is not None
            with pytest.raises(TransactionNotFoundError):
                await client.get_transaction("no-such-txn")
            half = await client.get_half_message(pending.message_id)
            assert (half.state, half.producer_group) == ("PREPARED", group)
            assert [h.message_id for h in await client.list_half_messages(group)] == [pending.message_id]
            assert (await client.rollback_half_message(pending.message_id))["state"] == "ROLLED_BACK"
            with pytest.raises(AlreadyResolvedError):
                await client.commit_half_message(pending.message_id)

    class Undecided(TransactionListener):
        def execute_local_transaction(self, message: Message, arg: object) -> LocalTransactionState:
            return LocalTransactionState.UNKNOWN

        def check_local_transaction(self, message: Message) -> LocalTransactionState:
            return LocalTransactionState.UNKNOWN

    topic, group = unique("async-half"), unique("pg")
    admin.create_topic(topic)
    with TransactionProducer(admin.url, group, Undecided(), check_immunity_seconds=60) as producer:
        pending = producer.send_message_in_transaction(Message(topic, "undecided"))
    asyncio.run(scenario())


def test_async_producer_is_idempotent_and_partitions_like_the_broker(
    admin: Client, new_topic: Callable[..., str], faulty_proxy: FaultyProxy
) -> None:
    topic = new_topic(3)

    async def scenario() -> None:
        async with AsyncProducer(faulty_proxy.url, retry=RetryPolicy(initial_backoff=0.01)) as producer:
            faulty_proxy.fail("/messages", "lose_answer", times=2)
            results = await asyncio.gather(*(producer.send(topic, i, key=f"k{i}") for i in range(28)))
            results += await producer.send_batch(topic, [Message(topic, i, key=f"k{i}") for i in (28, 29)])
            assert [p for p, _ in results] == [partition_for_key(f"k{i}", 3) for i in range(30)]
            assert await producer.send(topic, b"\x00", partition=1) == (1, results_in(results, 1))
            assert producer.producer_id is not None
            with pytest.raises(TopicNotFoundError):
                await producer.send(unique("missing"), 1)
        with pytest.raises(IllegalStateError):
            await producer.send(topic, 1)

    asyncio.run(scenario())
    values = [m.value for m in read_all(admin, topic)]
    assert sorted(v for v in values if isinstance(v, int)) == list(range(30)) and b"\x00" in values


def results_in(results: list[tuple[int, int]], partition: int) -> int:
    """How many of ``results`` went to ``partition`` (= the next offset there)."""
    return sum(1 for p, _ in results if p == partition)


def test_async_transactional_producer(admin: Client, new_topic: Callable[..., str]) -> None:
    source, sink, group, transactional_id = new_topic(1), new_topic(2), unique("g"), unique("tx")

    async def scenario() -> None:
        async with AsyncTransactionalProducer(admin.url, transactional_id) as producer:
            with pytest.raises(IllegalStateError, match="init_transactions"):
                producer.begin_transaction()
            await producer.init_transactions()
            assert producer.state is TransactionState.READY and producer.producer_epoch == 0
            with pytest.raises(IllegalStateError, match="outside a transaction"):
                await producer.send(sink, 1)
            async with producer.transaction():
                await producer.send(sink, {"kept": 1}, key="a")
                await producer.send_offsets_to_transaction({(source, 0): 0}, group)
            with pytest.raises(IllegalStateError, match="without an open transaction"):
                await producer.commit_transaction()
            with pytest.raises(KeyError):
                async with producer.transaction():
                    await producer.send(sink, {"dropped": 1}, key="a")
                    raise KeyError("boom")
            producer.begin_transaction()
            await producer.send(sink, {"dropped": 2})
            await producer.abort_transaction()
            async with AsyncTransactionalProducer(admin.url, transactional_id) as successor:
                await successor.init_transactions()
                producer.begin_transaction()
                with pytest.raises(ProducerFencedError):
                    await producer.send(sink, "zombie")
                with pytest.raises(ProducerFencedError):
                    await producer.abort_transaction()

    asyncio.run(scenario())
    assert [m.value for m in read_all(admin, sink)] == [{"kept": 1}]
    assert [c.offset for c in admin.committed_offsets(group)] == [0]


def test_async_consumer(admin: Client, new_topic: Callable[..., str]) -> None:
    topic, group = new_topic(3), unique("g")

    async def scenario() -> None:
        async with AsyncProducer(admin.url) as producer:
            for i in range(6):
                await producer.send(topic, i, key=str(i))
            async with AsyncConsumer(admin.url, group, topic) as consumer:
                assert consumer.group == group
                assert len(await consumer.assignment()) == 3
                first = await consumer.poll(timeout=1.0, max_messages=4)
                assert len(first) == 4
                await consumer.commit()
            async with AsyncConsumer(admin.url, group, [topic], isolation_level="read_committed") as consumer:
                rest = await consumer.poll(timeout=1.0)
                assert sorted(m.value for m in first + rest) == list(range(6))
                # Parked on all partitions at once: a late message on any one wakes it.
                loop = asyncio.get_running_loop()
                started = loop.time()

                async def send_late() -> None:
                    await asyncio.sleep(0.3)
                    await producer.send(topic, "late", partition=2)

                late = asyncio.create_task(send_late())
                woken = await consumer.poll(timeout=5.0)
                await late
                assert [m.value for m in woken] == ["late"] and loop.time() - started < 4
                await consumer.seek(topic, 2, 0)
                seen = []
                async for message in consumer:
                    seen.append(message.value)
                    if message.value == "late":
                        break
                assert seen[-1] == "late"
                assert (await consumer.positions())[(topic, 2)] == len(seen)
                await consumer.commit()
        with pytest.raises(IllegalStateError):
            await consumer.poll()

    asyncio.run(scenario())
