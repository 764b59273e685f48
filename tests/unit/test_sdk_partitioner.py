"""The SDK's copy of the partitioner must agree with the broker's, key for key."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from half_store.domain import partitioner as broker_partitioner
from sdk import _partitioner as sdk_partitioner
from sdk._routing import PartitionRouter
from sdk.errors import PartitionNotFoundError

# org.apache.kafka.common.utils.UtilsTest#testMurmur2
KAFKA_VECTORS = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), sorted(KAFKA_VECTORS.items()))
def test_sdk_murmur2_matches_kafka(key: str, expected: int) -> None:
    assert sdk_partitioner.murmur2(key.encode()) == expected


def test_sdk_and_broker_agree_on_many_keys() -> None:
    keys = [f"key-{i}" for i in range(5000)] + ["", "ü", "日本語", "a" * 1000, "order-42", "\x00"]
    for partitions in (1, 2, 3, 7, 12, 64, 1000):
        for key in keys:
            assert sdk_partitioner.partition_for_key(key, partitions) == broker_partitioner.partition_for_key(
                key, partitions
            ), (key, partitions)


@settings(max_examples=300, deadline=None)
@given(key=st.text(max_size=200), partitions=st.integers(min_value=1, max_value=10_000))
def test_sdk_and_broker_agree_on_arbitrary_keys(key: str, partitions: int) -> None:
    assert sdk_partitioner.partition_for_key(key, partitions) == broker_partitioner.partition_for_key(key, partitions)


def test_router_uses_key_hash_explicit_partition_and_round_robin() -> None:
    router = PartitionRouter()
    assert router.choose("t", "k", None, 5) == broker_partitioner.partition_for_key("k", 5)
    assert router.choose("t", "k", 3, 5) == 3
    assert [router.choose("t", None, None, 3) for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    with pytest.raises(PartitionNotFoundError):
        router.choose("t", None, 5, 5)
