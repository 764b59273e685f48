"""A W3C traceparent on produce or prepare travels with the message: to fetches, checks and the committed message."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.api.otel import install_otel
from app.main import create_app
from tests.integration.conftest import create_topic, make_settings, read_all

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACED = {"traceparent": PARENT, "tracestate": "vendor=abc"}


def test_a_trace_follows_its_messages(client: TestClient) -> None:
    create_topic(client, "t")
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    batch = {"messages": [{"value": 1}, {"value": 2, "headers": {"traceparent": own}}]}
    assert client.post("/v1/topics/t/messages", json=batch, headers=TRACED).status_code == 200
    untraced = client.post("/v1/topics/t/messages", json={"messages": [{"value": 3}]}, headers={"traceparent": "junk"})
    assert untraced.status_code == 200  # an invalid traceparent is ignored, as W3C says
    assert client.post("/v1/topics/t/partitions/0/messages", json={"messages": [{"value": 4}]}, headers=TRACED).status_code == 200
    headers = [m["headers"] for m in read_all(client, "t")]
    assert headers == [TRACED, {"traceparent": own}, {}, TRACED]  # a message's own context wins

    prepared = {"topic": "t", "producer_group": "pg", "value": "half"}
    message_id = client.post("/v1/half-messages", json=prepared, headers=TRACED).json()["message_id"]
    (check,) = client.get("/v1/producer-groups/pg/checks").json()["checks"]  # what the checker's callback gets too
    assert check["message_id"] == message_id and check["headers"] == TRACED
    assert client.post(f"/v1/half-messages/{message_id}/commit").status_code == 200
    assert read_all(client, "t")[-1]["headers"] == TRACED


def test_opentelemetry_spans_only_when_asked_for(database_url: str) -> None:
    """With OTEL_TRACES_EXPORTER set, each request is a server span, a child of the caller's traceparent."""
    pytest.importorskip("opentelemetry.instrumentation.asgi")
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exported = InMemorySpanExporter()
    provider = TracerProvider()  # this test's own, not the process's: other tests see no spans
    provider.add_span_processor(SimpleSpanProcessor(exported))
    app = create_app(make_settings(database_url))
    assert install_otel(app, {}, provider) is False  # nothing asked: nothing installed, nothing imported
    assert install_otel(app, {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, provider) is False
    assert install_otel(app, {"OTEL_TRACES_EXPORTER": "otlp"}, provider) is True
    with TestClient(app) as client:
        create_topic(client, "t")
        assert client.post("/v1/topics/t/messages", json={"messages": [{"value": 2}]}, headers=TRACED).status_code == 200
        client.get("/metrics")  # scrapes make no spans
    servers = [s for s in exported.get_finished_spans() if s.kind is trace.SpanKind.SERVER]
    assert [s.name.split()[0] for s in servers] == ["POST", "POST"]  # the topic's creation and the produce
    traced = servers[-1]
    assert traced.context.trace_id == int(PARENT.split("-")[1], 16)
    assert traced.parent is not None and traced.parent.span_id == int(PARENT.split("-")[2], 16)
