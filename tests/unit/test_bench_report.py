"""The benchmark's goals: each ratio beside what the storage-free app itself reaches with the same requests."""

from __future__ import annotations

from typing import Any

from bench import report


def _row(section: str, scenario: str, rate: float, label: str = "") -> dict[str, Any]:
    return {"section": section, "db": "sqlite", "scenario": scenario, "label": label or scenario, "unit": "req/s",
            "rate": rate, "messages_per_s": rate, "rss_mb": 200.0, "concurrency": 64}


def _goal(goals: list[dict[str, Any]], starts: str) -> dict[str, Any]:
    return next(g for g in goals if g["goal"].startswith(starts))


def test_transaction_overhead_is_allowed_the_storage_free_apps_own_plus_ten_points() -> None:
    rows = [
        _row("ceiling", "notxn", 400), _row("halfmq", "notxn", 200),
        _row("ceiling", "txn-producer", 340), _row("halfmq", "txn-producer", 150),
        _row("bare", "notxn", 1000), _row("bare", "txn-producer", 900),
    ]
    report.annotate(rows)
    goal = _goal(report.goals({"rows": rows}), "mode-2 transaction overhead (Kafka style, 4 x 25")
    assert goal["value"] == "25.0%" and goal["met"] is True  # 25% <= 15% + 10 points
    assert "the storage-free app's own overhead 15.0%, the bare app's 10.0%" in goal["detail"]


def test_a_kafka_sized_transaction_is_held_to_ten_percent() -> None:
    rows = [_row("ceiling", "notxn-big", 100), _row("halfmq", "notxn-big", 50), _row("halfmq", "txn-big", 44)]
    report.annotate(rows)
    goal = _goal(report.goals({"rows": rows}), "mode-2 transaction overhead (Kafka style, 10 x 100")
    assert goal["value"] == "12.0%" and goal["met"] is False


def test_pairs_are_held_to_the_bare_ceiling_and_to_twice_rabbitmq() -> None:
    rows = [
        _row("bare", "pairs", 2000), _row("halfmq", "pairs", 600),
        _row("peer", "rabbitmq-tx", 400, "RabbitMQ AMQP tx per message"),
    ]
    report.annotate(rows)
    goal = _goal(report.goals({"rows": rows}), "half-message pairs / bare ASGI ceiling")
    assert goal["value"] == "0.30" and goal["met"] is False  # 1.5x RabbitMQ, not 2x
    assert "RabbitMQ AMQP tx x64 400 msg/s (1.50x)" in goal["detail"]


def test_single_produce_must_also_be_ahead_of_nats() -> None:
    rows = [
        _row("bare", "produce-1", 10_000), _row("halfmq", "produce-1", 5_000),
        _row("peer", "nats", 6_000, "NATS JetStream"),
    ]
    report.annotate(rows)
    goal = _goal(report.goals({"rows": rows}), "produce 1 message/request")
    assert goal["value"] == "0.50" and goal["met"] is False
