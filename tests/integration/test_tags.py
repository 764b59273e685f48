"""Tags over REST: produce takes a tag (header rocketmq.tag), a share-group receive filters on it."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.integration.conftest import create_topic


def _produce(client: TestClient, topic: str) -> None:
    messages = [{"value": "a", "tag": "TagA"}, {"value": "b", "tag": "TagB"}, {"value": "none"}]
    response = client.post(f"/v1/topics/{topic}/messages", json={"messages": messages})
    assert response.status_code == 200, response.text


def test_a_produced_tag_is_the_header_rocketmq_tag(client: TestClient) -> None:
    create_topic(client, "tagged")
    _produce(client, "tagged")
    fetched = client.get("/v1/topics/tagged/partitions/0/messages", params={"offset": 0}).json()["messages"]
    assert [m["headers"].get("rocketmq.tag") for m in fetched] == ["TagA", "TagB", None]


@pytest.mark.parametrize(
    ("tag", "values"), [(None, ["a", "b", "none"]), ("*", ["a", "b", "none"]), ("TagB", ["b"]), ("TagA || TagB", ["a", "b"])]
)
def test_a_share_group_receives_only_what_its_tag_filter_keeps(client: TestClient, tag: str | None, values: list[str]) -> None:
    create_topic(client, "filtered")
    _produce(client, "filtered")
    response = client.post("/v1/share-groups/g/receive", json={"topic": "filtered", "tag": tag})
    assert response.status_code == 200, response.text
    assert sorted(m["value"] for m in response.json()["messages"]) == values


@pytest.mark.parametrize("tag", ["a ||", "|| b", "a || *"])
def test_a_malformed_tag_filter_is_refused(client: TestClient, tag: str) -> None:
    create_topic(client, "badfilter")
    response = client.post("/v1/share-groups/g/receive", json={"topic": "badfilter", "tag": tag})
    assert (response.status_code, response.json()["error"]["code"]) == (422, "INVALID_TAG_EXPRESSION")


def test_a_tag_with_a_bar_is_refused(client: TestClient) -> None:
    create_topic(client, "badtag")
    response = client.post("/v1/topics/badtag/messages", json={"messages": [{"value": 1, "tag": "a|b"}]})
    assert response.status_code == 422


def test_a_fetch_with_a_tag_filter_keeps_matching_messages_and_moves_past_the_rest(client: TestClient) -> None:
    create_topic(client, "fetched")
    _produce(client, "fetched")
    page = client.get("/v1/topics/fetched/partitions/0/messages", params={"offset": 0, "tag": "TagB"}).json()
    assert ([m["value"] for m in page["messages"]], page["next_offset"]) == (["b"], 3)
