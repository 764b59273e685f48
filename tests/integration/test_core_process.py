"""The broker with its services in a core process (how ``halfmq serve`` runs), through the HTTP API.

The rest of the integration suite runs the services in the test's own process; these
tests check that the same requests give the same answers and errors across the
process boundary.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.integration.conftest import create_topic, error_code, make_settings, read_all


@pytest.fixture
def client(database_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings(database_url, core_process=True))) as test_client:
        yield test_client


def test_produced_messages_are_fetched_back_in_order(client: TestClient) -> None:
    create_topic(client, "orders", partitions=2)
    messages = [{"value": {"n": n}, "partition": 1} for n in range(5)]
    produced = client.post("/v1/topics/orders/messages", json={"messages": messages})
    assert produced.status_code == 200
    assert [o["offset"] for o in produced.json()["offsets"]] == [0, 1, 2, 3, 4]
    assert [m["value"]["n"] for m in read_all(client, "orders", partition=1)] == [0, 1, 2, 3, 4]


def test_errors_keep_their_status_and_code(client: TestClient) -> None:
    create_topic(client, "t")
    again = client.post("/v1/topics", json={"name": "t", "partitions": 1})
    assert (again.status_code, error_code(again)) == (409, "TOPIC_EXISTS")
    missing = client.post("/v1/topics/nope/messages", json={"messages": [{"value": 1}]})
    assert (missing.status_code, error_code(missing)) == (404, "TOPIC_NOT_FOUND")
    reserved = client.post("/v1/topics", json={"name": "RMQ_SYS_TRANS_HALF_TOPIC", "partitions": 1})
    assert (reserved.status_code, error_code(reserved)) == (403, "RESERVED_TOPIC")
    no_partition = client.get("/v1/topics/t/partitions/7/messages")
    assert (no_partition.status_code, error_code(no_partition)) == (404, "PARTITION_NOT_FOUND")


def test_unstorable_strings_are_refused_and_nothing_is_stored(client: TestClient) -> None:
    create_topic(client, "t")
    surrogate = client.post(
        "/v1/topics/t/messages",
        content=b'{"messages": [{"value": 1, "key": "\\ud800"}]}',
        headers={"content-type": "application/json"},
    )
    assert (surrogate.status_code, error_code(surrogate)) == (422, "VALIDATION_ERROR")
    assert read_all(client, "t") == []


def test_a_committed_half_message_is_delivered_and_cannot_be_rolled_back(client: TestClient) -> None:
    create_topic(client, "t")
    prepared = client.post("/v1/half-messages", json={"topic": "t", "producer_group": "g", "value": {"order": 1}})
    assert prepared.status_code == 201
    message_id = prepared.json()["message_id"]
    assert read_all(client, "t") == []
    assert client.post(f"/v1/half-messages/{message_id}/commit").json()["state"] == "COMMITTED"
    assert [m["value"] for m in read_all(client, "t")] == [{"order": 1}]
    late = client.post(f"/v1/half-messages/{message_id}/rollback")
    assert (late.status_code, error_code(late)) == (409, "ALREADY_RESOLVED")


def test_a_transaction_is_invisible_to_read_committed_until_it_commits(client: TestClient) -> None:
    create_topic(client, "t")
    producer = client.post("/v1/producers", json={"transactional_id": "tx-1"}).json()
    stamp = {"producer_id": producer["producer_id"], "producer_epoch": producer["producer_epoch"]}
    txn = client.post("/v1/transactions", json=stamp).json()
    produced = client.post(
        "/v1/topics/t/partitions/0/messages",
        json={"messages": [{"value": "a"}], "txn_id": txn["txn_id"], **producer, "base_sequence": 0},
    )
    assert produced.status_code == 200, produced.text
    assert read_all(client, "t") == []
    assert [m["value"] for m in read_all(client, "t", isolation="read_uncommitted")] == ["a"]
    assert client.post(f"/v1/transactions/{txn['txn_id']}/commit").json()["state"] == "COMMITTED"
    assert [m["value"] for m in read_all(client, "t")] == ["a"]


def test_a_long_poll_is_woken_by_a_produce(client: TestClient) -> None:
    create_topic(client, "t")
    answers: list[dict[str, object]] = []

    def poll() -> None:
        answers.append(client.get("/v1/topics/t/partitions/0/messages", params={"max_wait_ms": 10_000}).json())

    waiter = threading.Thread(target=poll)
    began = time.monotonic()
    waiter.start()
    time.sleep(0.3)
    client.post("/v1/topics/t/messages", json={"messages": [{"value": "wake"}]})
    waiter.join(10)
    assert time.monotonic() - began < 9
    assert [m["value"] for m in answers[0]["messages"]] == ["wake"]  # type: ignore[index]


def test_readiness_and_metrics_come_from_both_processes(client: TestClient) -> None:
    assert client.get("/readyz").json() == {"status": "ready"}
    create_topic(client, "metered")
    client.post("/v1/topics/metered/messages", json={"messages": [{"value": 1}]})
    metrics = client.get("/metrics").text
    # The front's counters live in this test process, which other tests share: at least one.
    assert re.search(r'^halfmq_messages_in_total\{topic="metered"\} [1-9]', metrics, re.MULTILINE)
    assert re.search(r"^halfmq_group_commits_total [1-9]", metrics, re.MULTILINE)  # counted by the core
    assert "halfmq_core_process_resident_memory_bytes" in metrics
    families = re.findall(r"^# TYPE (\S+)", metrics, re.MULTILINE)
    assert len(families) == len(set(families)), "a metric family is reported twice"


def test_the_admin_calls_cross_to_the_core(client: TestClient) -> None:
    create_topic(client, "t")
    altered = client.patch("/v1/topics/t", json={"partitions": 2, "retention_bytes": 1000})
    assert altered.status_code == 200
    assert (len(altered.json()["partitions"]), altered.json()["config"]["retention_bytes"]) == (2, 1000)
    assert error_code(client.patch("/v1/topics/t", json={"partitions": 1})) == "INVALID_PARTITIONS"
    txn_id = client.post("/v1/transactions", json={}).json()["txn_id"]
    client.post("/v1/topics/t/partitions/1/messages", json={"messages": [{"value": 1}], "txn_id": txn_id})
    assert client.get("/v1/topics/t").json()["partitions"][1]["blocking_txn_id"] == txn_id
    listed = client.get("/v1/transactions", params={"state": "OPEN"}).json()["transactions"]
    assert [t["txn_id"] for t in listed] == [txn_id]
    assert error_code(client.delete("/v1/topics/t")) == "TOPIC_IN_USE"
    client.post(f"/v1/transactions/{txn_id}/abort")

    half = client.post("/v1/half-messages", json={"topic": "t", "producer_group": "g", "value": 1}).json()
    assert client.get(f"/v1/half-messages/{half['message_id']}").json()["checks"] == []
    assert error_code(client.post(f"/v1/half-messages/{half['message_id']}/recheck")) == "ALREADY_RESOLVED"
    assert client.get("/v1/checker").json()["prepared"] == 1
    client.post(f"/v1/half-messages/{half['message_id']}/rollback")
    assert client.delete("/v1/topics/t").status_code == 204
