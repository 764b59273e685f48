"""Topics, produce, fetch and consumer groups through the real app, on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import threading
import time

from fastapi.testclient import TestClient

from half_store.domain.partitioner import partition_for_key
from tests.integration.conftest import create_topic, error_code, read_all


def test_topics_are_created_listed_and_described(client: TestClient) -> None:
    assert client.post("/v1/topics", json={"name": "orders", "partitions": 3}).json() == {"name": "orders", "partitions": 3}
    assert client.get("/v1/topics").json() == {"topics": [{"name": "orders", "partitions": 3}]}
    described = client.get("/v1/topics/orders").json()
    assert described["name"] == "orders"
    assert described["partitions"][2] == {
        "partition": 2, "log_start_offset": 0, "high_watermark": 0, "last_stable_offset": 0, "blocking_txn_id": None
    }


def test_topic_errors(client: TestClient) -> None:
    create_topic(client, "orders")
    again = client.post("/v1/topics", json={"name": "orders"})
    assert (again.status_code, error_code(again)) == (409, "TOPIC_EXISTS")
    for reserved in ("RMQ_SYS_TRANS_HALF_TOPIC", "__consumer_offsets", "TRANS_CHECK_MAX_TIME_TOPIC"):
        response = client.post("/v1/topics", json={"name": reserved})
        assert (response.status_code, error_code(response)) == (403, "RESERVED_TOPIC")
    bad = client.post("/v1/topics", json={"name": "no spaces/allowed"})
    assert (bad.status_code, error_code(bad)) == (422, "VALIDATION_ERROR")
    zero = client.post("/v1/topics", json={"name": "t", "partitions": 0})
    assert zero.status_code == 422
    missing = client.get("/v1/topics/nope")
    assert (missing.status_code, error_code(missing)) == (404, "TOPIC_NOT_FOUND")


def test_system_topics_are_hidden_and_not_writable(client: TestClient) -> None:
    assert client.get("/v1/topics").json()["topics"] == []
    names = {t["name"] for t in client.get("/v1/topics", params={"include_system": "true"}).json()["topics"]}
    assert {"RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC"} <= names
    response = client.post("/v1/topics/RMQ_SYS_TRANS_HALF_TOPIC/messages", json={"messages": [{"value": 1}]})
    assert (response.status_code, error_code(response)) == (403, "RESERVED_TOPIC")


def test_produce_routes_by_key_hash_explicit_partition_and_round_robin(client: TestClient) -> None:
    create_topic(client, "orders", 4)
    keys = [f"customer-{i}" for i in range(12)]
    offsets = client.post("/v1/topics/orders/messages", json={"messages": [{"key": k, "value": k} for k in keys]}).json()
    assert [o["partition"] for o in offsets["offsets"]] == [partition_for_key(k, 4) for k in keys]
    explicit = client.post("/v1/topics/orders/messages", json={"messages": [{"value": 1, "partition": 3}]}).json()
    assert explicit["offsets"][0]["partition"] == 3
    unkeyed = client.post("/v1/topics/orders/messages", json={"messages": [{"value": i} for i in range(8)]}).json()
    assert sorted(o["partition"] for o in unkeyed["offsets"]) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_offsets_are_dense_and_messages_round_trip(client: TestClient) -> None:
    create_topic(client, "t")
    binary = bytes(range(256))
    sent = [
        {"key": "a", "value": {"nested": [1, 2.5, None, "x"]}, "headers": {"trace": "1"}},
        {"value": None},
        {"value_base64": base64.b64encode(binary).decode()},
        {"key": None, "value": "plain"},
    ]
    response = client.post("/v1/topics/t/messages", json={"messages": sent})
    assert [o["offset"] for o in response.json()["offsets"]] == [0, 1, 2, 3]
    got = read_all(client, "t")
    assert [m["offset"] for m in got] == [0, 1, 2, 3]
    assert got[0]["value"] == {"nested": [1, 2.5, None, "x"]} and got[0]["headers"] == {"trace": "1"}
    assert got[1]["value"] is None and "value_base64" not in got[1]
    assert base64.b64decode(got[2]["value_base64"]) == binary and "value" not in got[2]
    assert got[3]["key"] is None and got[3]["topic"] == "t" and got[3]["timestamp"] > 0


def test_a_batch_is_all_or_nothing(client: TestClient) -> None:
    create_topic(client, "t", 2)
    response = client.post("/v1/topics/t/messages", json={"messages": [{"value": 1}, {"value": 2, "partition": 7}]})
    assert (response.status_code, error_code(response)) == (404, "PARTITION_NOT_FOUND")
    assert [p["high_watermark"] for p in client.get("/v1/topics/t").json()["partitions"]] == [0, 0]


def test_fetch_pages_and_range_errors(client: TestClient) -> None:
    create_topic(client, "t")
    client.post("/v1/topics/t/messages", json={"messages": [{"value": i} for i in range(10)]})
    page = client.get("/v1/topics/t/partitions/0/messages", params={"offset": 2, "max_messages": 3}).json()
    assert [m["value"] for m in page["messages"]] == [2, 3, 4]
    assert (page["next_offset"], page["high_watermark"], page["last_stable_offset"]) == (5, 10, 10)
    at_end = client.get("/v1/topics/t/partitions/0/messages", params={"offset": 10}).json()
    assert at_end["messages"] == [] and at_end["next_offset"] == 10
    past = client.get("/v1/topics/t/partitions/0/messages", params={"offset": 11})
    assert (past.status_code, error_code(past)) == (416, "OFFSET_OUT_OF_RANGE")
    no_partition = client.get("/v1/topics/t/partitions/1/messages")
    assert (no_partition.status_code, error_code(no_partition)) == (404, "PARTITION_NOT_FOUND")
    bad_isolation = client.get("/v1/topics/t/partitions/0/messages", params={"isolation": "dirty"})
    assert bad_isolation.status_code == 422


def test_long_poll_wakes_when_a_message_arrives(client: TestClient) -> None:
    create_topic(client, "t")

    def produce_later() -> None:
        time.sleep(0.3)
        client.post("/v1/topics/t/messages", json={"messages": [{"value": "late"}]})

    writer = threading.Thread(target=produce_later)
    started = time.monotonic()
    writer.start()
    body = client.get("/v1/topics/t/partitions/0/messages", params={"offset": 0, "max_wait_ms": 10_000}).json()
    writer.join()
    assert [m["value"] for m in body["messages"]] == ["late"]
    assert time.monotonic() - started < 9  # woke on the message, not at the deadline


def test_long_poll_returns_empty_after_the_wait(client: TestClient) -> None:
    create_topic(client, "t")
    started = time.monotonic()
    body = client.get("/v1/topics/t/partitions/0/messages", params={"max_wait_ms": 300}).json()
    assert body["messages"] == [] and time.monotonic() - started >= 0.3


def test_group_offsets_with_lag(client: TestClient) -> None:
    create_topic(client, "t", 2)
    client.post("/v1/topics/t/messages", json={"messages": [{"value": i, "partition": 0} for i in range(5)]})
    committed = client.post(
        "/v1/groups/g/offsets",
        json={
            "offsets": [{"topic": "t", "partition": 0, "offset": 3, "metadata": "m"}, {"topic": "t", "partition": 1, "offset": 0}]
        },
    )
    assert committed.status_code == 200
    at_log_start = {"log_start_offset": 0, "below_log_start": False}  # nothing deleted by retention
    assert client.get("/v1/groups/g/offsets").json()["offsets"] == [
        {"topic": "t", "partition": 0, "offset": 3, "metadata": "m", "lag": 2, **at_log_start},
        {"topic": "t", "partition": 1, "offset": 0, "metadata": None, "lag": 0, **at_log_start},
    ]
    assert 'halfmq_consumer_group_lag{group="g",partition="0",topic="t"} 2.0' in client.get("/metrics").text
    ahead = client.post("/v1/groups/g/offsets", json={"offsets": [{"topic": "t", "partition": 0, "offset": 6}]})
    assert (ahead.status_code, error_code(ahead)) == (416, "OFFSET_OUT_OF_RANGE")
    unknown = client.post("/v1/groups/g/offsets", json={"offsets": [{"topic": "nope", "partition": 0, "offset": 0}]})
    assert unknown.status_code == 404
    assert client.get("/v1/groups/nobody/offsets").json() == {"offsets": []}


def test_idempotent_produce_deduplicates_retries(client: TestClient) -> None:
    create_topic(client, "t")
    producer = client.post("/v1/producers", json={}).json()
    stamp = {"producer_id": producer["producer_id"], "producer_epoch": producer["producer_epoch"]}
    url = "/v1/topics/t/partitions/0/messages"
    first = client.post(url, json={"messages": [{"value": 1}, {"value": 2}], "base_sequence": 0, **stamp}).json()
    assert first == {"offsets": [{"partition": 0, "offset": 0}, {"partition": 0, "offset": 1}], "duplicate": False}
    retry = client.post(url, json={"messages": [{"value": 1}, {"value": 2}], "base_sequence": 0, **stamp}).json()
    assert retry == {**first, "duplicate": True}
    client.post(url, json={"messages": [{"value": 3}], "base_sequence": 2, **stamp})
    older_retry = client.post(url, json={"messages": [{"value": 1}, {"value": 2}], "base_sequence": 0, **stamp}).json()
    assert older_retry["duplicate"] is True and older_retry["offsets"][0]["offset"] == 0
    gap = client.post(url, json={"messages": [{"value": 9}], "base_sequence": 7, **stamp})
    assert (gap.status_code, error_code(gap)) == (409, "OUT_OF_ORDER_SEQUENCE")
    assert [m["value"] for m in read_all(client, "t")] == [1, 2, 3]


def test_idempotent_produce_refuses_unknown_and_fenced_producers(client: TestClient) -> None:
    create_topic(client, "t")
    url = "/v1/topics/t/partitions/0/messages"
    unknown = client.post(url, json={"messages": [{"value": 1}], "producer_id": 999, "producer_epoch": 0, "base_sequence": 0})
    assert (unknown.status_code, error_code(unknown)) == (404, "UNKNOWN_PRODUCER_ID")
    first = client.post("/v1/producers", json={"transactional_id": "tx-a"}).json()
    second = client.post("/v1/producers", json={"transactional_id": "tx-a"}).json()
    assert second == {"producer_id": first["producer_id"], "producer_epoch": first["producer_epoch"] + 1}
    fenced = client.post(url, json={"messages": [{"value": 1}], "base_sequence": 0, **first})
    assert (fenced.status_code, error_code(fenced)) == (409, "PRODUCER_FENCED")
    accepted = client.post(url, json={"messages": [{"value": 1}], "base_sequence": 0, **second})
    assert accepted.status_code == 200


def test_producer_state_survives_a_restart(database_url: str) -> None:
    from app.main import create_app
    from tests.integration.conftest import make_settings

    settings = make_settings(database_url)
    with TestClient(create_app(settings)) as first_run:
        create_topic(first_run, "t")
        producer = first_run.post("/v1/producers", json={}).json()
        batch = {"messages": [{"value": "once"}], "base_sequence": 0, **producer}
        first_run.post("/v1/topics/t/partitions/0/messages", json=batch)
    with TestClient(create_app(settings)) as second_run:
        retry = second_run.post("/v1/topics/t/partitions/0/messages", json=batch).json()
        assert retry["duplicate"] is True
        assert [m["value"] for m in read_all(second_run, "t")] == ["once"]


def test_a_caught_up_group_has_no_lag_behind_transaction_markers(client: TestClient) -> None:
    """Commit and abort markers take offsets but are never read: they are not lag (list, offsets, /metrics)."""
    create_topic(client, "t")
    for ending in ("commit", "abort", "commit"):
        txn = client.post("/v1/transactions", json={}).json()["txn_id"]
        batch = {"messages": [{"value": 1}, {"value": 2}], "txn_id": txn}
        assert client.post("/v1/topics/t/partitions/0/messages", json=batch).status_code == 200
        assert client.post(f"/v1/transactions/{txn}/{ending}").status_code == 200
    read = client.get("/v1/topics/t/partitions/0/messages").json()
    assert [m["offset"] for m in read["messages"]] == [0, 1, 6, 7] and read["high_watermark"] == 9
    last_read = read["messages"][-1]["offset"] + 1  # 8: all that a consumer saw, the marker at 8 left behind
    client.post("/v1/groups/caught-up/offsets", json={"offsets": [{"topic": "t", "partition": 0, "offset": last_read}]})
    client.post("/v1/groups/behind/offsets", json={"offsets": [{"topic": "t", "partition": 0, "offset": 0}]})
    offsets = {g: client.get(f"/v1/groups/{g}/offsets").json()["offsets"][0]["lag"] for g in ("caught-up", "behind")}
    # behind: 9 offsets, 3 of them markers (aborted records still count: they take a read to skip).
    assert offsets == {"caught-up": 0, "behind": 6}
    listed = {g["group"]: g["lag"] for g in client.get("/v1/groups").json()["groups"]}
    assert listed == offsets
    metrics = client.get("/metrics").text
    assert 'halfmq_consumer_group_lag{group="caught-up",partition="0",topic="t"} 0.0' in metrics
    assert 'halfmq_consumer_group_lag{group="behind",partition="0",topic="t"} 6.0' in metrics


def test_offsets_for_a_time(client: TestClient) -> None:
    """Per partition the first offset written at or after a time; the end where nothing is (Kafka's offsets-for-times)."""
    create_topic(client, "timed", 2)
    stamped = [{"value": n, "partition": 0, "timestamp": t} for n, t in enumerate((1_000, 2_000, 3_000))]
    client.post("/v1/topics/timed/messages", json={"messages": [*stamped, {"value": 9, "partition": 1, "timestamp": 1_000}]})

    def at(timestamp: int, **params: str) -> list[tuple[int, int, int | None]]:
        answer = client.get("/v1/topics/timed/offsets", params={"timestamp": timestamp, **params})
        assert answer.status_code == 200, answer.text
        return [(p["partition"], p["offset"], p["timestamp"]) for p in answer.json()["partitions"]]

    assert at(0) == [(0, 0, 1_000), (1, 0, 1_000)]
    assert at(1_500) == [(0, 1, 2_000), (1, 1, None)]  # partition 1 has nothing that late: its end
    assert at(3_000) == [(0, 2, 3_000), (1, 1, None)]
    txn = client.post("/v1/transactions", json={}).json()["txn_id"]
    pending = {"messages": [{"value": "p", "timestamp": 5_000}], "txn_id": txn}
    client.post("/v1/topics/timed/partitions/1/messages", json=pending)
    assert at(4_000) == [(0, 3, None), (1, 1, None)]  # read_committed: the open transaction's message is not there yet
    assert at(4_000, isolation="read_uncommitted")[1] == (1, 1, 5_000)
    missing = client.get("/v1/topics/nope/offsets", params={"timestamp": 0})
    assert (missing.status_code, error_code(missing)) == (404, "TOPIC_NOT_FOUND")
    negative = client.get("/v1/topics/timed/offsets", params={"timestamp": -1})
    assert (negative.status_code, error_code(negative)) == (422, "VALIDATION_ERROR")
