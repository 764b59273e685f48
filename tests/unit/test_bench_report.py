"""The benchmark's goals: each ratio beside what the storage-free app itself reaches with the same requests."""

from __future__ import annotations

from typing import Any

from bench import report


def _row(section: str, scenario: str, rate: float, label: str = "") -> dict[str, Any]:
    return {"section": section, "db": "sqlite", "scenario": scenario, "label": label or scenario, "unit": "req/s",
            "rate": rate, "messages_per_s": rate, "rss_mb": 200.0, "concurrency": 64}


def _goal(goals: list[dict[str, Any]], starts: str) -> dict[str, Any]:
    return next(g for g in goals if g["goal"].startswith(starts))


def test_transaction_overhead_is_shown_beside_the_storage_free_apps_own() -> None:
    rows = [
        _row("ceiling", "notxn", 400), _row("halfmq", "notxn", 200),
        _row("ceiling", "txn-producer", 340), _row("halfmq", "txn-producer", 150),
    ]
    report.annotate(rows)
    goal = _goal(report.goals({"rows": rows}), "mode-2 transaction overhead (Kafka style")
    assert goal["value"] == "25.0%" and goal["met"] is False
    assert "the storage-free app's own overhead: 15.0%" in goal["detail"]


def test_pairs_against_rabbitmq_show_where_the_storage_free_app_stands() -> None:
    rows = [
        _row("ceiling", "pairs", 1500), _row("halfmq", "pairs", 600),
        _row("peer", "rabbitmq-tx", 2000, "RabbitMQ AMQP tx per message"),
    ]
    report.annotate(rows)
    goal = _goal(report.goals({"rows": rows}), "half pairs/s ahead of RabbitMQ")
    assert goal["met"] is False
    assert goal["detail"] == "0.30x; the storage-free app: 0.75x"
