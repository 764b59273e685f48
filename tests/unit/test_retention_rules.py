"""Retention's decisions without a database: effective limits, and when a partition has work."""

from __future__ import annotations

import pytest

from half_store.domain.admin_records import KEEP_FOREVER, TopicConfig
from half_store.storage.retention_store import PartitionHead, needs_work


@pytest.mark.parametrize(
    ("own", "default", "effective"),
    [
        (None, None, None),  # nothing set anywhere: kept forever
        (None, 1000, 1000),  # the broker's default
        (500, 1000, 500),  # the topic's own wins
        (KEEP_FOREVER, 1000, None),  # -1: forever, whatever the default
        (0, None, 0),  # zero is a limit: everything stable goes
    ],
)
def test_effective_limits(own: int | None, default: int | None, effective: int | None) -> None:
    config = TopicConfig(retention_ms=own, retention_bytes=own)
    assert config.effective(default, default) == TopicConfig(effective, effective)
    assert config.effective(default, default).retains == (effective is not None)


def head(
    log_start: int = 0,
    high_watermark: int = 10,
    timestamp: int | None = 1_000,
    counted_to: int | None = None,
    counted_bytes: int = 0,
) -> PartitionHead:
    return PartitionHead(0, log_start, high_watermark, timestamp, counted_to, counted_bytes)


def test_an_empty_partition_has_nothing_to_give() -> None:
    limits = TopicConfig(retention_ms=0, retention_bytes=0)
    assert not needs_work(head(log_start=10, high_watermark=10, timestamp=None), limits, now=10_000)


def test_time_limit_looks_at_the_oldest_message_only() -> None:
    limits = TopicConfig(retention_ms=5_000)
    assert needs_work(head(timestamp=1_000), limits, now=7_000)  # older than now - 5 s
    assert not needs_work(head(timestamp=2_000), limits, now=7_000)  # exactly at the limit stays


def test_size_limit_counts_new_messages_then_trims() -> None:
    limits = TopicConfig(retention_bytes=100)
    assert needs_work(head(counted_to=None), limits, now=0)  # never counted
    assert needs_work(head(counted_to=5, counted_bytes=10), limits, now=0)  # messages left to count
    assert needs_work(head(counted_to=10, counted_bytes=101), limits, now=0)  # counted, over the limit
    assert not needs_work(head(counted_to=10, counted_bytes=100), limits, now=0)  # counted, at the limit
