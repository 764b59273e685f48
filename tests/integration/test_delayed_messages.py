"""Delay messages over REST: invisible until their time, then delivered once into their topic."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from app.broker import Broker
from half_store.domain.records import now_ms
from tests.integration.conftest import create_topic


def _fetch(client: TestClient, topic: str) -> list[dict[str, object]]:
    messages: list[dict[str, object]] = client.get(f"/v1/topics/{topic}/partitions/0/messages", params={"offset": 0}).json()[
        "messages"
    ]
    return messages


def test_a_delay_message_waits_listed_then_is_delivered_once(client: TestClient, broker: Broker) -> None:
    create_topic(client, "later")
    deliver_at = now_ms() + 300
    response = client.post(
        "/v1/topics/later/delayed-messages",
        json={"messages": [{"value": {"n": 1}, "tag": "T", "deliver_at": deliver_at}, {"value": "soon", "delay_ms": 0}]},
    )
    assert response.status_code == 201, response.text
    first, _ = response.json()["scheduled"]
    assert (first["state"], first["deliver_at"], first["partition"]) == ("WAITING", deliver_at, 0)
    assert client.portal.call(broker.delays.deliver_due) == 1  # only the one already due
    assert [m["value"] for m in _fetch(client, "later")] == ["soon"]
    waiting = client.get("/v1/delayed-messages", params={"topic": "later"}).json()["delayed_messages"]
    assert [w["message_id"] for w in waiting] == [first["message_id"]]
    delivered_now = 0
    while not delivered_now and now_ms() < deliver_at + 10_000:
        delivered_now = client.portal.call(broker.delays.deliver_due)
        time.sleep(0 if delivered_now else 0.05)
    # Never early: a call that finished before the due time delivered nothing (the clock is
    # read after the call, since a call begun just before the due time may rightly deliver).
    assert delivered_now == 1 and now_ms() >= deliver_at
    assert client.portal.call(broker.delays.deliver_due) == 0  # delivered once
    delivered = _fetch(client, "later")
    assert [m["value"] for m in delivered] == ["soon", {"n": 1}] and delivered[1]["headers"] == {"rocketmq.tag": "T"}
    assert client.get("/v1/delayed-messages").json()["delayed_messages"] == []


def test_a_delivery_time_past_the_longest_delay_is_refused(client: TestClient) -> None:
    create_topic(client, "toofar")
    far = now_ms() + 3 * 24 * 3600 * 1000 + 60_000
    response = client.post("/v1/topics/toofar/delayed-messages", json={"messages": [{"value": 1, "deliver_at": far}]})
    assert (response.status_code, response.json()["error"]["code"]) == (422, "DELIVERY_TIME_TOO_FAR")
    assert client.get("/v1/delayed-messages").json()["delayed_messages"] == []


def test_a_delay_message_needs_exactly_one_time(client: TestClient) -> None:
    create_topic(client, "notime")
    response = client.post("/v1/topics/notime/delayed-messages", json={"messages": [{"value": 1}]})
    assert response.status_code == 422


def test_a_delay_message_for_an_unknown_topic_is_refused(client: TestClient) -> None:
    response = client.post("/v1/topics/nope/delayed-messages", json={"messages": [{"value": 1, "delay_ms": 10}]})
    assert (response.status_code, response.json()["error"]["code"]) == (404, "TOPIC_NOT_FOUND")
