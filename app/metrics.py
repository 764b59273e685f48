"""Prometheus metrics (served at /metrics).

Two registries, because the broker may run as two processes (see :mod:`app.core`):
the HTTP front counts requests and messages in and out; the core counts what happens
behind it (group commits, half messages, checks, transactions, waiters). ``/metrics``
is the front's registry followed by the core's, so each name appears once whichever
way the broker runs.
"""

from __future__ import annotations

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

FRONT_REGISTRY = CollectorRegistry(auto_describe=True)
CORE_REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=FRONT_REGISTRY)
PlatformCollector(registry=FRONT_REGISTRY)
GCCollector(registry=FRONT_REGISTRY)

# The HTTP front.
REQUESTS = Counter("halfmq_http_requests_total", "HTTP requests", ["method", "route", "status"], registry=FRONT_REGISTRY)
REQUEST_LATENCY = Histogram(
    "halfmq_http_request_seconds",
    "HTTP request latency",
    ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=FRONT_REGISTRY,
)
MESSAGES_IN = Counter("halfmq_messages_in_total", "Messages appended to user topics", ["topic"], registry=FRONT_REGISTRY)
MESSAGES_OUT = Counter("halfmq_messages_out_total", "Messages returned by fetches", ["topic"], registry=FRONT_REGISTRY)

# The core.
HALF_MESSAGES = Counter("halfmq_half_messages_total", "Half-message events", ["event"], registry=CORE_REGISTRY)
CHECKS = Counter("halfmq_checks_total", "Back-checks sent to producers, by answer", ["result"], registry=CORE_REGISTRY)
TRANSACTIONS = Counter(
    "halfmq_transactions_total", "Kafka-mode transactions ended, by outcome", ["outcome"], registry=CORE_REGISTRY
)
LONG_POLL_WAITERS = Gauge("halfmq_long_poll_waiters", "Fetches waiting for data", registry=CORE_REGISTRY)
CHECKER_LEADER = Gauge("halfmq_checker_leader", "1 while this process holds the checker lease", registry=CORE_REGISTRY)
GROUP_COMMITS = Counter(
    "halfmq_group_commits_total", "Database transactions committed by the group-commit writer", registry=CORE_REGISTRY
)
GROUP_COMMIT_UNITS = Counter(
    "halfmq_group_commit_units_total", "Write units those transactions carried", registry=CORE_REGISTRY
)
MERGE_FALLBACKS = Counter(
    "halfmq_group_commit_merge_fallbacks_total",
    "Merged runs that failed and were run again one unit at a time",
    ["kind"],
    registry=CORE_REGISTRY,
)

CAREFUL_RERUNS = Counter(
    "halfmq_group_commit_careful_reruns_total",
    "Group commits rolled back because a unit failed, and run again with a savepoint per unit",
    registry=CORE_REGISTRY,
)


def count_core_process() -> None:
    """In a core of its own, also report that process's CPU and memory (``halfmq_core_process_*``)."""
    ProcessCollector(namespace="halfmq_core", registry=CORE_REGISTRY)


def front_metrics() -> bytes:
    return generate_latest(FRONT_REGISTRY)


def core_metrics() -> bytes:
    return generate_latest(CORE_REGISTRY)
