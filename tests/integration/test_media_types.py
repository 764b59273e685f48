"""A request body that is not JSON is refused with 415 UNSUPPORTED_MEDIA_TYPE, on every route with a body.

JSON with parameters (charset) and the ``application/*+json`` types are JSON; a request
without a body, where the route needs none, is answered as usual whatever its type.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.integration.conftest import create_topic, error_code, read_all

# One route of each kind that takes a body, with a body it accepts as JSON.
ROUTES_WITH_A_BODY: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/v1/topics", {"name": "other", "partitions": 1}),
    ("POST", "/v1/topics/t/messages", {"messages": [{"value": 1}]}),
    ("POST", "/v1/topics/t/partitions/0/messages", {"messages": [{"value": 1}]}),
    ("POST", "/v1/producers", {"transactional_id": "tid"}),
    ("POST", "/v1/transactions", {"timeout_ms": 5000}),
    ("POST", "/v1/groups/g/offsets", {"offsets": [{"topic": "t", "partition": 0, "offset": 0}]}),
    ("POST", "/v1/half-messages", {"topic": "t", "producer_group": "pg", "value": 1}),
    ("PUT", "/v1/producer-groups/pg/listeners/i1", {"callback_url": "http://127.0.0.1:9/check"}),
]
NOT_JSON = [
    ("text/plain", None),
    ("text/plain; charset=utf-8", None),
    ("application/x-www-form-urlencoded", "messages=1&name=x"),
    ("multipart/form-data; boundary=xyz", '--xyz\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--xyz--\r\n'),
    ("application/xml", "<messages/>"),
    ("application/jsonx", None),
]


@pytest.fixture
def topic_client(client: TestClient) -> TestClient:
    create_topic(client, "t")
    return client


@pytest.fixture(scope="module")
def refusing_client(module_client: TestClient) -> TestClient:
    """The module's shared app, for the tests whose every request is refused.

    Each checks afterwards that nothing at all was written, which with a shared broker
    covers the earlier tests' requests too.
    """
    create_topic(module_client, "t")
    return module_client


@pytest.mark.parametrize(
    ("method", "path", "body"),
    ROUTES_WITH_A_BODY,
    ids=[f"{m} {p}" for m, p, _ in ROUTES_WITH_A_BODY],
)
def test_a_body_that_is_not_json_gets_415(
    refusing_client: TestClient, method: str, path: str, body: dict[str, Any]
) -> None:
    for content_type, raw in NOT_JSON:
        content = raw if raw is not None else json.dumps(body)  # even valid JSON, when declared as something else
        response = refusing_client.request(method, path, content=content, headers={"content-type": content_type})
        assert response.status_code == 415, f"{content_type}: {response.text}"
        assert error_code(response) == "UNSUPPORTED_MEDIA_TYPE"
        assert content_type.split(";")[0] in response.json()["error"]["message"]
    assert read_all(refusing_client, "t") == []  # nothing was written
    assert [t["name"] for t in refusing_client.get("/v1/topics").json()["topics"]] == ["t"]
    assert refusing_client.get("/v1/half-messages").json()["half_messages"] == []


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON;charset=UTF-8",
        "application/vnd.halfmq+json",
    ],
)
def test_json_with_parameters_and_json_suffix_types_are_json(topic_client: TestClient, content_type: str) -> None:
    body = json.dumps({"messages": [{"key": "k", "value": {"n": 1}}]})
    response = topic_client.post("/v1/topics/t/messages", content=body, headers={"content-type": content_type})
    assert response.status_code == 200, response.text
    assert [m["value"] for m in read_all(topic_client, "t")] == [{"n": 1}]


def test_a_route_without_a_body_takes_a_request_without_one(topic_client: TestClient) -> None:
    # curl -XPOST sends no content type; `curl -d ''` sends an empty form: neither is a body to refuse.
    prepared = topic_client.post("/v1/half-messages", json={"topic": "t", "producer_group": "pg", "value": 1}).json()
    commit = topic_client.post(f"/v1/half-messages/{prepared['message_id']}/commit")
    assert commit.status_code == 200 and commit.json()["state"] == "COMMITTED"
    form = {"content-type": "application/x-www-form-urlencoded"}
    begun = topic_client.post("/v1/transactions", content=b"", headers=form)
    assert begun.status_code == 201, begun.text
    producer = topic_client.post("/v1/producers", headers={"content-type": "text/plain"})
    assert producer.status_code == 200, producer.text


def test_a_bad_path_with_a_form_body_is_still_a_validation_error(refusing_client: TestClient) -> None:
    # The body's type is not what is wrong with a fetch of partition "x".
    form = {"content-type": "application/x-www-form-urlencoded"}
    response = refusing_client.request("GET", "/v1/topics/t/partitions/x/messages", content="a=1", headers=form)
    assert response.status_code == 422 and error_code(response) == "VALIDATION_ERROR"
