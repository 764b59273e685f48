"""/metrics counts every request by the template of the route that served it; only unknown paths are ``unmatched``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.main import create_app
from tests.integration.conftest import create_topic, make_settings

Counts = dict[tuple[str, str, str], float]


def request_counts(client: TestClient) -> Counts:
    """``halfmq_http_requests_total`` as /metrics shows it, by (method, route, status)."""
    counts: Counts = {}
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "halfmq_http_requests_total":
                labels = sample.labels
                counts[(labels["method"], labels["route"], labels["status"])] = sample.value
    return counts


@pytest.fixture
def small_body_client(database_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings(database_url, max_request_bytes=200))) as client:
        create_topic(client, "t")
        yield client


def test_every_served_route_is_counted_by_its_template(small_body_client: TestClient) -> None:
    client = small_body_client
    before = request_counts(client)  # the counters live as long as the process: compare differences
    requests = [
        ("GET", "/docs", 200),
        ("GET", "/openapi.json", 200),
        ("GET", "/redoc", 200),
        ("GET", "/healthz", 200),
        ("GET", "/v1/topics/t", 200),
        ("GET", "/v1/topics/t/partitions/0/messages", 200),
        ("GET", "/v1/half-messages/nope", 404),
        ("DELETE", "/v1/topics", 405),
        ("GET", "/no/such/path", 404),
        ("GET", "/v1/topics/t/partitions/0/messages/extra", 404),
    ]
    for method, path, status in requests:
        assert client.request(method, path).status_code == status, (method, path)
    too_large = client.post("/v1/topics/t/messages", json={"messages": [{"value": "x" * 500}]})
    assert too_large.status_code == 413  # refused before routing, still named by its route
    after = request_counts(client)

    def counted(method: str, route: str, status: int) -> float:
        return after.get((method, route, str(status)), 0) - before.get((method, route, str(status)), 0)

    assert counted("GET", "/metrics", 200) == 1  # the scrape before this test's requests
    assert counted("GET", "/docs", 200) == 1
    assert counted("GET", "/openapi.json", 200) == 1
    assert counted("GET", "/redoc", 200) == 1
    assert counted("GET", "/healthz", 200) == 1
    assert counted("GET", "/v1/topics/{topic}", 200) == 1
    assert counted("GET", "/v1/topics/{topic}/partitions/{partition}/messages", 200) == 1
    assert counted("GET", "/v1/half-messages/{message_id}", 404) == 1  # a route's own 404 is the route's
    assert counted("DELETE", "/v1/topics", 405) == 1
    assert counted("POST", "/v1/topics/{topic}/messages", 413) == 1
    assert counted("GET", "unmatched", 404) == 2  # only paths no route serves
