"""The HTTP front's Prometheus metrics (served at /metrics, followed by the core's).

The broker may run as two processes (see :mod:`app.core`): the front counts requests
and messages in and out; :mod:`half_store.metrics` counts what happens behind it.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

FRONT_REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=FRONT_REGISTRY)
PlatformCollector(registry=FRONT_REGISTRY)
GCCollector(registry=FRONT_REGISTRY)

REQUESTS = Counter("halfmq_http_requests_total", "HTTP requests", ["method", "route", "status"], registry=FRONT_REGISTRY)
REQUEST_LATENCY = Histogram(
    "halfmq_http_request_seconds",
    "HTTP request latency",
    ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=FRONT_REGISTRY,
)
LONG_POLL_QUOTA_REFUSALS = Counter(
    "halfmq_long_poll_quota_refusals_total",
    "Long polls refused with 429 because their principal held its share of the waiting slots",
    registry=FRONT_REGISTRY,
)
BODY_TIMEOUTS = Counter(
    "halfmq_http_body_timeouts_total",
    "Requests refused with 408 because their body did not arrive within HALFMQ_BODY_TIMEOUT_SECONDS",
    registry=FRONT_REGISTRY,
)
DIRECT_REQUESTS = Counter(
    "halfmq_http_direct_requests_total",
    "HTTP requests answered without FastAPI's routing and dependency solving (the rest: halfmq_http_requests_total)",
    ["route"],
    registry=FRONT_REGISTRY,
)
MESSAGES_IN = Counter("halfmq_messages_in_total", "Messages appended to user topics", ["topic"], registry=FRONT_REGISTRY)
MESSAGES_OUT = Counter("halfmq_messages_out_total", "Messages returned by fetches", ["topic"], registry=FRONT_REGISTRY)
AUTH_REFUSALS = Counter(
    "halfmq_auth_refusals_total", "Requests refused by authentication (401) or authorization (403)", ["code"],
    registry=FRONT_REGISTRY,
)
AUTH_CHANGES = Counter(
    "halfmq_auth_changes_total", "Changes of principals, tokens and ACLs made through this process", ["change"],
    registry=FRONT_REGISTRY,
)
FETCH_ANSWERS = Counter(
    "halfmq_fetch_answers_total", "Fetch answers by body format (json, arrow)", ["format"], registry=FRONT_REGISTRY
)
# The Kafka listener (app/kafka), in the front process.
KAFKA_CONNECTIONS = Gauge("halfmq_kafka_connections", "Open Kafka-protocol client connections", registry=FRONT_REGISTRY)
KAFKA_REQUESTS = Counter("halfmq_kafka_requests_total", "Kafka-protocol requests by API", ["api"], registry=FRONT_REGISTRY)
KAFKA_REQUEST_SECONDS = Histogram(
    "halfmq_kafka_request_seconds",
    "Kafka-protocol request latency by API (a Fetch's includes its long poll)",
    ["api"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=FRONT_REGISTRY,
)
KAFKA_RECORDS = Counter(
    "halfmq_kafka_records_total", "Records produced and fetched over the Kafka protocol", ["direction"],
    registry=FRONT_REGISTRY,
)
KAFKA_EPOCH_BUMPS = Counter(
    "halfmq_kafka_epoch_bumps_total",
    "Transactions ended in transaction protocol v2 (EndTxn v5), each moving its producer to the next epoch",
    registry=FRONT_REGISTRY,
)
# The broker registry (app/presence.py): the live broker processes this one saw at its last heartbeat.
LIVE_BROKERS = Gauge(
    "halfmq_live_brokers", "Live broker processes on this database, at the last heartbeat", registry=FRONT_REGISTRY
)

FRONT_MEMORY_RELEASED = Counter(
    "halfmq_http_memory_released_bytes",
    "Resident memory the front process handed back to the system (malloc_trim, HALFMQ_MEMORY_TRIM_SECONDS)",
    registry=FRONT_REGISTRY,
)

Gauge(
    "halfmq_http_gc_frozen_objects",
    "Objects of the front's start-up kept out of the garbage collector's passes (gc.freeze)",
    registry=FRONT_REGISTRY,
).set_function(gc.get_freeze_count)


def front_metrics() -> bytes:
    return generate_latest(FRONT_REGISTRY)


class _Families:
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families


def labelled_fronts(snapshots: Mapping[int, bytes]) -> bytes:
    """Several front processes' metrics as one exposition, each series labelled ``front="<index>"``.

    Each front counts its own requests; a scrape reaches one of them, so it answers for all
    (a metric name may appear once in an exposition: the fronts' series are merged by name).
    """
    families: dict[str, Metric] = {}
    for index, text in sorted(snapshots.items()):
        for family in text_string_to_metric_families(text.decode()):
            merged = families.setdefault(family.name, Metric(family.name, family.documentation, family.type, family.unit))
            for sample in family.samples:
                labels = {**sample.labels, "front": str(index)}
                merged.add_sample(sample.name, labels, sample.value, sample.timestamp, sample.exemplar)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(list(families.values())))
    return generate_latest(registry)

# The RocketMQ 5 gRPC listener (app/rocketmq).
ROCKETMQ_SESSIONS = Gauge(
    "halfmq_rocketmq_sessions", "RocketMQ client sessions this broker process holds", registry=FRONT_REGISTRY
)
ROCKETMQ_RPCS = Counter(
    "halfmq_rocketmq_rpcs_total", "RocketMQ gRPC calls by method and answered status code", ["method", "code"],
    registry=FRONT_REGISTRY,
)
ROCKETMQ_RPC_LATENCY = Histogram(
    "halfmq_rocketmq_rpc_seconds",
    "RocketMQ gRPC call latency (a long poll counts its wait)",
    ["method"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=FRONT_REGISTRY,
)
ROCKETMQ_CHECKS_SENT = Counter(
    "halfmq_rocketmq_checks_sent_total", "Back-checks sent to RocketMQ producers over their Telemetry streams",
    registry=FRONT_REGISTRY,
)
