"""What a replicator needs from a broker: its cluster's name, and produce that keeps a given timestamp."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.integration.conftest import create_topic, error_code, make_settings, read_all


def test_cluster_name_defaults_to_local(client: TestClient) -> None:
    assert client.get("/v1/cluster").json() == {"cluster_name": "local"}


@pytest.fixture
def named_cluster(database_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings(database_url, cluster_name="eu-west.1"))) as test_client:
        yield test_client


def test_cluster_name_comes_from_the_settings(named_cluster: TestClient) -> None:
    assert named_cluster.get("/v1/cluster").json() == {"cluster_name": "eu-west.1"}


def test_produced_timestamps_are_kept_on_both_produce_routes(client: TestClient) -> None:
    create_topic(client, "stamped", partitions=1)
    by_key = client.post(
        "/v1/topics/stamped/messages", json={"messages": [{"value": 1, "timestamp": 1_600_000_000_000}, {"value": 2}]}
    )
    assert by_key.status_code == 200, by_key.text
    producer = client.post("/v1/producers", json={}).json()
    by_partition = client.post(
        "/v1/topics/stamped/partitions/0/messages",
        json={"messages": [{"value": 3, "timestamp": 0}], "base_sequence": 0, **producer},
    )
    assert by_partition.status_code == 200, by_partition.text
    got = read_all(client, "stamped")
    assert [m["timestamp"] for m in (got[0], got[2])] == [1_600_000_000_000, 0]
    assert got[1]["timestamp"] > 1_600_000_000_000  # the broker's clock, when none is given


def test_a_transactional_produce_keeps_timestamps_too(client: TestClient) -> None:
    create_topic(client, "stamped-txn")
    producer = client.post("/v1/producers", json={"transactional_id": "stamper"}).json()
    answer = client.post(
        "/v1/topics/stamped-txn/partitions/0/messages",
        json={"messages": [{"value": "x", "timestamp": 42}], "transactional": True, "base_sequence": 0, **producer},
    ).json()
    assert client.post(f"/v1/transactions/{answer['txn_id']}/commit").status_code == 200
    assert [m["timestamp"] for m in read_all(client, "stamped-txn")] == [42]


@pytest.mark.parametrize("timestamp", [-1, 253_402_300_800_000, "soon", 1.5])
def test_a_bad_timestamp_is_refused_and_nothing_is_written(client: TestClient, timestamp: object) -> None:
    create_topic(client, "badstamp")
    response = client.post(
        "/v1/topics/badstamp/messages", json={"messages": [{"value": 1}, {"value": 2, "timestamp": timestamp}]}
    )
    assert response.status_code == 422
    assert error_code(response) == "VALIDATION_ERROR"
    assert read_all(client, "badstamp") == []


def test_a_half_message_takes_no_timestamp(client: TestClient) -> None:
    # Its born time decides when the checker may ask the producer; a producer's clock must not.
    create_topic(client, "halfstamp")
    response = client.post(
        "/v1/half-messages", json={"topic": "halfstamp", "producer_group": "g", "value": 1, "timestamp": 5}
    )
    assert response.status_code == 422
