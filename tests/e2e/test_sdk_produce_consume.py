"""Client, idempotent Producer and Consumer against a real broker process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from sdk import (
    NO_RETRY,
    BrokerUnavailableError,
    Client,
    Consumer,
    IllegalStateError,
    Message,
    OffsetOutOfRangeError,
    Producer,
    ReservedTopicError,
    RetryPolicy,
    TopicExistsError,
    TopicNotFoundError,
    ValidationError,
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
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.e2e


# --- Client ---------------------------------------------------------------------------


def test_client_topics(admin: Client) -> None:
    name = unique("admin")
    admin.create_topic(name, 3)
    admin.create_topic(name, 3, exist_ok=True)
    with pytest.raises(TopicExistsError) as info:
        admin.create_topic(name, 3)
    assert info.value.status == 409 and info.value.code == "TOPIC_EXISTS"
    assert admin.list_topics()[name] == 3
    metadata = admin.get_topic(name)
    assert metadata.name == name and metadata.partition_count == 3
    assert [p.partition for p in metadata.partitions] == [0, 1, 2]
    with pytest.raises(TopicNotFoundError):
        admin.get_topic(unique("missing"))
    with pytest.raises(ReservedTopicError):
        admin.create_topic("RMQ_SYS_mine")
    with pytest.raises(ValidationError):
        admin.create_topic("bad name!")
    assert admin.health() is not None


def test_client_produce_fetch_and_group_offsets(admin: Client, new_topic: Callable[..., str]) -> None:
    topic = new_topic(2)
    offsets = admin.produce(topic, [Message(topic, {"n": 1}, key="a"), Message(topic, b"\x01\x02", partition=1)])
    assert offsets[0] == (partition_for_key("a", 2), 0)
    assert offsets[1][0] == 1
    fetched = admin.fetch(topic, 1, 0)
    assert fetched.messages[-1].value == b"\x01\x02" and fetched.next_offset == fetched.high_watermark
    with pytest.raises(OffsetOutOfRangeError):
        admin.fetch(topic, 1, 99)
    group = unique("g")
    admin.commit_offsets(group, {(topic, 1): fetched.next_offset})
    committed = admin.committed_offsets(group)
    assert [(c.topic, c.partition, c.offset, c.lag) for c in committed] == [(topic, 1, fetched.next_offset, 0)]


# --- Producer -------------------------------------------------------------------------


def test_producer_partitions_like_the_broker_and_round_trips_values(
    admin: Client, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(4)
    with Producer(admin.url) as producer:
        for i in range(20):
            key = f"order-{i}"
            partition, _ = producer.send(topic, {"i": i}, key=key, headers={"source": "test"})
            # The broker's own partitioning (topic endpoint) must agree with the SDK's.
            assert admin.produce(topic, [Message(topic, i, key=key)])[0][0] == partition
        assert producer.send(topic, b"\x00raw", partition=2)[0] == 2
        assert producer.partitions_for(topic) == 4
        assert producer.producer_id is not None
        results = producer.send_batch(topic, [Message(topic, n, key=f"b{n}") for n in range(6)])
        assert [p for p, _ in results] == [partition_for_key(f"b{n}", 4) for n in range(6)]
    values = [m.value for m in read_all(admin, topic)]
    assert b"\x00raw" in values and len(values) == 47
    headers = [m.headers for m in read_all(admin, topic) if isinstance(m.value, dict)]
    assert all(h == {"source": "test"} for h in headers)


def test_producer_is_thread_safe(admin: Client, new_topic: Callable[..., str]) -> None:
    topic = new_topic(2)
    with Producer(admin.url) as producer:

        def send_ten(thread: int) -> None:
            for i in range(10):
                producer.send(topic, [thread, i], key=str(i % 3))

        threads = [threading.Thread(target=send_ten, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    values = sorted(tuple(m.value) for m in read_all(admin, topic))
    assert values == [(n, i) for n in range(4) for i in range(10)]


def test_producer_errors_are_typed(admin: Client, new_topic: Callable[..., str]) -> None:
    producer = Producer(admin.url)
    with pytest.raises(TopicNotFoundError):
        producer.send(unique("missing"), 1)
    producer.close()
    with pytest.raises(IllegalStateError):
        producer.send(new_topic(), 1)


def test_producer_retry_after_a_lost_answer_does_not_duplicate(
    admin: Client, new_topic: Callable[..., str], faulty_proxy: FaultyProxy
) -> None:
    topic = new_topic(1)
    retry = RetryPolicy(initial_backoff=0.01)
    with Producer(faulty_proxy.url, retry=retry) as producer:
        assert producer.send(topic, "first") == (0, 0)
        faulty_proxy.fail("/partitions/0/messages", "lose_answer")
        faulty_proxy.fail("/partitions/0/messages", "unavailable")
        assert producer.send(topic, "second") == (0, 1)
        assert producer.send(topic, "third") == (0, 2)
    produced = [body for method, path, body in faulty_proxy.seen if "/partitions/0/messages" in path]
    assert produced[1] == produced[2] == produced[3], "a retry must resend the identical batch"
    assert [m.value for m in read_all(admin, topic)] == ["first", "second", "third"]


def test_producer_survives_a_broker_restart_without_duplicates(
    broker: BrokerProcess, admin: Client, new_topic: Callable[..., str]
) -> None:
    topic, sent = new_topic(2), 12
    with Producer(broker.url, retry=RetryPolicy(max_attempts=40, max_backoff=0.5)) as producer:
        restarter = threading.Timer(0.2, broker.restart)  # SIGKILL, then start on the same database
        restarter.start()
        try:
            for i in range(sent):
                producer.send(topic, i, key=str(i))
                time.sleep(0.05)
        finally:
            restarter.join()
    assert sorted(m.value for m in read_all(admin, topic)) == list(range(sent))


def test_unreachable_broker_raises_broker_unavailable() -> None:
    with Producer("http://127.0.0.1:9", retry=NO_RETRY) as producer, pytest.raises(BrokerUnavailableError):
        producer.send("t", 1)


# --- Consumer -------------------------------------------------------------------------


def test_consumer_reads_all_partitions_commits_and_resumes(admin: Client, new_topic: Callable[..., str]) -> None:
    topic = new_topic(3)
    group = unique("g")
    with Producer(admin.url) as producer:
        for i in range(12):
            producer.send(topic, {"i": i}, key=f"k{i}")
    with Consumer(admin.url, group, topic) as consumer:
        assert sorted(consumer.assignment()) == [(topic, 0), (topic, 1), (topic, 2)]
        first = consumer.poll(timeout=1.0, max_messages=5)
        assert len(first) == 5
        consumer.commit()
        assert sum(consumer.committed().values()) == 5
    with Consumer(admin.url, group, [topic]) as consumer:
        rest = consumer.poll(timeout=1.0)
        assert sum(consumer.positions().values()) == 12
        consumer.commit()
    seen = sorted(m.value["i"] for m in first + rest)
    assert seen == list(range(12))
    assert all(c.lag == 0 for c in admin.committed_offsets(group))


def test_consumer_given_partitions_iteration_seek_and_long_poll(
    admin: Client, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(2)
    with Producer(admin.url) as producer:
        producer.send(topic, "p0", partition=0)
        producer.send(topic, "p1-a", partition=1)
    consumer = Consumer(admin.url, unique("g"), topic, partitions=[(topic, 1)])
    try:
        assert consumer.assignment() == [(topic, 1)]
        assert [m.value for m in consumer.poll(timeout=0.5)] == ["p1-a"]
        consumer.seek(topic, 1, 0)
        iterator = iter(consumer)
        assert next(iterator).value == "p1-a"
        # A long-poll returns as soon as a message arrives, well before its timeout.
        def send_late() -> None:
            with Producer(admin.url) as late_producer:
                late_producer.send(topic, "late", partition=1)

        timer = threading.Timer(0.3, send_late)
        started = time.monotonic()
        timer.start()
        late = consumer.poll(timeout=5.0)
        timer.join()
        assert [m.value for m in late] == ["late"] and time.monotonic() - started < 4
    finally:
        consumer.close()
    with pytest.raises(IllegalStateError):
        consumer.poll()


def test_consumer_isolation_levels(admin: Client, new_topic: Callable[..., str]) -> None:
    from sdk import TransactionalProducer

    topic = new_topic(1)
    with TransactionalProducer(admin.url, unique("tx")) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, "pending")
        with Consumer(admin.url, unique("g"), topic) as committed_reader:
            assert committed_reader.isolation_level == "read_committed"
            assert committed_reader.poll(timeout=0.2) == []
        with Consumer(admin.url, unique("g"), topic, isolation_level="read_uncommitted") as dirty_reader:
            assert [m.value for m in dirty_reader.poll(timeout=0.5)] == ["pending"]
        producer.abort_transaction()
    with pytest.raises(ValueError):
        Consumer(admin.url, "g", topic, isolation_level="dirty")


def test_consumer_latest_reset_skips_history(admin: Client, new_topic: Callable[..., str]) -> None:
    topic, group = new_topic(1), unique("g")
    with Producer(admin.url) as producer:
        producer.send(topic, "old")
        with Consumer(admin.url, group, topic, auto_offset_reset="latest") as consumer:
            assert consumer.group == group
            assert consumer.poll(timeout=0.1) == []
            producer.send(topic, "new")
            assert [m.value for m in consumer.poll(timeout=1.0)] == ["new"]
            consumer.commit({(topic, 0): 1})  # explicit offsets: re-read "new" next time
    with Consumer(admin.url, group, topic) as consumer:
        assert [m.value for m in consumer.poll(timeout=1.0)] == ["new"]
