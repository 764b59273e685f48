"""Consumer bookkeeping and produce-outcome classification, without a broker."""

from __future__ import annotations

import httpx
import pytest

from sdk._consumer_core import ConsumerCore, normalise_topics
from sdk._routing import SequenceSession, outcome_unknown
from sdk.errors import (
    BrokerUnavailableError,
    IllegalStateError,
    InternalError,
    MessageTooLargeError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    TopicNotFoundError,
    UnknownProducerIdError,
)
from sdk.message import Message
from sdk.models import (
    CommittedOffset,
    FetchResult,
    PartitionInfo,
    ProducerIdentity,
    TopicMetadata,
)

METADATA = {"t": TopicMetadata("t", (PartitionInfo(0, 2, 10, 8), PartitionInfo(1, 0, 5, 5)))}


def core(**kwargs: object) -> ConsumerCore:
    options: dict[str, object] = {"partitions": None, "isolation_level": "read_committed", "auto_offset_reset": "earliest"}
    options.update(kwargs)
    return ConsumerCore("g", "t", **options)  # type: ignore[arg-type]


def test_topics_accept_strings_comma_lists_and_iterables() -> None:
    assert normalise_topics("a") == ["a"]
    assert normalise_topics("a, b") == ["a", "b"]
    assert normalise_topics(("a", "b")) == ["a", "b"]


def test_start_at_committed_offsets_else_log_start_or_end() -> None:
    earliest = core()
    earliest.assign([("t", 0), ("t", 1)], METADATA, [CommittedOffset("t", 1, 3)])
    assert earliest.positions == {("t", 0): 2, ("t", 1): 3}
    assert earliest.uncommitted() == {("t", 0): 2}
    latest = core(auto_offset_reset="latest")
    latest.assign([("t", 0)], METADATA, [])
    assert latest.positions == {("t", 0): 10}


def test_positions_follow_next_offset_and_commits_clear_them() -> None:
    c = core()
    c.assign(c.assignment_for(list(METADATA.values())), METADATA, [])
    message = Message("t", "v", partition=0, offset=2)
    # next_offset may jump past aborted data and transaction markers.
    assert c.record(("t", 0), FetchResult([message], 6, 10, 8)) == [message]
    assert c.positions[("t", 0)] == 6
    c.mark_committed(c.uncommitted())
    assert c.uncommitted() == {}
    c.seek(("t", 0), 0)
    assert c.uncommitted() == {("t", 0): 0}
    with pytest.raises(IllegalStateError):
        c.seek(("other", 0), 0)


def test_rotation_starts_somewhere_else_each_time() -> None:
    c = core()
    c.assign([("t", 0), ("t", 1)], METADATA, [])
    assert c.rotation() == [("t", 0), ("t", 1)]
    assert c.rotation() == [("t", 1), ("t", 0)]


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError):
        core(isolation_level="dirty")
    with pytest.raises(ValueError):
        core(auto_offset_reset="middle")


@pytest.mark.parametrize(
    ("error", "unknown"),
    [
        (TopicNotFoundError("x", status=404), False),
        (MessageTooLargeError("x", status=413), False),
        (OutOfOrderSequenceError("x", status=409), True),
        (UnknownProducerIdError("x", status=404), True),
        (ProducerFencedError("x", status=409), True),
        (InternalError("x", status=500), True),
        (BrokerUnavailableError("x"), True),
        (httpx.ReadError("x"), True),
    ],
)
def test_which_produce_failures_leave_the_outcome_unknown(error: BaseException, unknown: bool) -> None:
    assert outcome_unknown(error) is unknown


def test_sequence_session_numbers_batches_per_partition() -> None:
    session = SequenceSession(ProducerIdentity(1, 0))
    assert session.base_sequence(("t", 0)) == 0
    session.acknowledge(("t", 0), 0, 5)
    session.acknowledge(("t", 0), 5, 1)
    assert (session.base_sequence(("t", 0)), session.base_sequence(("t", 1))) == (6, 0)
