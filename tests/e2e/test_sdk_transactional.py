"""Kafka-style TransactionalProducer against a real broker process."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest

from sdk import (
    NO_RETRY,
    BrokerUnavailableError,
    Client,
    Consumer,
    IllegalStateError,
    Producer,
    ProducerFencedError,
    RetryPolicy,
    TopicNotFoundError,
    TransactionalProducer,
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


def test_commit_makes_writes_and_offsets_visible_together(admin: Client, new_topic: Callable[..., str]) -> None:
    source, sink, group = new_topic(1), new_topic(3), unique("g")
    with Producer(admin.url) as producer:
        for i in range(3):
            producer.send(source, i)
    with TransactionalProducer(admin.url, unique("tx")) as producer:
        producer.init_transactions()
        assert producer.state is TransactionState.READY and producer.producer_epoch == 0
        producer.begin_transaction()
        assert producer.transaction_id is None  # lazily created at the first write
        partition, _ = producer.send(sink, {"order": 1}, key="order-1", headers={"h": "1"})
        assert partition == partition_for_key("order-1", 3)
        assert producer.transaction_id is not None
        producer.send(sink, b"\x00bytes", partition=2)
        producer.send_offsets_to_transaction({(source, 0): 3}, group)
        assert read_all(admin, sink) == [] and admin.committed_offsets(group) == []
        txn_id = producer.transaction_id
        producer.commit_transaction()
        assert admin.get_transaction(txn_id).state == "COMMITTED"
    values = [m.value for m in read_all(admin, sink)]
    assert {"order": 1} in values and b"\x00bytes" in values
    assert [(c.topic, c.partition, c.offset) for c in admin.committed_offsets(group)] == [(source, 0, 3)]


def _begin_requests(url: str) -> float:
    """POST /v1/transactions the broker has answered, from its /metrics."""
    metrics = httpx.get(f"{url}/metrics").text.splitlines()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics
        if line.startswith("halfmq_http_requests_total{") and 'method="POST"' in line and 'route="/v1/transactions"' in line
    )


def test_the_first_send_begins_the_transaction_without_a_request_of_its_own(
    admin: Client, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(2)
    with TransactionalProducer(admin.url, unique("tx")) as producer:
        producer.init_transactions()
        begins = _begin_requests(admin.url)
        with producer.transaction():
            producer.send(topic, "a", partition=0)
            producer.send(topic, "b", partition=1)
            txn_id = producer.transaction_id
            assert txn_id is not None
            open_txn = admin.get_transaction(txn_id)
            assert open_txn.state == "OPEN" and len(open_txn.partitions) == 2
        assert _begin_requests(admin.url) == begins
    assert admin.get_transaction(txn_id).state == "COMMITTED"
    assert sorted(m.value for m in read_all(admin, topic)) == ["a", "b"]


def test_abort_and_context_manager(admin: Client, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    with TransactionalProducer(admin.url, unique("tx")) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, "aborted")
        producer.abort_transaction()
        with producer.transaction():
            producer.send(topic, "committed")
        with pytest.raises(RuntimeError), producer.transaction():
            producer.send(topic, "rolled back by the exception")
            raise RuntimeError("boom")
        assert producer.state is TransactionState.READY
        with producer.transaction():
            pass  # an empty transaction needs no broker request
    assert [m.value for m in read_all(admin, topic)] == ["committed"]
    dirty = [m.value for m in read_all(admin, topic, isolation="read_uncommitted")]
    assert dirty == ["aborted", "committed", "rolled back by the exception"]


def test_state_errors_are_clear(admin: Client, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    producer = TransactionalProducer(admin.url, unique("tx"))
    with pytest.raises(IllegalStateError, match="init_transactions"):
        producer.begin_transaction()
    producer.init_transactions()
    with pytest.raises(IllegalStateError, match="init_transactions"):
        producer.init_transactions()
    with pytest.raises(IllegalStateError, match="outside a transaction"):
        producer.send(topic, 1)
    with pytest.raises(IllegalStateError, match="outside a transaction"):
        producer.send_offsets_to_transaction({(topic, 0): 0}, "g")
    producer.begin_transaction()
    producer.send(topic, 1)
    producer.commit_transaction()
    with pytest.raises(IllegalStateError, match="without an open transaction"):
        producer.commit_transaction()
    with pytest.raises(IllegalStateError, match="without an open transaction"):
        producer.abort_transaction()
    # A failed send makes the transaction abort-only.
    producer.begin_transaction()
    with pytest.raises(TopicNotFoundError):
        producer.send(unique("missing"), 1)
    with pytest.raises(IllegalStateError, match="abort_transaction"):
        producer.commit_transaction()
    producer.abort_transaction()
    producer.close()
    with pytest.raises(IllegalStateError, match="closed"):
        producer.begin_transaction()


def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction(
    admin: Client, new_topic: Callable[..., str]
) -> None:
    topic, transactional_id = new_topic(1), unique("tx")
    old = TransactionalProducer(admin.url, transactional_id)
    old.init_transactions()
    old.begin_transaction()
    old.send(topic, "zombie")
    with TransactionalProducer(admin.url, transactional_id) as new:
        new.init_transactions()
        assert new.producer_id == old.producer_id and new.producer_epoch == 1
        with pytest.raises(ProducerFencedError):
            old.send(topic, "zombie 2")
        assert old.state is TransactionState.FATAL_ERROR
        for use_after_fencing in (old.commit_transaction, old.abort_transaction, old.begin_transaction):
            with pytest.raises(ProducerFencedError, match="create a new producer"):
                use_after_fencing()
        with new.transaction():
            new.send(topic, "successor")
    old.close()
    assert [m.value for m in read_all(admin, topic)] == ["successor"]


def test_lost_answers_inside_a_transaction_never_duplicate(
    admin: Client, new_topic: Callable[..., str], faulty_proxy: FaultyProxy
) -> None:
    topic = new_topic(1)
    with TransactionalProducer(faulty_proxy.url, unique("tx"), retry=RetryPolicy(initial_backoff=0.01)) as producer:
        producer.init_transactions()
        faulty_proxy.fail("/messages", "lose_answer")
        faulty_proxy.fail("/commit", "lose_answer")
        with producer.transaction():
            producer.send(topic, "once")
            producer.send(topic, "twice")
    assert [m.value for m in read_all(admin, topic)] == ["once", "twice"]


def test_consume_transform_produce(admin: Client, new_topic: Callable[..., str]) -> None:
    source, sink, group = new_topic(2), new_topic(1), unique("ctp")
    with Producer(admin.url) as producer:
        for i in range(10):
            producer.send(source, i, key=str(i))
    with TransactionalProducer(admin.url, unique("ctp")) as producer, Consumer(admin.url, group, source) as consumer:
        producer.init_transactions()
        while batch := consumer.poll(timeout=0.5, max_messages=4):
            with producer.transaction():
                for message in batch:
                    producer.send(sink, message.value * 10)
                producer.send_offsets_to_transaction(consumer.positions(), group)
    assert sorted(m.value for m in read_all(admin, sink)) == [i * 10 for i in range(10)]
    assert sum(c.offset for c in admin.committed_offsets(group)) == 10


def test_a_transaction_that_outlives_its_timeout_is_aborted_and_fences_the_producer(
    admin: Client, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    with TransactionalProducer(admin.url, unique("tx"), transaction_timeout_ms=500) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, "too slow")
        txn_id = producer.transaction_id
        assert txn_id is not None
        deadline = time.monotonic() + 15
        while admin.get_transaction(txn_id).state == "OPEN" and time.monotonic() < deadline:
            time.sleep(0.1)
        with pytest.raises(ProducerFencedError, match="timed out"):
            producer.commit_transaction()
    assert read_all(admin, topic) == []


def test_a_write_with_unknown_outcome_is_aborted_under_a_new_epoch(
    admin: Client, new_topic: Callable[..., str], faulty_proxy: FaultyProxy
) -> None:
    topic = new_topic(1)
    with TransactionalProducer(faulty_proxy.url, unique("tx"), retry=NO_RETRY) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, "kept? no: aborted with the transaction")
        faulty_proxy.fail("/messages", "lose_answer")
        with pytest.raises(BrokerUnavailableError):
            producer.send(topic, "fate unknown")
        assert producer.state is TransactionState.ABORTABLE_ERROR
        with pytest.raises(IllegalStateError, match="abort_transaction"):
            producer.commit_transaction()
        producer.abort_transaction()
        assert producer.producer_epoch == 1  # sequence numbers restart under the new epoch
        with producer.transaction():
            producer.send(topic, "after the bump")
    assert [m.value for m in read_all(admin, topic)] == ["after the bump"]
