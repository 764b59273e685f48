"""Sans-I/O group membership shared by :class:`~sdk.Consumer` and :class:`~sdk.AsyncConsumer`.

The broker decides the assignment (KIP-848: server-side assignor, cooperative hand-over).
A member only reports what it holds and follows what it is told:

- ``assignment`` is the broker's latest word: the partitions this member may read.
- ``applied`` is what the consumer reads now. The background heartbeat never changes it:
  partitions are taken up and given up in ``poll()``, between the user's batches, so a
  partition is never given up in the middle of processing it.
- A heartbeat reports ``owned = applied | assignment``: everything the consumer reads or is
  about to read. A revoked partition stays in ``owned`` until ``poll()`` has committed it
  (at-least-once) and let it go; the broker gives it to another member only after that.
- A member that is told it is unknown (its session lapsed) or fenced (a stale epoch, e.g.
  after a lost heartbeat answer) has lost its partitions: they are dropped without a
  commit (the commit would be refused anyway), and it joins again under a new member id.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from sdk import calls
from sdk._http import Call
from sdk.calls import TopicPartition
from sdk.errors import FencedMemberEpochError
from sdk.models import ConsumerPositions, GroupMetadata, MemberAssignment

DELIVERY_GUARANTEES = ("at_most_once", "at_least_once", "exactly_once")


def new_member_id() -> str:
    """A member id chosen by the client, so a join whose answer was lost can be sent again."""
    return uuid.uuid4().hex


class Membership:
    """One consumer's place in its group; the consumer performs the calls this object builds."""

    def __init__(self, group: str, topics: Iterable[str], session_timeout_ms: int | None) -> None:
        self.group = group
        self.topics = sorted(set(topics))
        self.session_timeout_ms = session_timeout_ms
        self.member_id = new_member_id()
        self.member_epoch: int | None = None  # None until joined
        self.assignment: frozenset[TopicPartition] = frozenset()
        self.applied: frozenset[TopicPartition] = frozenset()
        self.lost: frozenset[TopicPartition] = frozenset()  # applied under a membership that is gone
        self.heartbeat_interval = 3.0
        self._reported: frozenset[TopicPartition] = frozenset()

    @property
    def joined(self) -> bool:
        return self.member_epoch is not None

    def metadata(self) -> GroupMetadata | None:
        """Who this member is now, for offset commits (``None`` before it joined)."""
        if self.member_epoch is None:
            return None
        return GroupMetadata(self.group, self.member_id, self.member_epoch)

    # -- requests -------------------------------------------------------------------------

    def join_call(self) -> Call[MemberAssignment]:
        return calls.join_group(self.group, self.member_id, self.topics, self.session_timeout_ms)

    def heartbeat_call(self) -> Call[MemberAssignment]:
        assert self.member_epoch is not None, "join first"
        self._reported = self.owned()
        return calls.heartbeat(self.group, self.member_id, self.member_epoch, sorted(self._reported))

    def leave_call(self, member_id: str | None = None) -> Call[None]:
        return calls.leave_group(self.group, member_id or self.member_id)

    def owned(self) -> frozenset[TopicPartition]:
        """What a heartbeat reports: what the consumer reads, or is about to."""
        return self.applied | self.assignment

    # -- answers -------------------------------------------------------------------------

    def answered(self, answer: MemberAssignment) -> bool:
        """A join or heartbeat answer. True when the next heartbeat should go at once: the
        member no longer holds something it last reported (a revoked partition it never took up)."""
        self.member_epoch = answer.member_epoch
        self.assignment = answer.assignment
        self.heartbeat_interval = max(0.01, answer.heartbeat_interval_ms / 1000)
        return bool(self._reported - self.owned())

    def lose_membership(self) -> str:
        """The broker no longer knows this member (or fenced it): drop everything, join anew.

        Returns the old member id, to leave with (so its partitions are freed now, not at expiry).
        """
        old = self.member_id
        self.lost = self.lost | self.applied
        self.member_id = new_member_id()
        self.member_epoch = None
        self.assignment = frozenset()
        self._reported = frozenset()
        return old

    # -- what poll() does between batches -------------------------------------------------

    def pending_changes(self) -> tuple[list[TopicPartition], list[TopicPartition], list[TopicPartition]]:
        """(lost, revoked, assigned): what ``poll()`` must drop without a commit, give up, take up."""
        lost = sorted(self.lost & self.applied)
        keep = self.applied - self.lost
        revoked = sorted(keep - self.assignment)
        assigned = sorted(self.assignment - keep) if self.joined else []
        return lost, revoked, assigned

    def dropped(self, partitions: Iterable[TopicPartition]) -> None:
        gone = frozenset(partitions)
        self.applied -= gone
        self.lost -= gone

    def taken_up(self, partitions: Iterable[TopicPartition]) -> None:
        self.applied |= frozenset(partitions)


def committing_member(
    offsets: Mapping[TopicPartition, int], group: str | GroupMetadata
) -> tuple[str, GroupMetadata | None]:
    """(group, member) an offset commit in a transaction goes as.

    ``group`` may be the consumer's :class:`GroupMetadata`, or the group's name: then the
    member that took ``offsets`` (a :class:`ConsumerPositions`) commits them, if any.
    """
    if isinstance(group, GroupMetadata):
        return group.group, group
    taken_by = offsets.group_metadata if isinstance(offsets, ConsumerPositions) else None
    return group, taken_by if taken_by is not None and taken_by.group == group else None


def exactly_once_committer(group: str, membership: Membership | None) -> str | GroupMetadata:
    """Who an exactly-once batch's offsets commit as: the consumer's member at its current epoch.

    Only a consumer that reads given partitions without joining (no ``membership``) commits by
    the group's name. A group consumer that has lost its membership must not: offsets by name
    are taken unchecked against the group's members, so a zombie's batch would commit beside
    its partitions' new owner. It is fenced here instead, and the batch is read again by the owner.
    """
    if membership is None:
        return group
    metadata = membership.metadata()
    if metadata is None:
        raise FencedMemberEpochError(f"this consumer is no longer a member of group {group!r}")
    return metadata


def refreshed_member(offsets: Mapping[TopicPartition, int], member: GroupMetadata | None) -> GroupMetadata | None:
    """After a refusal as ``member``: the same consumer's membership now, if it moved on (a heartbeat
    answered in between with a new epoch); None when there is nothing newer to try."""
    if member is None or not isinstance(offsets, ConsumerPositions) or offsets.current_metadata is None:
        return None
    now: GroupMetadata | None = offsets.current_metadata()
    if now is None or now == member or now.group != member.group:
        return None
    return now
