"""GET /v1/transactions: Kafka's list and find-hanging, with filters, oldest first."""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient

from half_store.domain.records import now_ms
from tests.integration.conftest import create_topic, error_code


def write(client: TestClient, txn_id: str, topic: str, partition: int) -> None:
    response = client.post(
        f"/v1/topics/{topic}/partitions/{partition}/messages", json={"messages": [{"value": 1}], "txn_id": txn_id}
    )
    assert response.status_code == 200, response.text


def listed(client: TestClient, **params: Any) -> list[dict[str, Any]]:
    response = client.get("/v1/transactions", params=params)
    assert response.status_code == 200, response.text
    return response.json()["transactions"]  # type: ignore[no-any-return]


def test_transactions_are_listed_and_filtered(client: TestClient) -> None:
    create_topic(client, "orders", partitions=2)
    create_topic(client, "other")
    producer = client.post("/v1/producers", json={"transactional_id": "etl-1"}).json()
    bound = client.post("/v1/transactions", json=producer).json()["txn_id"]
    write(client, bound, "orders", 0)
    spanning = client.post("/v1/transactions", json={"timeout_ms": 30_000}).json()["txn_id"]
    write(client, spanning, "other", 0)
    write(client, spanning, "orders", 1)
    done = client.post("/v1/transactions", json={}).json()["txn_id"]
    write(client, done, "orders", 1)
    client.post(f"/v1/transactions/{done}/commit")

    everything = listed(client)
    assert [t["txn_id"] for t in everything] == [bound, spanning, done]  # oldest first
    by_id = {t["txn_id"]: t for t in everything}
    assert by_id[bound] == {
        "txn_id": bound,
        "transactional_id": "etl-1",
        "producer_id": producer["producer_id"],
        "producer_epoch": producer["producer_epoch"],
        "state": "OPEN",
        "partitions": [{"topic": "orders", "partition": 0}],
        "started_ms": by_id[bound]["started_ms"],
        "last_state_change_ms": by_id[bound]["started_ms"],  # open since it began
        "timeout_ms": 60_000,
    }
    assert by_id[spanning]["partitions"] == [{"topic": "orders", "partition": 1}, {"topic": "other", "partition": 0}]
    assert (by_id[spanning]["transactional_id"], by_id[spanning]["timeout_ms"]) == (None, 30_000)
    assert by_id[done]["state"] == "COMMITTED"
    assert by_id[done]["last_state_change_ms"] >= by_id[done]["started_ms"]

    assert [t["txn_id"] for t in listed(client, state="OPEN")] == [bound, spanning]
    assert [t["txn_id"] for t in listed(client, state="committed,prepare_commit")] == [done]
    assert [t["txn_id"] for t in listed(client, transactional_id="etl-1")] == [bound]
    assert listed(client, transactional_id="nobody") == []
    assert listed(client, older_than_ms=3_600_000) == []  # nothing has been running for an hour
    assert [t["txn_id"] for t in listed(client, older_than_ms=0, state="OPEN", limit=1)] == [bound]
    assert [t["txn_id"] for t in listed(client, state="", transactional_id="")] == [bound, spanning, done]

    for bad in ({"state": "BOGUS"}, {"older_than_ms": -1}, {"limit": 0}):
        response = client.get("/v1/transactions", params=bad)
        assert (response.status_code, error_code(response)) == (422, "VALIDATION_ERROR"), bad


def test_a_timed_out_transaction_is_listed_as_such(client: TestClient) -> None:
    create_topic(client, "orders")
    txn_id = client.post("/v1/transactions", json={"timeout_ms": 1}).json()["txn_id"]
    [begun] = listed(client, state="OPEN")
    while now_ms() <= begun["started_ms"] + 1:  # its 1 ms timeout passes
        time.sleep(0.001)
    client.post(f"/v1/transactions/{txn_id}/commit")  # too late: the timeout wins
    [found] = listed(client, state="TIMED_OUT")
    assert found["txn_id"] == txn_id
    assert listed(client, state="OPEN") == []


def test_a_transactions_description_names_its_transactional_id_and_age(client: TestClient) -> None:
    create_topic(client, "orders")
    producer = client.post("/v1/producers", json={"transactional_id": "etl-2"}).json()
    before = now_ms()
    bound = client.post("/v1/transactions", json=producer).json()["txn_id"]
    anonymous = client.post("/v1/transactions", json={}).json()["txn_id"]
    write(client, anonymous, "orders", 0)
    client.post(f"/v1/transactions/{anonymous}/abort")

    described = client.get(f"/v1/transactions/{bound}").json()
    assert described["transactional_id"] == "etl-2" and described["state"] == "OPEN"
    assert before <= described["started_ms"] <= now_ms() and described["age_ms"] >= 0
    assert described["last_state_change_ms"] == described["started_ms"]  # open: no change since it began
    ended = client.get(f"/v1/transactions/{anonymous}").json()
    assert ended["transactional_id"] is None and ended["state"] == "ABORTED"
    assert ended["last_state_change_ms"] >= ended["started_ms"]
