"""The consumer's side of the group protocol, without a broker: what it reports and what poll() must do."""

from __future__ import annotations

import pytest

from sdk._consumer_core import ConsumerCore
from sdk._membership import Membership, committing_member, refreshed_member
from sdk.models import ConsumerPositions, GroupMetadata, MemberAssignment

A, B, C = ("t", 0), ("t", 1), ("t", 2)


def answer(epoch: int, *partitions: tuple[str, int], interval_ms: int = 3000) -> MemberAssignment:
    return MemberAssignment("m", epoch, interval_ms, frozenset(partitions))


def joined(*applied: tuple[str, int]) -> Membership:
    membership = Membership("g", ["t"], None)
    membership.answered(answer(1, *applied))
    membership.taken_up(applied)
    return membership


# (applied before, the broker's assignment) -> (revoked, assigned) that poll() acts on
@pytest.mark.parametrize(
    ("applied", "assignment", "revoked", "assigned"),
    [
        ((A, B), (A, B), [], []),
        ((A, B), (A,), [B], []),
        ((A,), (A, B, C), [], [B, C]),
        ((A, B), (B, C), [A], [C]),
        ((), (), [], []),
    ],
)
def test_what_poll_takes_up_and_gives_up(
    applied: tuple[tuple[str, int], ...],
    assignment: tuple[tuple[str, int], ...],
    revoked: list[tuple[str, int]],
    assigned: list[tuple[str, int]],
) -> None:
    membership = joined(*applied)
    membership.answered(answer(2, *assignment))
    assert membership.pending_changes() == ([], revoked, assigned)


def test_a_revoked_partition_is_reported_until_poll_lets_it_go() -> None:
    membership = joined(A, B)
    membership.heartbeat_call()
    assert membership.answered(answer(2, A)) is False  # B still applied: nothing to tell yet
    assert membership.owned() == {A, B}
    membership.dropped([B])
    assert membership.owned() == {A}  # the next heartbeat lets B go


def test_a_revoked_partition_never_taken_up_is_let_go_at_once() -> None:
    membership = joined(A)
    membership.answered(answer(2, A, B))  # B granted, poll() has not taken it up yet
    membership.heartbeat_call()  # reports A and B
    assert membership.answered(answer(3, A)) is True  # B is gone before it was read: heartbeat again now
    assert membership.pending_changes() == ([], [], [])


def test_a_lost_membership_drops_everything_without_commit_and_joins_anew() -> None:
    membership = joined(A, B)
    old = membership.member_id
    assert membership.lose_membership() == old
    assert not membership.joined and membership.member_id != old and membership.metadata() is None
    membership.answered(answer(1, B))  # the new member gets B back
    assert membership.pending_changes() == ([A, B], [], [B])  # drop both, then take B up afresh
    membership.dropped([A, B])
    membership.taken_up([B])
    assert membership.pending_changes() == ([], [], [])


def test_the_heartbeat_interval_follows_the_broker() -> None:
    membership = joined()
    membership.answered(answer(1, interval_ms=200))
    assert membership.heartbeat_interval == 0.2


def test_offsets_commit_as_the_member_that_read_them() -> None:
    taken = GroupMetadata("g", "m", 4)
    now = GroupMetadata("g", "m", 5)
    positions = ConsumerPositions({A: 3}, taken, lambda: now)
    assert committing_member(positions, "g") == ("g", taken)
    assert committing_member({A: 3}, "g") == ("g", None)  # a plain dict: no member (v1)
    assert committing_member(positions, "other") == ("other", None)
    assert committing_member({A: 3}, now) == ("g", now)
    assert refreshed_member(positions, taken) == now  # a heartbeat moved the epoch on: try once more
    assert refreshed_member(ConsumerPositions({A: 3}, now, lambda: now), now) is None


def test_delivery_is_checked() -> None:
    with pytest.raises(ValueError, match="delivery"):
        ConsumerCore("g", "t", partitions=None, isolation_level="read_committed", auto_offset_reset="earliest",
                     delivery="sometimes")
    with pytest.raises(ValueError, match="read_committed"):
        ConsumerCore("g", "t", partitions=None, isolation_level="read_uncommitted", auto_offset_reset="earliest",
                     delivery="exactly_once")
    at_most = ConsumerCore("g", "t", partitions=None, isolation_level="read_committed", auto_offset_reset="earliest",
                           delivery="at_most_once")
    assert at_most.commits_before_handing_out and not at_most.commits_at_poll and not at_most.commits_before_giving_up
