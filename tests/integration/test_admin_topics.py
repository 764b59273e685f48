"""Topic administration through the real app: delete, alter, describe, and the errors of each."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.broker import Broker
from app.main import create_app
from half_store.domain.constants import CHECK_MAX_TOPIC, HALF_TOPIC
from half_store.domain.partitioner import partition_for_key
from tests.integration.conftest import create_topic, error_code, make_settings, read_all


def produce(client: TestClient, topic: str, *values: Any, key: str | None = None) -> list[dict[str, int]]:
    response = client.post(
        f"/v1/topics/{topic}/messages", json={"messages": [{"key": key, "value": v} for v in values]}
    )
    assert response.status_code == 200, response.text
    return response.json()["offsets"]  # type: ignore[no-any-return]


def begin_with_write(client: TestClient, topic: str, partition: int = 0) -> str:
    txn_id = client.post("/v1/transactions", json={}).json()["txn_id"]
    written = client.post(
        f"/v1/topics/{topic}/partitions/{partition}/messages",
        json={"messages": [{"value": "in txn"}], "txn_id": txn_id},
    )
    assert written.status_code == 200, written.text
    return str(txn_id)


# -- delete ---------------------------------------------------------------------------------------


def test_a_deleted_topic_is_gone_with_its_offsets_and_its_name_is_free(client: TestClient) -> None:
    create_topic(client, "orders", partitions=2)
    produce(client, "orders", 1, 2, 3)
    assert (
        client.post(
            "/v1/groups/billing/offsets", json={"offsets": [{"topic": "orders", "partition": 0, "offset": 1}]}
        ).status_code
        == 200
    )

    deleted = client.delete("/v1/topics/orders")
    assert (deleted.status_code, deleted.content) == (204, b"")

    for gone in (
        client.get("/v1/topics/orders"),
        client.post("/v1/topics/orders/messages", json={"messages": [{"value": 1}]}),
        client.get("/v1/topics/orders/partitions/0/messages"),
        client.delete("/v1/topics/orders"),
        client.patch("/v1/topics/orders", json={"partitions": 3}),
    ):
        assert (gone.status_code, error_code(gone)) == (404, "TOPIC_NOT_FOUND")
    assert "orders" not in {t["name"] for t in client.get("/v1/topics").json()["topics"]}
    assert client.get("/v1/groups/billing/offsets").json()["offsets"] == []

    create_topic(client, "orders", partitions=1)  # the name can be used again, and starts empty
    assert read_all(client, "orders") == []
    assert produce(client, "orders", "fresh") == [{"partition": 0, "offset": 0}]
    assert [m["value"] for m in read_all(client, "orders")] == ["fresh"]
    assert client.get("/v1/groups/billing/offsets").json()["offsets"] == []


def test_a_new_topic_never_takes_a_deleted_ones_id(client: TestClient) -> None:
    # The newest topic's id is the one SQLite would hand out again: its unpurged rows would collide.
    create_topic(client, "first")
    create_topic(client, "newest")
    produce(client, "newest", "old-1", "old-2")
    assert client.delete("/v1/topics/newest").status_code == 204
    create_topic(client, "other")
    assert produce(client, "other", "new") == [{"partition": 0, "offset": 0}]
    assert [m["value"] for m in read_all(client, "other", isolation="read_uncommitted")] == ["new"]


def test_a_topic_in_use_cannot_be_deleted(client: TestClient) -> None:
    create_topic(client, "orders")
    create_topic(client, "source")

    txn_id = begin_with_write(client, "orders")
    refused = client.delete("/v1/topics/orders")
    assert (refused.status_code, error_code(refused)) == (409, "TOPIC_IN_USE")
    assert txn_id in refused.json()["error"]["message"]
    assert client.post(f"/v1/transactions/{txn_id}/abort").status_code == 200

    # A transaction that will commit group offsets of the topic uses it too.
    produce(client, "source", 1)
    staging = client.post("/v1/transactions", json={}).json()["txn_id"]
    staged = client.post(
        f"/v1/transactions/{staging}/offsets",
        json={"group": "g", "offsets": [{"topic": "source", "partition": 0, "offset": 1}]},
    )
    assert staged.status_code == 200
    assert error_code(client.delete("/v1/topics/source")) == "TOPIC_IN_USE"
    assert client.post(f"/v1/transactions/{staging}/commit").status_code == 200
    assert client.delete("/v1/topics/source").status_code == 204

    half = client.post("/v1/half-messages", json={"topic": "orders", "producer_group": "pg", "value": 1}).json()
    refused = client.delete("/v1/topics/orders")
    assert (refused.status_code, error_code(refused)) == (409, "TOPIC_IN_USE")
    assert half["message_id"] in refused.json()["error"]["message"]
    assert client.post(f"/v1/half-messages/{half['message_id']}/rollback").status_code == 200

    assert client.delete("/v1/topics/orders").status_code == 204
    resolved = client.get(f"/v1/half-messages/{half['message_id']}")
    assert (resolved.status_code, error_code(resolved)) == (404, "HALF_MESSAGE_NOT_FOUND")


def test_system_and_unknown_topics(client: TestClient) -> None:
    for system in (HALF_TOPIC, CHECK_MAX_TOPIC):
        for response in (
            client.delete(f"/v1/topics/{system}"),
            client.patch(f"/v1/topics/{system}", json={"retention_ms": 1}),
        ):
            assert (response.status_code, error_code(response)) == (403, "RESERVED_TOPIC")
    assert client.get(f"/v1/topics/{HALF_TOPIC}").status_code == 200  # described, not changed
    assert error_code(client.delete("/v1/topics/no-such")) == "TOPIC_NOT_FOUND"
    assert client.delete("/v1/topics/not a name").status_code == 422


def test_a_fetch_waiting_on_a_deleted_topic_ends_with_404(client: TestClient, broker: Broker) -> None:
    create_topic(client, "orders")
    answers: list[Any] = []
    waiting = threading.Thread(
        target=lambda: answers.append(
            client.get("/v1/topics/orders/partitions/0/messages", params={"max_wait_ms": 20_000})
        )
    )
    waiting.start()
    while broker.log.notifier.waiting == 0:  # the fetch is parked in its long poll
        threading.Event().wait(0.01)
    assert client.delete("/v1/topics/orders").status_code == 204
    waiting.join(20)
    assert not waiting.is_alive()
    assert (answers[0].status_code, error_code(answers[0])) == (404, "TOPIC_NOT_FOUND")


def test_a_prepare_for_a_deleted_topic_is_refused_even_from_a_stale_cache(client: TestClient, broker: Broker) -> None:
    create_topic(client, "orders")
    produce(client, "orders", "cached")  # looked up, and so cached
    stale = broker.store._topics["orders"]
    assert client.delete("/v1/topics/orders").status_code == 204
    broker.store._topics["orders"] = stale
    refused = client.post("/v1/half-messages", json={"topic": "orders", "producer_group": "pg", "value": 1})
    assert (refused.status_code, error_code(refused)) == (404, "TOPIC_NOT_FOUND")
    assert client.get("/v1/half-messages").json()["half_messages"] == []
    broker.store._topics["orders"] = stale
    produced = client.post("/v1/topics/orders/messages", json={"messages": [{"value": 1}]})
    assert (produced.status_code, error_code(produced)) == (404, "TOPIC_NOT_FOUND")


# -- alter and describe -------------------------------------------------------------------------------


def test_partitions_can_be_added_never_removed(client: TestClient) -> None:
    create_topic(client, "orders", partitions=2)
    produce(client, "orders", "before", key="k")

    grown = client.patch("/v1/topics/orders", json={"partitions": 5})
    assert grown.status_code == 200
    assert [p["partition"] for p in grown.json()["partitions"]] == [0, 1, 2, 3, 4]
    assert client.get("/v1/topics").json()["topics"] == [{"name": "orders", "partitions": 5}]

    # Keys are routed over the new count (some move, as in Kafka); the new partitions take writes.
    keys = [f"key-{n}" for n in range(40)]
    for key in keys:
        [placed] = produce(client, "orders", key, key=key)
        assert placed["partition"] == partition_for_key(key, 5)
    assert {partition_for_key(k, 5) for k in keys} - {0, 1}
    explicit = client.post("/v1/topics/orders/messages", json={"messages": [{"value": "p4", "partition": 4}]})
    assert explicit.json()["offsets"][0]["partition"] == 4

    fewer = client.patch("/v1/topics/orders", json={"partitions": 3})
    assert (fewer.status_code, error_code(fewer)) == (422, "INVALID_PARTITIONS")
    same = client.patch("/v1/topics/orders", json={"partitions": 5})
    assert same.status_code == 200 and len(same.json()["partitions"]) == 5
    for bad in (
        {"partitions": 0},
        {"partitions": 5000},
        {"retention_ms": -2},
        {"retention_bytes": "big"},
        {"other": 1},
    ):
        response = client.patch("/v1/topics/orders", json=bad)
        assert (response.status_code, error_code(response)) == (422, "VALIDATION_ERROR"), bad


@pytest.fixture
def defaults_client(database_url: str) -> Any:
    settings = make_settings(database_url, retention_ms=3_600_000)
    with TestClient(create_app(settings)) as client:
        yield client


def test_retention_config_is_set_reset_and_applied_over_the_defaults(defaults_client: TestClient) -> None:
    client = defaults_client
    create_topic(client, "orders")
    config = client.get("/v1/topics/orders").json()["config"]
    assert config == {
        "retention_ms": None,
        "retention_bytes": None,
        "effective_retention_ms": 3_600_000,
        "effective_retention_bytes": None,
    }

    set_both = client.patch("/v1/topics/orders", json={"retention_ms": 60_000, "retention_bytes": 1_000_000}).json()[
        "config"
    ]
    assert set_both == {
        "retention_ms": 60_000,
        "retention_bytes": 1_000_000,
        "effective_retention_ms": 60_000,
        "effective_retention_bytes": 1_000_000,
    }

    forever = client.patch("/v1/topics/orders", json={"retention_ms": -1}).json()["config"]
    assert (forever["retention_ms"], forever["effective_retention_ms"], forever["retention_bytes"]) == (
        -1,
        None,
        1_000_000,
    )

    reset = client.patch("/v1/topics/orders", json={"retention_ms": None, "retention_bytes": None}).json()["config"]
    assert reset == config
    assert client.patch("/v1/topics/orders", json={}).json()["config"] == config  # nothing given, nothing changed


def test_describe_names_the_transaction_holding_a_partition_back(client: TestClient) -> None:
    create_topic(client, "orders", partitions=2)
    client.post("/v1/topics/orders/messages", json={"messages": [{"value": "plain", "partition": 0}]})
    txn_id = begin_with_write(client, "orders", partition=1)
    later = begin_with_write(client, "orders", partition=1)
    partitions = client.get("/v1/topics/orders").json()["partitions"]
    assert [(p["last_stable_offset"], p["high_watermark"], p["blocking_txn_id"]) for p in partitions] == [
        (1, 1, None),
        (0, 2, txn_id),
    ]
    client.post(f"/v1/transactions/{txn_id}/commit")
    held = client.get("/v1/topics/orders").json()["partitions"][1]
    assert (held["last_stable_offset"], held["blocking_txn_id"]) == (1, later)  # the next one holds it now
    client.post(f"/v1/transactions/{later}/abort")
    assert client.get("/v1/topics/orders").json()["partitions"][1]["blocking_txn_id"] is None
