"""Bad input gets a clear error in the contract's shape, never a 500, and writes nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.integration.conftest import create_topic, error_code, make_settings

PRODUCE = "/v1/topics/t/messages"


@pytest.fixture(scope="module")
def small_client(module_database_url: str) -> Iterator[TestClient]:
    """One app per database kind for the module's refused requests.

    Every request sent through it must be refused, so the tests cannot disturb one
    another; ``test_bad_produce_requests`` checks after each that topic ``t`` is still
    empty, which with a shared broker also catches an earlier test's request that wrote.
    """
    settings = make_settings(
        module_database_url, max_request_bytes=4096, max_message_bytes=1024, max_batch_messages=5, max_header_count=2
    )
    with TestClient(create_app(settings)) as client:
        create_topic(client, "t")
        yield client


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, "INVALID_REQUEST"),
        (b"[]", 422, "VALIDATION_ERROR"),
        (b'{"messages": "nope"}', 422, "VALIDATION_ERROR"),
        (b'{"messages": []}', 422, "VALIDATION_ERROR"),
        (b'{"messages": [{"key": 5, "value": 1}]}', 422, "VALIDATION_ERROR"),
        (b'{"messages": [{"value": 1, "value_base64": "AA=="}]}', 422, "VALIDATION_ERROR"),
        (b'{"messages": [{"key": "k"}]}', 422, "VALIDATION_ERROR"),
        (b'{"messages": [{"value_base64": "not base64!"}]}', 422, "VALIDATION_ERROR"),
        (b'{"messages": [{"value": 1, "headers": {"h": 1}}]}', 422, "VALIDATION_ERROR"),
        (b'{"messages": [{"value": 1, "partition": -1}]}', 422, "VALIDATION_ERROR"),
        (b'{"messages": [{"value": 1, "surprise": true}]}', 422, "VALIDATION_ERROR"),
        (
            b'{"messages": [{"value": 1}, {"value": 2}, {"value": 3}, {"value": 4}, {"value": 5}, {"value": 6}]}',
            422,
            "VALIDATION_ERROR",
        ),
        (b'{"messages": [{"value": 1, "headers": {"a": "1", "b": "2", "c": "3"}}]}', 422, "VALIDATION_ERROR"),
        (b'{"messages": [{"value": "' + b"x" * 2000 + b'"}]}', 413, "MESSAGE_TOO_LARGE"),
        (b'{"messages": [{"value": "' + b"x" * 5000 + b'"}]}', 413, "MESSAGE_TOO_LARGE"),
    ],
)
def test_bad_produce_requests(small_client: TestClient, body: bytes, status: int, code: str) -> None:
    response = small_client.post(PRODUCE, content=body, headers={"content-type": "application/json"})
    assert (response.status_code, error_code(response)) == (status, code), response.text
    assert set(response.json()["error"]) == {"code", "message"} and response.json()["error"]["message"]
    assert small_client.get("/v1/topics/t").json()["partitions"][0]["high_watermark"] == 0


def test_an_oversized_chunked_body_is_refused_while_streaming(small_client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"messages": [{"value": "'
        for _ in range(100):
            yield b"x" * 100
        yield b'"}]}'

    response = small_client.post(PRODUCE, content=chunks(), headers={"content-type": "application/json"})
    assert (response.status_code, error_code(response)) == (413, "MESSAGE_TOO_LARGE")


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("get", "/v1/nothing-here", 404, "NOT_FOUND"),
        ("delete", "/v1/topics", 405, "METHOD_NOT_ALLOWED"),
        ("get", "/v1/topics/t/partitions/x/messages", 422, "VALIDATION_ERROR"),
        ("get", "/v1/topics/t/partitions/0/messages?offset=-1", 422, "VALIDATION_ERROR"),
        ("get", "/v1/topics/t/partitions/0/messages?max_messages=0", 422, "VALIDATION_ERROR"),
        ("get", "/v1/topics/t/partitions/0/messages?max_messages=100000", 422, "VALIDATION_ERROR"),
        ("get", "/v1/topics/t/partitions/99999999999/messages", 422, "VALIDATION_ERROR"),
        ("get", "/v1/half-messages/unknown", 404, "HALF_MESSAGE_NOT_FOUND"),
        ("post", "/v1/half-messages/unknown/commit", 404, "HALF_MESSAGE_NOT_FOUND"),
        ("get", "/v1/transactions/unknown", 404, "TRANSACTION_NOT_FOUND"),
        ("post", "/v1/transactions/unknown/commit", 404, "TRANSACTION_NOT_FOUND"),
        ("delete", "/v1/producer-groups/g/listeners/nobody", 404, "LISTENER_NOT_FOUND"),
    ],
)
def test_bad_urls(small_client: TestClient, method: str, path: str, status: int, code: str) -> None:
    response = small_client.request(method, path)
    assert (response.status_code, error_code(response)) == (status, code), response.text


def test_metrics_health_and_openapi(client: TestClient) -> None:
    create_topic(client, "t")
    client.post(PRODUCE, json={"messages": [{"value": 1}]})
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").json() == {"status": "ready"}
    metrics = client.get("/metrics").text
    assert 'halfmq_http_requests_total{method="POST",route="/v1/topics/{topic}/messages",status="200"}' in metrics
    assert 'halfmq_messages_in_total{topic="t"}' in metrics
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/v1/topics", "/v1/half-messages", "/v1/transactions", "/v1/producer-groups/{group}/checks"):
        assert path in paths
    assert client.get("/docs").status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/v1/producers", {"transaction_timeout_ms": 2**40}),
        ("post", "/v1/topics/t/partitions/0/messages", {"messages": [{"value": 1}], "producer_id": 2**70, "producer_epoch": 0}),
        ("post", "/v1/topics/t/messages", {"messages": [{"key": "a\u0000b", "value": 1}]}),
        (  # sequence numbers past 2**31 - 1
            "post",
            "/v1/topics/t/partitions/0/messages",
            {"messages": [{"value": 1}, {"value": 2}], "producer_id": 0, "producer_epoch": 0, "base_sequence": 2**31 - 1},
        ),
        ("post", "/v1/groups/g%00x/offsets", {"offsets": [{"topic": "t", "partition": 0, "offset": 0}]}),
        ("get", "/v1/groups/g%00x/offsets", None),
        ("post", "/v1/producers", {"transactional_id": "a\u0000"}),
        ("post", "/v1/half-messages", {"topic": "t", "producer_group": "g\u0000", "value": 1}),
        ("get", "/v1/half-messages/%00", None),
        ("get", "/v1/transactions/%00", None),
        ("put", "/v1/producer-groups/g/listeners/i%00", {"callback_url": "http://127.0.0.1:1/x"}),
    ],
)
def test_values_no_database_could_store_are_refused_alike_on_both(
    small_client: TestClient, method: str, path: str, body: object
) -> None:
    response = small_client.request(method, path, json=body)
    assert (response.status_code, error_code(response)) == (422, "VALIDATION_ERROR"), response.text


def test_control_characters_in_headers_and_values_round_trip(small_client: TestClient) -> None:
    create_topic(small_client, "control")  # its own topic: `t` stays empty for the refused requests
    sent = {"value": "a\u0000b", "headers": {"h": "x\u0000y"}}
    assert small_client.post("/v1/topics/control/messages", json={"messages": [sent]}).status_code == 200
    got = small_client.get("/v1/topics/control/partitions/0/messages").json()["messages"][0]
    assert (got["value"], got["headers"]) == ("a\u0000b", {"h": "x\u0000y"})


@pytest.mark.parametrize("raw", [b'{"messages":[{"key":"\\ud800","value":1}]}', b'{"messages":[{"value":"\\udfff"}]}'])
def test_lone_surrogates_are_refused(small_client: TestClient, raw: bytes) -> None:
    response = small_client.post(PRODUCE, content=raw, headers={"content-type": "application/json"})
    assert (response.status_code, error_code(response)) == (422, "VALIDATION_ERROR")
