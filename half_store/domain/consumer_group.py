"""A consumer group as one group-commit unit sees it: members, partitions, targets. Pure.

Storage loads a :class:`ConsumerGroup` under the group's row lock, a service applies one
request to it (join, heartbeat, leave, expiry), and storage writes back what changed. All
the rules live here and in the two pure modules it calls: the assignor decides targets,
:func:`~half_store.domain.group_state.reconcile` moves partitions towards them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from half_store.domain.group_assignor import TopicPartition, assign
from half_store.domain.group_state import (
    GroupState,
    MemberState,
    Ownership,
    Reconciled,
    group_state,
    member_state,
    reconcile,
    release_all,
)


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    member_epoch: int
    topics: tuple[str, ...]
    session_timeout_ms: int
    joined_at: int
    last_heartbeat_at: int

    @property
    def expires_at(self) -> int:
        return self.last_heartbeat_at + self.session_timeout_ms

    def live_at(self, now: int) -> bool:
        return now <= self.expires_at


@dataclass(frozen=True, slots=True)
class SubscribedTopic:
    """A subscribed topic as it is now: its id and partition count."""

    name: str
    topic_id: int
    partitions: int


@dataclass
class ConsumerGroup:
    name: str
    group_epoch: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    # Only partitions that are not FREE; targets only for members that have one.
    partitions: dict[TopicPartition, Ownership] = field(default_factory=dict)
    targets: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)

    def copy(self) -> ConsumerGroup:
        return ConsumerGroup(self.name, self.group_epoch, dict(self.members), dict(self.partitions), dict(self.targets))

    # -- membership -------------------------------------------------------------------

    def expire(self, now: int) -> list[str]:
        """Remove members whose session lapsed; their partitions become FREE."""
        expired = sorted(m.member_id for m in self.members.values() if not m.live_at(now))
        for member_id in expired:
            self.remove(member_id)
        return expired

    def remove(self, member_id: str) -> None:
        del self.members[member_id]
        self.targets.pop(member_id, None)
        for tp in release_all(member_id, self.partitions):
            del self.partitions[tp]

    def join(self, member_id: str, topics: Iterable[str], session_timeout_ms: int, now: int) -> None:
        """A new member (epoch 0 until it is first reconciled)."""
        self.members[member_id] = Member(member_id, 0, tuple(sorted(set(topics))), session_timeout_ms, now, now)

    def touch(
        self, member_id: str, now: int, *, topics: Iterable[str] | None = None, session_timeout_ms: int | None = None
    ) -> None:
        """A sign of life; optionally a new subscription or session timeout."""
        member = replace(self.members[member_id], last_heartbeat_at=now)
        if topics is not None:
            member = replace(member, topics=tuple(sorted(set(topics))))
        if session_timeout_ms is not None:
            member = replace(member, session_timeout_ms=session_timeout_ms)
        self.members[member_id] = member

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.topics}

    # -- assignment ---------------------------------------------------------------------

    def rebalance(self, topics: Mapping[str, SubscribedTopic]) -> bool:
        """Recompute the targets (``topics``: the subscribed ones that exist); True if they changed."""
        subscriptions = {
            m.member_id: frozenset(topics[t].topic_id for t in m.topics if t in topics) for m in self.members.values()
        }
        counts = {t.topic_id: t.partitions for t in topics.values()}
        current = {m: self.targets.get(m, frozenset()) for m in self.members}
        targets = {m: tps for m, tps in assign(subscriptions, counts, current).items() if tps}
        if targets == self.targets:
            return False
        self.targets = targets
        self.group_epoch += 1
        return True

    def reconcile(self, member_id: str, owned: frozenset[TopicPartition] | None) -> Reconciled:
        """Move the member's partitions towards its target (see :func:`reconcile`) and keep the result."""
        member = self.members[member_id]
        target = self.targets.get(member_id, frozenset())
        done = reconcile(member_id, member.member_epoch, self.partitions, target, owned)
        if done.member_epoch == 0:  # a new member that got nothing yet still starts at epoch 1
            done = replace(done, member_epoch=1)
        for tp, ownership in done.changes.items():
            if ownership.owner is None:
                self.partitions.pop(tp, None)
            else:
                self.partitions[tp] = ownership
        self.members[member_id] = replace(member, member_epoch=done.member_epoch)
        return done

    # -- views ---------------------------------------------------------------------------

    def member_state(self, member_id: str) -> MemberState:
        return member_state(member_id, self.partitions, self.targets.get(member_id, frozenset()))

    def state(self, now: int) -> GroupState:
        live = [m for m in self.members.values() if m.live_at(now)]
        return group_state([self.member_state(m.member_id) for m in live])

    def held_by(self, member_id: str) -> frozenset[TopicPartition]:
        """Partitions ASSIGNED to the member or still REVOKING from it."""
        return frozenset(tp for tp, o in self.partitions.items() if o.held_by(member_id))
