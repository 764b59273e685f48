"""Prometheus metrics of the broker process (served at /metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

REQUESTS = Counter("halfmq_http_requests_total", "HTTP requests", ["method", "route", "status"])
REQUEST_LATENCY = Histogram(
    "halfmq_http_request_seconds",
    "HTTP request latency",
    ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
MESSAGES_IN = Counter("halfmq_messages_in_total", "Messages appended to user topics", ["topic"])
MESSAGES_OUT = Counter("halfmq_messages_out_total", "Messages returned by fetches", ["topic"])
HALF_MESSAGES = Counter("halfmq_half_messages_total", "Half-message events", ["event"])
CHECKS = Counter("halfmq_checks_total", "Back-checks sent to producers, by answer", ["result"])
TRANSACTIONS = Counter("halfmq_transactions_total", "Kafka-mode transactions ended, by outcome", ["outcome"])
LONG_POLL_WAITERS = Gauge("halfmq_long_poll_waiters", "Fetches waiting for data")
CHECKER_LEADER = Gauge("halfmq_checker_leader", "1 while this process holds the checker lease")
GROUP_COMMITS = Counter("halfmq_group_commits_total", "Database transactions committed by the group-commit writer")
GROUP_COMMIT_UNITS = Counter("halfmq_group_commit_units_total", "Write units those transactions carried")
