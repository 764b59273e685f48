"""Key → partition mapping: a copy of the broker's ``half_store/domain/partitioner.py`` (Kafka murmur2).

The SDK never imports broker code, so this is a verbatim copy; a unit test
(``tests/unit/test_sdk_partitioner.py``) checks both agree on many keys.

``partition = (murmur2(utf8(key)) & 0x7FFFFFFF) % partitions`` with Kafka's
murmur2 variant (seed 0x9747B28C). Clients that compute partitions themselves
(the SDK does) must use exactly this function so that a key lands in the same
partition whoever picks it; it also means keys partition the same way as in a
Kafka cluster with the same partition count.
"""

from __future__ import annotations

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 (``org.apache.kafka.common.utils.Utils.murmur2``), as a signed int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    rounded = length & ~3
    for i in range(0, rounded, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    remaining = length & 3
    if remaining == 3:
        h ^= data[rounded + 2] << 16
    if remaining >= 2:
        h ^= data[rounded + 1] << 8
    if remaining >= 1:
        h ^= data[rounded]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: str, partitions: int) -> int:
    """The partition a keyed message goes to in a topic of ``partitions`` partitions."""
    return (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % partitions
