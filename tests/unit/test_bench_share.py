"""The share-group benchmark's report: the median round per row, and the ratio to RabbitMQ."""

from __future__ import annotations

from bench.share import Drain, median_drains, render


def test_the_median_round_is_reported_with_its_ratio_to_the_peer() -> None:
    drains = [
        Drain("halfmq", "sqlite", 1, 1000, seconds, None) for seconds in (1.0, 0.5, 2.0)
    ] + [Drain("RabbitMQ", "-", 1, 1000, seconds, None) for seconds in (0.25, 0.5, 1.0)]
    medians = median_drains(drains)
    assert sorted((d.system, d.rate) for d in medians) == [("RabbitMQ", 2000.0), ("halfmq", 1000.0)]
    _, halfmq, peer = render(medians).splitlines()
    assert halfmq.startswith("halfmq") and halfmq.endswith("0.50x") and peer.startswith("RabbitMQ")


def test_a_failed_drain_shows_its_error_and_no_ratio() -> None:
    table = render([Drain("halfmq", "postgresql", 4, 0, 0.0, "drained 0 of 10"),
                    Drain("RabbitMQ", "-", 4, 10, 1.0, None)])
    assert "drained 0 of 10" in table and "x" not in table.splitlines()[1].split()[-1]
