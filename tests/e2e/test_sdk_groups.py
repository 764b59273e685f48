"""The SDK's consumers as group members against a real broker: hand-over, callbacks, leaving, the async twin."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from sdk import (
    AsyncConsumer,
    AsyncTransactionalProducer,
    Client,
    Consumer,
    FencedMemberEpochError,
    IllegalStateError,
    Message,
    Producer,
    TransactionalProducer,
)
from tests.e2e.sdk_fixtures import new_topic, read_all, unique  # noqa: F401
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.e2e
SESSION_MS = 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    path = tmp_path_factory.mktemp("groups-broker")
    process = BrokerProcess(
        f"sqlite:///{path}/broker.db", log_path=path / "broker.log", group_min_session_timeout_ms=500,
        group_heartbeat_interval_ms=200, check_interval_seconds=0.3,
    ).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[Client]:
    with Client(broker.url) as client:
        yield client


def fill(admin: Client, topic: str, count: int) -> None:
    with Producer(admin.url) as producer:
        for i in range(count):
            producer.send(topic, {"id": i}, partition=i % admin.get_topic(topic).partition_count)


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_second_consumer_takes_its_share_after_the_first_commits_and_lets_go(
    admin: Client, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(4), unique("g")
    fill(admin, topic, 40)
    events: list[tuple[str, str, list[tuple[str, int]]]] = []
    first = Consumer(admin.url, group, topic, session_timeout_ms=SESSION_MS, max_poll_messages=4,
                     on_assigned=lambda tps: events.append(("first", "assigned", tps)),
                     on_revoked=lambda tps: events.append(("first", "revoked", tps)))
    second = Consumer(admin.url, group, topic, session_timeout_ms=SESSION_MS, max_poll_messages=4,
                      on_assigned=lambda tps: events.append(("second", "assigned", tps)))
    seen: Counter[int] = Counter()
    try:
        assert len(first.assignment()) == 4
        for message in first.poll(timeout=1.0):
            seen[message.value["id"]] += 1
        stop = threading.Event()

        def keep_reading() -> None:  # the first consumer keeps polling, so it can give partitions up
            while not stop.is_set():
                for message in first.poll(timeout=0.2):
                    seen[message.value["id"]] += 1

        reader = threading.Thread(target=keep_reading)
        reader.start()
        try:
            wait_for(lambda: len(second.assignment()) == 2)
        finally:
            stop.set()
            reader.join()
        while batch := second.poll(timeout=0.5):
            for message in batch:
                seen[message.value["id"]] += 1
        second.commit()
        while batch := first.poll(timeout=0.5):
            for message in batch:
                seen[message.value["id"]] += 1
        first.commit()
    finally:
        first.close()
        second.close()
    assert seen == Counter(range(40))  # a clean hand-over repeats nothing: the first committed before it let go
    revoked = next(tps for who, what, tps in events if (who, what) == ("first", "revoked"))
    taken = next(tps for who, what, tps in events if (who, what) == ("second", "assigned"))
    assert sorted(revoked) == sorted(taken) and len(taken) == 2
    assert events.index(("first", "revoked", revoked)) < events.index(("second", "assigned", taken))
    assert sum(c.offset for c in admin.committed_offsets(group)) == 40


def test_a_closed_consumer_hands_its_partitions_over_at_once(admin: Client, new_topic: Callable[..., str]) -> None:
    topic, group = new_topic(2), unique("g")
    with Consumer(admin.url, group, topic, session_timeout_ms=60_000) as first:
        assert len(first.assignment()) == 2
        with Consumer(admin.url, group, topic, session_timeout_ms=60_000) as second:
            assert second.assignment() == []
            first.close()  # leaves: no need to wait for its 60 s session
            started = time.monotonic()
            wait_for(lambda: len(second.assignment()) == 2, timeout=10)
            assert time.monotonic() - started < 10
    assert admin.describe_group(group).state == "EMPTY"


def test_commits_are_fenced_for_partitions_the_consumer_does_not_own(
    admin: Client, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(2), unique("g")
    fill(admin, topic, 4)
    with Consumer(admin.url, group, topic, session_timeout_ms=SESSION_MS) as first, Consumer(
        admin.url, group, topic, session_timeout_ms=SESSION_MS
    ) as second:
        first.assignment()

        def split() -> bool:
            first.poll(timeout=0.05)  # gives up what was revoked (the hand-over happens in poll)
            return len(second.assignment()) == 1 and len(first.assignment()) == 1

        wait_for(split)
        (theirs,) = second.assignment()
        with pytest.raises(FencedMemberEpochError):
            first.commit({theirs: 1})  # not its partition: nothing is committed
        with pytest.raises(FencedMemberEpochError):
            admin.commit_offsets(group, {theirs: 1})  # no member named while the group has members
        assert all(c.offset != 1 or (c.topic, c.partition) != theirs for c in admin.committed_offsets(group))
        second.poll(timeout=1.0)
        second.commit()
    assert {(c.topic, c.partition): c.offset for c in admin.committed_offsets(group)}[theirs] == 2


def test_delivery_is_part_of_the_consumer(admin: Client, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    with pytest.raises(ValueError):
        Consumer(admin.url, unique("g"), topic, "read_uncommitted", delivery="exactly_once")
    with Consumer(admin.url, unique("g"), topic, delivery="exactly_once") as consumer, pytest.raises(IllegalStateError):
        consumer.commit()
    with Consumer(admin.url, unique("g"), topic) as consumer, pytest.raises(IllegalStateError):
        consumer.process_exactly_once(TransactionalProducer(admin.url, unique("tx")), lambda m: None)


def test_at_most_once_commits_before_it_hands_out(admin: Client, new_topic: Callable[..., str]) -> None:
    topic, group = new_topic(1), unique("g")
    fill(admin, topic, 6)
    with Consumer(admin.url, group, topic, delivery="at_most_once", max_poll_messages=4) as consumer:
        batch = consumer.poll(timeout=1.0)
        assert len(batch) == 4
        assert [c.offset for c in admin.committed_offsets(group)] == [4]  # before anything was processed


def test_process_exactly_once(admin: Client, new_topic: Callable[..., str]) -> None:
    source, sink, group = new_topic(2), new_topic(1), unique("g")
    fill(admin, source, 10)
    with TransactionalProducer(admin.url, unique("tx")) as producer, Consumer(
        admin.url, group, source, delivery="exactly_once", max_poll_messages=3
    ) as consumer:
        producer.init_transactions()
        done = 0
        while done < 10:
            done += consumer.process_exactly_once(producer, lambda m: Message(sink, m.value["id"] * 10))
        fill(admin, source, 2)

        def explode(_message: Message) -> None:
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError):  # a handler error aborts the batch and rewinds it
            consumer.process_exactly_once(producer, explode, timeout=1.0)
        done = 0
        while done < 2:
            done += consumer.process_exactly_once(producer, lambda m: [Message(sink, m.value["id"] * 10)] * 2)
    assert sorted(m.value for m in read_all(admin, sink)) == sorted([i * 10 for i in range(10)] + [0, 0, 10, 10])
    assert sum(c.offset for c in admin.committed_offsets(group)) == 12


def test_async_consumers_share_a_group_and_process_exactly_once(admin: Client, new_topic: Callable[..., str]) -> None:
    source, sink, group = new_topic(4), new_topic(1), unique("g")
    fill(admin, source, 40)

    async def member(name: str) -> int:
        done = 0
        async with AsyncTransactionalProducer(admin.url, unique(name)) as producer, AsyncConsumer(
            admin.url, group, source, delivery="exactly_once", session_timeout_ms=SESSION_MS, max_poll_messages=5
        ) as consumer:
            await producer.init_transactions()

            async def transform(message: Message) -> Message:
                await asyncio.sleep(0.01)
                return Message(sink, message.value["id"])

            idle_since = time.monotonic()
            while time.monotonic() - idle_since < 2.0:
                processed = await consumer.process_exactly_once(producer, transform, timeout=0.2)
                done += processed
                if processed:
                    idle_since = time.monotonic()
        return done

    async def scenario() -> list[int]:
        return list(await asyncio.gather(member("a"), member("b")))

    counts = asyncio.run(scenario())
    assert sum(counts) == 40
    assert sorted(m.value for m in read_all(admin, sink)) == list(range(40))
