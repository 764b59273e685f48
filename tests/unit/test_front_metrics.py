"""Several fronts' metrics as one exposition: each name once, each series labelled with its front."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.metrics import labelled_fronts


def _front(requests: int) -> bytes:
    registry = CollectorRegistry()
    Counter("halfmq_http_requests_total", "HTTP requests", ["route"], registry=registry).labels("/x").inc(requests)
    Histogram("halfmq_http_request_seconds", "latency", registry=registry).observe(0.01)
    return generate_latest(registry)


def test_each_front_keeps_its_own_series_under_one_family() -> None:
    text = labelled_fronts({0: _front(3), 1: _front(4)}).decode()
    assert text.count("# TYPE halfmq_http_requests_total counter") == 1
    counted = {
        sample.labels["front"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "halfmq_http_requests_total"
    }
    assert counted == {"0": 3.0, "1": 4.0}
    assert 'halfmq_http_request_seconds_count{front="1"} 1.0' in text
