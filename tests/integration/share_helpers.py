"""What the share-group integration tests share: requests a consumer makes, checked for success."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

GROUP = "workers"


def receive(client: TestClient, topic: str = "jobs", group: str = GROUP, **options: Any) -> list[dict[str, Any]]:
    response = client.post(f"/v1/share-groups/{group}/receive", json={"topic": topic, **options})
    assert response.status_code == 200, response.text
    return response.json()["messages"]  # type: ignore[no-any-return]


def ack(client: TestClient, messages: list[dict[str, Any]], kind: str = "ACCEPT", group: str = GROUP,
        **extra: Any) -> list[dict[str, Any]]:
    body = {"acks": [{"receipt": m["receipt"], "type": kind, **extra} for m in messages]}
    response = client.post(f"/v1/share-groups/{group}/acks", json=body)
    assert response.status_code == 200, response.text
    return response.json()["results"]  # type: ignore[no-any-return]


def produce(client: TestClient, values: list[Any], topic: str = "jobs", key: str | None = None) -> None:
    body = {"messages": [{"value": v, "key": key, "partition": 0} for v in values]}
    assert client.post(f"/v1/topics/{topic}/messages", json=body).status_code == 200


def describe(client: TestClient, group: str = GROUP) -> dict[str, Any]:
    response = client.get(f"/v1/share-groups/{group}")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]
