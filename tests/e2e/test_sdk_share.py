"""The share-group SDK (ShareConsumer, AsyncShareConsumer, transactional acks) against a real broker process."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from sdk import (
    AckResult,
    AsyncShareConsumer,
    AsyncTransactionalProducer,
    Client,
    IllegalStateError,
    Producer,
    ReceiptExpiredError,
    ReceivedMessage,
    ShareConsumer,
    ShareGroupNotFoundError,
    TransactionalProducer,
    TransactionState,
)
from tests.e2e.sdk_fixtures import admin, new_topic, read_all, unique  # noqa: F401
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker that allows 100 ms locks and dead-letters after three deliveries."""
    path = tmp_path_factory.mktemp("share-broker")
    process = BrokerProcess(
        f"sqlite:///{path}/broker.db", log_path=path / "broker.log", share_min_lock_ms=100, share_max_deliveries=3
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture()
def topic(new_topic: Callable[..., str], broker: BrokerProcess) -> str:
    name = new_topic(partitions=2)
    with Producer(broker.url) as producer:
        for n in range(6):
            producer.send(name, {"n": n}, key=f"k{n}")
    return name


def values(messages: list[ReceivedMessage]) -> list[int]:
    return sorted(m.value["n"] for m in messages)


def test_receive_ack_release_reject_and_describe(broker: BrokerProcess, topic: str, admin: Client) -> None:
    group = unique("g")
    with ShareConsumer(broker.url, group, topic, auto_extend=False) as consumer:
        received = consumer.receive(max_messages=10)
        assert values(received) == [0, 1, 2, 3, 4, 5]
        assert all(m.delivery_count == 1 and m.receipt and m.lock_expires_ms > 0 for m in received)
        first, second, third, *rest = received
        assert [r.ok for r in consumer.ack([first, *rest])] == [True] * 4
        assert consumer.release(second)[0].ok
        assert consumer.reject(third.receipt)[0].ok
        again = consumer.receive(max_messages=10)
        assert [(m.offset, m.partition, m.delivery_count) for m in again] == [(second.offset, second.partition, 2)]
        extended = consumer.extend(again, lock_ms=60_000)[0]
        assert extended.ok and (extended.lock_expires_ms or 0) > again[0].lock_expires_ms
        assert consumer.ack(again)[0].ok
        assert consumer.ack(first)[0].error == "RECEIPT_EXPIRED"
        [info] = consumer.describe().topics
        assert (info.topic, info.available, info.locked, info.accepted, info.dlq) == (topic, 0, 0, 5, 1)
    [letter] = read_all(admin, f"DLQ.{group}")
    assert letter.value == third.value and letter.headers["halfmq-dlq-reason"] == "REJECTED"
    with pytest.raises(IllegalStateError):
        consumer.receive()
    with ShareConsumer(broker.url, unique("nobody"), topic) as stranger, pytest.raises(ShareGroupNotFoundError):
        stranger.describe()


def test_iteration_and_close_releases_what_is_still_held(broker: BrokerProcess, topic: str) -> None:
    group = unique("g")
    seen = []
    consumer = ShareConsumer(broker.url, group, topic, max_messages=2)
    for message in consumer:
        seen.append(message)
        if len(seen) == 3:
            break
    consumer.ack(seen[0])
    consumer.close()  # the other messages of its batches go back at once, not when their locks run out
    with ShareConsumer(broker.url, group, topic, lock_ms=60_000) as other:
        rest = other.receive(max_messages=10, timeout=5)
        assert values(rest) == sorted(set(range(6)) - {seen[0].value["n"]})
        assert {m.delivery_count for m in rest if m.value["n"] in values(seen[1:])} == {2}


def test_a_slow_handler_keeps_its_lock(broker: BrokerProcess, topic: str) -> None:
    group = unique("g")
    others_got: list[ReceivedMessage] = []
    with ShareConsumer(broker.url, group, topic, max_messages=1, lock_ms=1000) as slow, \
            ShareConsumer(broker.url, group, topic, lock_ms=60_000, auto_extend=False) as other:

        def handler(message: ReceivedMessage) -> None:
            deadline = time.monotonic() + 2.5  # 2.5 lock lengths of work, while another consumer asks for more
            while time.monotonic() < deadline:
                others_got.extend(m for m in other.receive(max_messages=10, timeout=0.3) if m.offset == message.offset
                                  and m.partition == message.partition)

        assert slow.process(handler) == 1
        assert others_got == []
        [info] = slow.describe().topics
        # The ACCEPT waits for the next receive and the lock is kept meanwhile (the other five: the other's).
        assert (info.accepted, info.locked) == (0, 6)
        assert [r.ok for r in slow.flush()] == [True]
        [info] = slow.describe().topics
        assert (info.accepted, info.locked) == (1, 5)


def test_process_releases_a_message_whose_handler_fails(broker: BrokerProcess, topic: str) -> None:
    group = unique("g")
    acknowledged: list[list[AckResult]] = []
    with ShareConsumer(broker.url, group, topic, max_messages=6, on_acknowledged=acknowledged.append) as consumer:

        def handler(message: ReceivedMessage) -> None:
            if message.value["n"] == 4:
                raise ValueError("cannot handle 4")

        assert consumer.process(handler) == 6
        again = consumer.receive(timeout=5)  # carries the five ACCEPTs and the RELEASE
        assert [(m.value["n"], m.delivery_count) for m in again] == [(4, 2)]
        assert [len(results) for results in acknowledged] == [6] and all(r.ok for r in acknowledged[0])
        consumer.acknowledge(again, "REJECT")
    assert [len(results) for results in acknowledged] == [6, 1]  # close sent the deferred REJECT
    assert acknowledged[1][0].ok


def test_acks_in_a_transaction_follow_its_outcome(broker: BrokerProcess, topic: str, admin: Client) -> None:
    group, output = unique("g"), f"{topic}-out"
    admin.create_topic(output)
    with ShareConsumer(broker.url, group, topic, max_messages=3) as consumer, \
            TransactionalProducer(broker.url, unique("tx")) as producer:
        producer.init_transactions()
        batch = consumer.receive(timeout=5)
        with producer.transaction():
            for message in batch:
                producer.send(output, {"done": message.value["n"]})
            assert all(r.ok for r in producer.send_acks_to_transaction(group, batch))
            consumer.forget(batch)
        second = consumer.receive(timeout=5)
        producer.begin_transaction()
        producer.send(output, {"done": "never"})
        producer.send_acks_to_transaction(group, second)
        consumer.forget(second)
        producer.abort_transaction()
        redelivered = consumer.receive(max_messages=10, timeout=5)
        assert sorted((m.value["n"], m.delivery_count) for m in redelivered) == sorted(
            [(m.value["n"], 2) for m in second]
        )
        consumer.ack(redelivered)
        producer.begin_transaction()
        with pytest.raises(ReceiptExpiredError):
            producer.send_acks_to_transaction(group, batch)  # accepted long ago
        assert producer.state is TransactionState.ABORTABLE_ERROR
        producer.abort_transaction()
        [info] = consumer.describe().topics
        assert (info.accepted, info.locked) == (6, 0)
    assert sorted(m.value["done"] for m in read_all(admin, output)) == values(batch)


def test_the_async_twin(broker: BrokerProcess, topic: str, admin: Client) -> None:
    group, output = unique("g"), f"{topic}-aio"
    admin.create_topic(output)

    async def scenario() -> None:
        async with AsyncShareConsumer(broker.url, group, topic, max_messages=2, lock_ms=1000) as consumer, \
                AsyncTransactionalProducer(broker.url, unique("tx")) as producer:
            first = await consumer.receive(timeout=5)
            await asyncio.sleep(2.5)  # two and a half lock lengths: the task kept renewing them
            assert all(r.ok for r in await consumer.ack(first))

            async def handler(message: ReceivedMessage) -> None:
                if message.value["n"] % 2:
                    raise ValueError("odd")

            assert await consumer.process(handler) == 2
            await producer.init_transactions()
            batch = await consumer.receive(max_messages=2, timeout=5)
            async with producer.transaction():
                await producer.send(output, {"count": len(batch)})
                await producer.send_acks_to_transaction(group, batch)
                consumer.forget(batch)
            seen = [m async for m in _take(consumer, 1)]  # the sixth message, whichever it is
            assert all(r.ok for r in await consumer.reject(seen))
            [info] = (await consumer.describe()).topics
            assert (info.accepted, info.dlq, info.available, info.locked) == (5, 1, 0, 0)

    asyncio.run(scenario())
    assert len(read_all(admin, output)) == 1


async def _take(consumer: AsyncShareConsumer, count: int):  # type: ignore[no-untyped-def]
    taken = 0
    async for message in consumer:
        yield message
        taken += 1
        if taken == count:
            return


def test_two_consumers_in_threads_split_the_work(broker: BrokerProcess, new_topic: Callable[..., str]) -> None:
    name, group = new_topic(partitions=3), unique("g")
    with Producer(broker.url) as producer:
        for n in range(60):
            producer.send(name, {"n": n})
    taken: list[list[int]] = [[], []]

    def work(index: int) -> None:
        with ShareConsumer(broker.url, group, name, max_messages=7) as consumer:
            while sum(map(len, taken)) < 60:
                batch = consumer.receive(timeout=0.5)
                taken[index] += [m.value["n"] for m in batch]
                consumer.ack(batch)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(taken[0] + taken[1]) == list(range(60))
