"""Mode 2 through the real app: transactions across topics and partitions, LSO, fencing, timeouts."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.broker import Broker
from half_store.domain.txn_state import TxnState, prepare_state, transition
from half_store.storage import txn_store
from tests.integration.conftest import (
    create_topic,
    error_code,
    one_group_commit,
    read_all,
)


@pytest.fixture
def topics(client: TestClient) -> TestClient:
    create_topic(client, "a", 2)
    create_topic(client, "b", 1)
    return client


def begin(client: TestClient, **body: Any) -> str:
    response = client.post("/v1/transactions", json=body)
    assert response.status_code == 201, response.text
    return response.json()["txn_id"]  # type: ignore[no-any-return]


def send(client: TestClient, topic: str, partition: int, txn_id: str | None, *values: Any, **stamp: Any) -> Any:
    body: dict[str, Any] = {"messages": [{"value": v} for v in values], **stamp}
    if txn_id:
        body["txn_id"] = txn_id
    return client.post(f"/v1/topics/{topic}/partitions/{partition}/messages", json=body)


def prepare_only(broker: Broker, txn_id: str, *, commit: bool) -> None:
    """Phase one of an end without phase two, as a crash between the two leaves a transaction."""
    move = transition(TxnState.OPEN, prepare_state(commit))
    broker.store.writer.run_sync(lambda conn: txn_store.transition(conn, txn_id, move))


def lso(client: TestClient, topic: str, partition: int) -> tuple[int, int]:
    p = client.get(f"/v1/topics/{topic}").json()["partitions"][partition]
    return p["last_stable_offset"], p["high_watermark"]


def test_a_transaction_is_atomic_across_topics_and_partitions(topics: TestClient) -> None:
    txn = begin(topics)
    send(topics, "a", 0, txn, "a0")
    send(topics, "a", 1, txn, "a1")
    send(topics, "b", 0, txn, "b0")
    assert read_all(topics, "a", 0) == [] and read_all(topics, "b", 0) == []
    assert [m["value"] for m in read_all(topics, "a", 0, "read_uncommitted")] == ["a0"]
    described = topics.get(f"/v1/transactions/{txn}").json()
    assert described["state"] == "OPEN"
    assert sorted((p["topic"], p["partition"]) for p in described["partitions"]) == [("a", 0), ("a", 1), ("b", 0)]
    assert topics.post(f"/v1/transactions/{txn}/commit").json() == {"txn_id": txn, "state": "COMMITTED"}
    assert [m["value"] for t, p in (("a", 0), ("a", 1), ("b", 0)) for m in read_all(topics, t, p)] == ["a0", "a1", "b0"]
    assert lso(topics, "a", 0) == (2, 2)  # the message and its commit marker


def test_an_open_transaction_holds_back_only_its_partitions(topics: TestClient) -> None:
    send(topics, "a", 0, None, "before")
    txn = begin(topics)
    send(topics, "a", 0, txn, "inside")
    send(topics, "a", 0, None, "after")
    send(topics, "a", 1, None, "elsewhere")
    assert lso(topics, "a", 0) == (1, 3)
    assert [m["value"] for m in read_all(topics, "a", 0)] == ["before"]
    assert [m["value"] for m in read_all(topics, "a", 1)] == ["elsewhere"]
    topics.post(f"/v1/transactions/{txn}/commit")
    assert [m["value"] for m in read_all(topics, "a", 0)] == ["before", "inside", "after"]


def test_aborted_messages_are_skipped_by_read_committed_only(topics: TestClient) -> None:
    kept, dropped = begin(topics), begin(topics)  # Pulsar style: many open at once
    send(topics, "a", 0, kept, "k1")
    send(topics, "a", 0, dropped, "d1")
    send(topics, "a", 0, None, "plain")
    send(topics, "a", 0, kept, "k2")
    assert topics.post(f"/v1/transactions/{dropped}/abort").json()["state"] == "ABORTED"
    assert lso(topics, "a", 0)[0] == 0  # `kept` is still open
    topics.post(f"/v1/transactions/{kept}/commit")
    assert [m["value"] for m in read_all(topics, "a", 0)] == ["k1", "plain", "k2"]
    assert [m["value"] for m in read_all(topics, "a", 0, "read_uncommitted")] == ["k1", "d1", "plain", "k2"]
    page = topics.get("/v1/topics/a/partitions/0/messages", params={"offset": 0, "max_messages": 2}).json()
    assert [m["value"] for m in page["messages"]] == ["k1"] and page["next_offset"] == 2


def test_end_requests_are_idempotent_and_final(topics: TestClient) -> None:
    txn = begin(topics)
    send(topics, "a", 0, txn, 1)
    assert topics.post(f"/v1/transactions/{txn}/commit").json()["state"] == "COMMITTED"
    assert topics.post(f"/v1/transactions/{txn}/commit").json()["state"] == "COMMITTED"
    abort = topics.post(f"/v1/transactions/{txn}/abort")
    assert (abort.status_code, error_code(abort)) == (409, "ALREADY_RESOLVED")
    late_write = send(topics, "a", 0, txn, 2)
    assert (late_write.status_code, error_code(late_write)) == (409, "INVALID_TXN_STATE")
    assert [m["value"] for m in read_all(topics, "a", 0)] == [1]


def test_offsets_committed_in_a_transaction_apply_only_on_commit(topics: TestClient) -> None:
    send(topics, "a", 0, None, "in1", "in2")
    offsets = {"group": "g", "offsets": [{"topic": "a", "partition": 0, "offset": 2}]}
    aborted = begin(topics)
    assert topics.post(f"/v1/transactions/{aborted}/offsets", json=offsets).status_code == 200
    topics.post(f"/v1/transactions/{aborted}/abort")
    assert topics.get("/v1/groups/g/offsets").json()["offsets"] == []
    committed = begin(topics)
    send(topics, "b", 0, committed, "out")
    topics.post(f"/v1/transactions/{committed}/offsets", json=offsets)
    topics.post(f"/v1/transactions/{committed}/commit")
    assert [(o["topic"], o["offset"]) for o in topics.get("/v1/groups/g/offsets").json()["offsets"]] == [("a", 2)]


def test_a_new_epoch_fences_the_old_producer_and_aborts_its_transaction(topics: TestClient) -> None:
    old = topics.post("/v1/producers", json={"transactional_id": "etl"}).json()
    txn = begin(topics, **old)
    assert send(topics, "a", 0, txn, "zombie", base_sequence=0, **old).status_code == 200
    second_begin = topics.post("/v1/transactions", json=old)
    assert (second_begin.status_code, error_code(second_begin)) == (409, "CONCURRENT_TRANSACTIONS")
    new = topics.post("/v1/producers", json={"transactional_id": "etl"}).json()
    assert new == {"producer_id": old["producer_id"], "producer_epoch": old["producer_epoch"] + 1}
    assert topics.get(f"/v1/transactions/{txn}").json()["state"] == "ABORTED"
    for response in (
        topics.post(f"/v1/transactions/{txn}/commit"),
        topics.post("/v1/transactions", json=old),
        send(topics, "a", 0, None, "stale", base_sequence=1, **old),
    ):
        assert (response.status_code, error_code(response)) == (409, "PRODUCER_FENCED"), response.text
    fresh = begin(topics, **new)
    into_fresh = send(topics, "a", 0, fresh, "zombie", base_sequence=1, **old)  # the new epoch's open transaction
    assert (into_fresh.status_code, error_code(into_fresh)) == (409, "PRODUCER_FENCED"), into_fresh.text
    send(topics, "a", 0, fresh, "fresh", base_sequence=0, **new)
    topics.post(f"/v1/transactions/{fresh}/commit")
    assert [m["value"] for m in read_all(topics, "a", 0)] == ["fresh"]


def test_init_finishes_a_transaction_that_was_preparing_to_commit(topics: TestClient, broker: Broker) -> None:
    producer = topics.post("/v1/producers", json={"transactional_id": "etl"}).json()
    txn = begin(topics, **producer)
    send(topics, "a", 0, txn, "survives")
    # A crash between the two commit phases leaves the transaction in PREPARE_COMMIT.
    prepare_only(broker, txn, commit=True)
    topics.post("/v1/producers", json={"transactional_id": "etl"})
    assert topics.get(f"/v1/transactions/{txn}").json()["state"] == "COMMITTED"
    assert [m["value"] for m in read_all(topics, "a", 0)] == ["survives"]


def test_prepared_transactions_are_completed_by_recovery(topics: TestClient, broker: Broker) -> None:
    commit, abort = begin(topics), begin(topics)
    send(topics, "a", 0, commit, "yes")
    send(topics, "a", 1, abort, "no")
    prepare_only(broker, commit, commit=True)
    prepare_only(broker, abort, commit=False)
    assert topics.portal.call(broker.coordinator.complete_prepared) == 2  # type: ignore[union-attr]
    assert [topics.get(f"/v1/transactions/{t}").json()["state"] for t in (commit, abort)] == ["COMMITTED", "ABORTED"]
    assert [m["value"] for m in read_all(topics, "a", 0)] == ["yes"] and read_all(topics, "a", 1) == []


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(topics: TestClient, broker: Broker) -> None:
    producer = topics.post("/v1/producers", json={"transactional_id": "slow"}).json()
    txn = begin(topics, timeout_ms=600, **producer)
    assert send(topics, "a", 0, txn, "too late").status_code == 200
    time.sleep(0.7)
    refused = send(topics, "a", 0, txn, "even later")
    assert (refused.status_code, error_code(refused)) == (409, "INVALID_TXN_STATE")
    assert topics.portal.call(broker.coordinator.abort_expired) == 1  # type: ignore[union-attr]
    assert topics.get(f"/v1/transactions/{txn}").json()["state"] == "TIMED_OUT"
    commit = topics.post(f"/v1/transactions/{txn}/commit")
    assert (commit.status_code, error_code(commit)) == (409, "PRODUCER_FENCED")
    assert topics.post(f"/v1/transactions/{txn}/abort").json()["state"] == "TIMED_OUT"
    assert read_all(topics, "a", 0) == [] and lso(topics, "a", 0) == (2, 2)


def test_a_commit_after_the_timeout_loses_even_before_the_timeout_job_runs(topics: TestClient) -> None:
    producer = topics.post("/v1/producers", json={"transactional_id": "late"}).json()
    bound, free = begin(topics, timeout_ms=150, **producer), begin(topics, timeout_ms=150)
    send(topics, "a", 0, bound, "bound")
    send(topics, "a", 1, free, "free")
    time.sleep(0.25)
    late_bound = topics.post(f"/v1/transactions/{bound}/commit")
    late_free = topics.post(f"/v1/transactions/{free}/commit")
    assert (late_bound.status_code, error_code(late_bound)) == (409, "PRODUCER_FENCED")
    assert (late_free.status_code, error_code(late_free)) == (409, "ALREADY_RESOLVED")
    assert [topics.get(f"/v1/transactions/{t}").json()["state"] for t in (bound, free)] == ["TIMED_OUT", "TIMED_OUT"]
    assert read_all(topics, "a", 0) == [] and read_all(topics, "a", 1) == []


def test_transaction_timeouts_are_bounded(topics: TestClient) -> None:
    too_long = topics.post("/v1/transactions", json={"timeout_ms": 900_001})
    assert (too_long.status_code, error_code(too_long)) == (422, "INVALID_TRANSACTION_TIMEOUT")
    producer = topics.post("/v1/producers", json={"transactional_id": "x", "transaction_timeout_ms": 10**9})
    assert (producer.status_code, error_code(producer)) == (422, "INVALID_TRANSACTION_TIMEOUT")
    assert topics.post("/v1/transactions", json={"timeout_ms": 1000}).json()["timeout_ms"] == 1000
    half = topics.post("/v1/transactions", json={"producer_id": 1})
    assert (half.status_code, error_code(half)) == (422, "VALIDATION_ERROR")


def test_a_retried_commit_completes_a_prepared_transaction(topics: TestClient, broker: Broker) -> None:
    txn = begin(topics)
    send(topics, "a", 0, txn, "yes")
    prepare_only(broker, txn, commit=True)
    assert topics.post(f"/v1/transactions/{txn}/commit").json()["state"] == "COMMITTED"
    assert [m["value"] for m in read_all(topics, "a", 0)] == ["yes"]


def test_sequences_stay_idempotent_inside_a_transaction(topics: TestClient) -> None:
    producer = topics.post("/v1/producers", json={"transactional_id": "idem"}).json()
    txn = begin(topics, **producer)
    first = send(topics, "a", 0, txn, "x", base_sequence=0, **producer).json()
    retry = send(topics, "a", 0, txn, "x", base_sequence=0, **producer).json()
    assert retry == {**first, "duplicate": True}
    topics.post(f"/v1/transactions/{txn}/commit")
    assert [m["value"] for m in read_all(topics, "a", 0)] == ["x"]


def test_unused_transactional_ids_expire(database_url: str) -> None:
    from app.main import create_app
    from half_store.services.retention import Retention
    from tests.integration.conftest import make_settings

    settings = make_settings(database_url, transactional_id_expiration_ms=1)
    with TestClient(create_app(settings)) as client:
        first = client.post("/v1/producers", json={"transactional_id": "old"}).json()
        busy = client.post("/v1/producers", json={"transactional_id": "busy"}).json()
        begin(client, **busy)  # an open transaction keeps its id alive
        time.sleep(0.01)
        broker: Broker = client.app.state.broker  # type: ignore[attr-defined]
        report = client.portal.call(Retention(broker.store, settings).run_once)  # type: ignore[union-attr]
        assert report.expired_producers == 1
        again = client.post("/v1/producers", json={"transactional_id": "old"}).json()
        assert again["producer_epoch"] == 0 and again["producer_id"] != first["producer_id"]
        busy_again = client.post("/v1/producers", json={"transactional_id": "busy"}).json()
        assert busy_again == {"producer_id": busy["producer_id"], "producer_epoch": busy["producer_epoch"] + 1}


# -- writes that share a group commit ------------------------------------------------------
# Begins, transactional produces and ends that reach the writer together are written
# together (one insert, one offset allocation per partition, one marker append). Each
# transaction must still come out as if it had been alone.


def values(client: TestClient, topic: str, partition: int, isolation: str = "read_committed") -> list[Any]:
    return [m["value"] for m in read_all(client, topic, partition, isolation)]


def test_transactions_sharing_group_commits_end_as_each_asked(topics: TestClient) -> None:
    with ThreadPoolExecutor(12) as pool:
        with one_group_commit(topics) as queued:
            begun = [pool.submit(begin, topics) for _ in range(6)]
            queued(6)
        txns = [future.result() for future in begun]
        assert len(set(txns)) == 6
        with one_group_commit(topics) as queued:
            sent = [pool.submit(send, topics, "a", n % 2, txn, f"a{n}") for n, txn in enumerate(txns)]
            sent += [pool.submit(send, topics, "b", 0, txn, f"b{n}") for n, txn in enumerate(txns)]
            queued(12)
        assert [future.result().status_code for future in sent] == [200] * 12
        assert sorted(values(topics, "b", 0, "read_uncommitted")) == [f"b{n}" for n in range(6)]
        with one_group_commit(topics) as queued:
            ended = [
                pool.submit(topics.post, f"/v1/transactions/{txn}/{'commit' if n % 2 == 0 else 'abort'}")
                for n, txn in enumerate(txns)
            ]
            queued(6)
    assert [future.result().json()["state"] for future in ended] == ["COMMITTED", "ABORTED"] * 3
    assert sorted(values(topics, "a", 0) + values(topics, "a", 1)) == ["a0", "a2", "a4"]
    assert sorted(values(topics, "b", 0)) == ["b0", "b2", "b4"]
    for topic, partition in (("a", 0), ("a", 1), ("b", 0)):
        stable, high = lso(topics, topic, partition)
        assert stable == high  # every marker written: nothing holds read_committed readers back
    for n, txn in enumerate(txns):
        assert topics.get(f"/v1/transactions/{txn}").json()["state"] == ("COMMITTED" if n % 2 == 0 else "ABORTED")


def test_a_refused_write_in_a_shared_group_commit_fails_alone(topics: TestClient) -> None:
    open_txn, ended_txn = begin(topics), begin(topics)
    assert topics.post(f"/v1/transactions/{ended_txn}/commit").status_code == 200
    with ThreadPoolExecutor(4) as pool:
        with one_group_commit(topics) as queued:
            kept = pool.submit(send, topics, "a", 0, open_txn, "kept")
            refused = pool.submit(send, topics, "a", 1, ended_txn, "refused")
            queued(2)
        assert kept.result().status_code == 200
        assert (refused.result().status_code, error_code(refused.result())) == (409, "INVALID_TXN_STATE")
        with one_group_commit(topics) as queued:
            commits = [pool.submit(topics.post, f"/v1/transactions/{open_txn}/commit") for _ in range(2)]
            wrong = pool.submit(topics.post, f"/v1/transactions/{ended_txn}/abort")
            queued(3)
    assert [c.result().json()["state"] for c in commits] == ["COMMITTED", "COMMITTED"]  # a repeated commit answers the same
    assert (wrong.result().status_code, error_code(wrong.result())) == (409, "ALREADY_RESOLVED")
    assert values(topics, "a", 0) == ["kept"] and values(topics, "a", 1, "read_uncommitted") == []


def test_idempotent_batches_sharing_a_group_commit_are_checked_each(topics: TestClient) -> None:
    stamp = topics.post("/v1/producers", json={}).json()
    first = send(topics, "a", 0, None, "x", base_sequence=0, **stamp).json()
    with ThreadPoolExecutor(4) as pool, one_group_commit(topics) as queued:
        retry = pool.submit(send, topics, "a", 0, None, "x", base_sequence=0, **stamp)
        other_partition = pool.submit(send, topics, "a", 1, None, "y", base_sequence=0, **stamp)
        other_topic = pool.submit(send, topics, "b", 0, None, "z", base_sequence=0, **stamp)
        gap = pool.submit(send, topics, "a", 0, None, "late", base_sequence=3, **stamp)
        queued(4)
    assert retry.result().json() == {**first, "duplicate": True}
    assert other_partition.result().json()["offsets"] == [{"partition": 1, "offset": 0}]
    assert other_topic.result().json()["offsets"] == [{"partition": 0, "offset": 0}]
    assert (gap.result().status_code, error_code(gap.result())) == (409, "OUT_OF_ORDER_SEQUENCE")
    assert values(topics, "a", 0) == ["x"] and values(topics, "a", 1) == ["y"] and values(topics, "b", 0) == ["z"]


# -- a transactional produce begins the producer's transaction (KIP-890) -------------------


def transactional(client: TestClient, topic: str, partition: int, value: Any, sequence: int, producer: dict[str, Any]) -> Any:
    return send(client, topic, partition, None, value, transactional=True, base_sequence=sequence, **producer)


def test_a_transactional_produce_begins_its_producers_transaction_and_the_next_ones_join_it(topics: TestClient) -> None:
    producer = topics.post("/v1/producers", json={"transactional_id": "implicit"}).json()
    first = transactional(topics, "a", 0, "x", 0, producer)
    assert first.status_code == 200, first.text
    txn = first.json()["txn_id"]
    assert transactional(topics, "b", 0, "y", 0, producer).json()["txn_id"] == txn
    assert transactional(topics, "a", 0, "x", 0, producer).json() == {**first.json(), "duplicate": True}  # a retry
    described = topics.get(f"/v1/transactions/{txn}").json()
    assert described["state"] == "OPEN" and described["producer_id"] == producer["producer_id"]
    assert sorted((p["topic"], p["partition"]) for p in described["partitions"]) == [("a", 0), ("b", 0)]
    assert values(topics, "a", 0) == [] and lso(topics, "a", 0) == (0, 1)
    assert topics.post(f"/v1/transactions/{txn}/commit").json()["state"] == "COMMITTED"
    assert values(topics, "a", 0) == ["x"] and values(topics, "b", 0) == ["y"]
    after = transactional(topics, "a", 0, "z", 1, producer).json()
    assert after["txn_id"] != txn  # the committed one is over: this write began the next
    assert topics.post(f"/v1/transactions/{after['txn_id']}/abort").json()["state"] == "ABORTED"
    assert values(topics, "a", 0) == ["x"]


def test_a_transactional_produce_into_a_transaction_past_its_timeout_is_refused_before_the_timeout_job(
    topics: TestClient,
) -> None:
    producer = topics.post("/v1/producers", json={"transactional_id": "slow", "transaction_timeout_ms": 150}).json()
    txn = transactional(topics, "a", 0, "x", 0, producer).json()["txn_id"]
    time.sleep(0.25)
    late = transactional(topics, "a", 0, "y", 1, producer)
    assert (late.status_code, error_code(late)) == (409, "INVALID_TXN_STATE"), late.text
    assert "passed its timeout" in late.json()["error"]["message"]
    assert topics.get(f"/v1/transactions/{txn}").json()["partitions"] == [{"topic": "a", "partition": 0}]
    assert lso(topics, "a", 0) == (0, 1)  # the late write was not appended


def test_transactional_produces_of_one_producer_in_one_group_commit_begin_one_transaction(topics: TestClient) -> None:
    producer = topics.post("/v1/producers", json={"transactional_id": "together"}).json()
    with ThreadPoolExecutor(3) as pool, one_group_commit(topics) as queued:
        sent = [pool.submit(transactional, topics, topic, 0, topic, 0, producer) for topic in ("a", "b")]
        queued(2)
    assert len({future.result().json()["txn_id"] for future in sent}) == 1
    txn = sent[0].result().json()["txn_id"]
    assert len(topics.get(f"/v1/transactions/{txn}").json()["partitions"]) == 2


def test_a_transactional_produce_needs_a_producer_and_no_txn_id(topics: TestClient) -> None:
    producer = topics.post("/v1/producers", json={"transactional_id": "needs"}).json()
    txn = begin(topics, **producer)
    without_producer = send(topics, "a", 0, None, "x", transactional=True)
    with_txn_id_too = send(topics, "a", 0, txn, "x", transactional=True, **producer)
    for response in (without_producer, with_txn_id_too):
        assert (response.status_code, error_code(response)) == (422, "VALIDATION_ERROR")
    assert values(topics, "a", 0, "read_uncommitted") == []


def test_a_transactional_produce_is_refused_to_a_fenced_producer_and_while_its_transaction_ends(
    topics: TestClient, broker: Broker
) -> None:
    old = topics.post("/v1/producers", json={"transactional_id": "busy"}).json()
    current = topics.post("/v1/producers", json={"transactional_id": "busy"}).json()
    fenced = transactional(topics, "a", 0, "old", 0, old)
    assert (fenced.status_code, error_code(fenced)) == (409, "PRODUCER_FENCED")
    txn = transactional(topics, "a", 0, "x", 0, current).json()["txn_id"]
    prepare_only(broker, txn, commit=True)
    ending = transactional(topics, "a", 1, "y", 0, current)
    assert (ending.status_code, error_code(ending)) == (409, "CONCURRENT_TRANSACTIONS")
    assert values(topics, "a", 1, "read_uncommitted") == []
