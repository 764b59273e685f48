"""When the SDK reads a topic's partition count again (``sdk._metadata.PartitionCounts``), without a broker.

A clock of our own stands in for time, so "older than the age limit" is a step, not a wait.
"""

from __future__ import annotations

import pytest

from sdk import Producer
from sdk._metadata import DEFAULT_METADATA_MAX_AGE_MS, PartitionCounts
from sdk._routing import PartitionRouter, highest_named
from sdk.errors import PartitionNotFoundError, ProducerFencedError, TopicNotFoundError
from sdk.message import Message


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_count_is_trusted_until_it_is_older_than_the_age_limit() -> None:
    clock = Clock()
    counts = PartitionCounts(max_age_ms=5_000, clock=clock)
    assert counts.lookup("orders") is None  # never read
    counts.learned("orders", 2)
    assert counts.lookup("orders") == 2
    clock.now += 4.999
    assert counts.lookup("orders") == 2
    clock.now += 0.001
    assert counts.lookup("orders") is None  # five seconds old: read it again
    counts.learned("orders", 4)
    assert counts.lookup("orders") == 4


def test_the_default_age_limit_is_five_minutes_like_kafkas_clients() -> None:
    assert DEFAULT_METADATA_MAX_AGE_MS == 300_000
    clock = Clock()
    counts = PartitionCounts(clock=clock)
    counts.learned("orders", 2)
    clock.now += 299.9
    assert counts.lookup("orders") == 2
    clock.now += 0.1
    assert counts.lookup("orders") is None


def test_an_age_limit_of_zero_reads_the_count_for_every_send() -> None:
    counts = PartitionCounts(max_age_ms=0, clock=Clock())
    counts.learned("orders", 2)
    assert counts.lookup("orders") is None


def test_a_partition_beyond_the_count_makes_it_read_again_at_once() -> None:
    counts = PartitionCounts(clock=Clock())
    counts.learned("orders", 2)
    assert counts.lookup("orders", partition=1) == 2
    assert counts.lookup("orders", partition=2) is None  # the topic may have grown meanwhile
    assert counts.lookup("orders") == 2  # a keyed send still routes by what is known


@pytest.mark.parametrize("refusal", [PartitionNotFoundError("gone"), TopicNotFoundError("gone")])
def test_a_refused_partition_or_topic_makes_the_count_be_read_again(refusal: Exception) -> None:
    counts = PartitionCounts(clock=Clock())
    counts.learned("orders", 4)
    counts.learned("payments", 3)
    with pytest.raises(type(refusal)), counts.watching("orders"):
        raise refusal
    assert counts.lookup("orders") is None
    assert counts.lookup("payments") == 3  # only the refused topic


def test_other_failures_leave_the_count_alone() -> None:
    counts = PartitionCounts(clock=Clock())
    counts.learned("orders", 4)
    with pytest.raises(ProducerFencedError), counts.watching("orders"):
        raise ProducerFencedError("fenced")
    assert counts.lookup("orders") == 4


def test_a_negative_age_limit_is_refused_when_the_client_is_made() -> None:
    with pytest.raises(ValueError, match="metadata_max_age_ms"):
        Producer("http://127.0.0.1:1", metadata_max_age_ms=-1)


def test_a_batch_is_split_by_the_partition_each_message_goes_to() -> None:
    router = PartitionRouter()
    messages = [Message("t", 1, key="a"), Message("t", 2, partition=2), Message("t", 3, key="a")]
    split = router.split("t", messages, None, 3)
    assert sorted(i for indexes in split.values() for i in indexes) == [0, 1, 2]
    assert 1 in split[2]
    assert next(p for p, indexes in split.items() if 0 in indexes) == next(p for p, indexes in split.items() if 2 in indexes)
    assert router.split("t", messages, 1, 3) == {1: [0, 1, 2]}  # the call's partition wins over each message's


def test_the_highest_named_partition_is_what_the_count_must_reach_past() -> None:
    assert highest_named([Message("t", 1), Message("t", 2, partition=5), Message("t", 3, partition=1)]) == 5
    assert highest_named([Message("t", 1, partition=5)], partition=0) == 0
    assert highest_named([Message("t", 1, key="k")]) is None


def test_a_misspelt_connection_option_is_refused_like_any_unknown_keyword() -> None:
    with pytest.raises(TypeError, match="tiemout"):
        Producer("http://127.0.0.1:1", tiemout=3)  # type: ignore[call-arg]
