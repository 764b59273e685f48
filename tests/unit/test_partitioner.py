"""The key partitioner matches Kafka's murmur2 (vectors from Kafka's UtilsTest)."""

from __future__ import annotations

import pytest

from half_store.domain.partitioner import murmur2, partition_for_key


@pytest.mark.parametrize(("text", "expected"), [
    ("21", -973932308),
    ("foobar", -790332482),
    ("a-little-bit-long-string", -985981536),
    ("a-little-bit-longer-string", -1486304829),
    ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    ("abc", 479470107),
])
def test_murmur2_matches_kafka(text: str, expected: int) -> None:
    assert murmur2(text.encode()) == expected


def test_partitions_are_in_range_and_stable() -> None:
    for n in (1, 3, 16):
        for key in ("", "a", "ключ", "order-42"):
            assert 0 <= partition_for_key(key, n) < n
            assert partition_for_key(key, n) == partition_for_key(key, n)
