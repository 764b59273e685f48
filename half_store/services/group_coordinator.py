"""Consumer groups with members: join, heartbeat, leave, session expiry, and what operators see.

KIP-848's shape with the state in the database: every change to a group is one
group-commit unit that locks the group's row, loads the group, lets the pure domain
decide (:class:`~half_store.domain.consumer_group.ConsumerGroup`: assignor, then
cooperative reconciliation) and writes back the difference. Any broker process on the
same database can serve any member, and a restart loses nothing.

Members whose session lapsed are removed in the same unit whenever anyone of their group
joins, heartbeats or leaves, and by the checker's job (:meth:`GroupCoordinator.expire_sessions`)
otherwise, so expiry does not wait for the job. A unit answers an error (unknown member,
stale epoch) as a value rather than raising it, so the expiries it made still commit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from half_store.domain.consumer_group import ConsumerGroup
from half_store.domain.errors import (
    BrokerError,
    FencedMemberEpoch,
    GroupNotFound,
    InvalidSessionTimeout,
    TopicNotFound,
    UnknownMember,
)
from half_store.domain.group_assignor import TopicPartition
from half_store.domain.group_records import (
    GroupSummary,
    GroupView,
    MemberAnswer,
    MemberView,
    NamedPartition,
)
from half_store.domain.group_state import (
    RECONCILING_HEARTBEAT_MS,
    GroupState,
    MemberState,
    OwnershipState,
    Reconciled,
    assignment_of,
)
from half_store.domain.records import GroupLag, now_ms
from half_store.metrics import GROUP_REBALANCES
from half_store.settings import Settings
from half_store.storage import group_store, membership_store
from half_store.storage.store import Store


@dataclass(frozen=True, slots=True)
class _MemberRequest:
    group: str
    member_id: str
    join: bool
    member_epoch: int | None = None
    owned: frozenset[TopicPartition] | None = None
    topics: tuple[str, ...] | None = None
    session_timeout_ms: int | None = None


@dataclass(frozen=True, slots=True)
class _Outcome:
    reconciled: Reconciled | None
    session_timeout_ms: int
    names: dict[int, str]
    error: BrokerError | None = None


class GroupCoordinator:
    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings

    # -- members ------------------------------------------------------------------------

    async def join(
        self, group: str, member_id: str, topics: Sequence[str], session_timeout_ms: int | None
    ) -> MemberAnswer:
        """A new member (or, with the id of a live one, the answer a lost join would have had)."""
        timeout = self.checked_session_timeout(session_timeout_ms)
        for name in topics:
            await self.store.topic(name)  # TopicNotFound for a subscription to a topic that does not exist
        request = _MemberRequest(group, member_id, join=True, topics=tuple(topics), session_timeout_ms=timeout)
        return await self._member_call(request)

    async def heartbeat(
        self,
        group: str,
        member_id: str,
        member_epoch: int,
        owned: Sequence[NamedPartition] | None,
        topics: Sequence[str] | None = None,
    ) -> MemberAnswer:
        """A sign of life that reports what the member still holds (None: nothing new, so nothing is freed);
        answers its assignment."""
        for name in topics or ():
            await self.store.topic(name)
        request = _MemberRequest(
            group, member_id, join=False, member_epoch=member_epoch,
            owned=None if owned is None else await self._topic_ids(owned),
            topics=None if topics is None else tuple(topics),
        )
        return await self._member_call(request)

    async def leave(self, group: str, member_id: str) -> None:
        """The member leaves; its partitions are free for the others at once."""

        def unit(conn: Connection) -> BrokerError | None:
            now = now_ms()
            epoch = membership_store.lock_group(conn, group, now, create=False)
            if epoch is None:
                return UnknownMember(f"group {group!r} has no member {member_id!r}")
            loaded = membership_store.load_group(conn, group, epoch)
            changed = loaded.copy()
            changed.expire(now)
            error: BrokerError | None = None
            if member_id in changed.members:
                changed.remove(member_id)
            else:
                error = UnknownMember(f"group {group!r} has no member {member_id!r} (it left or expired)")
            self._rebalance(conn, changed, "leave" if error is None else "expiry")
            membership_store.save_group(conn, loaded, changed, now)
            return error

        error = await self.store.write(unit)
        if error is not None:
            raise error

    def checked_session_timeout(self, session_timeout_ms: int | None) -> int:
        low, high = self.settings.group_min_session_timeout_ms, self.settings.group_max_session_timeout_ms
        if session_timeout_ms is None:
            return min(max(self.settings.group_default_session_timeout_ms, low), high)
        if not low <= session_timeout_ms <= high:
            raise InvalidSessionTimeout(f"session timeout {session_timeout_ms} ms is outside {low}..{high} ms")
        return session_timeout_ms

    async def _member_call(self, request: _MemberRequest) -> MemberAnswer:
        outcome = await self.store.write(lambda conn: self._member_unit(conn, request))
        if outcome.error is not None:
            raise outcome.error
        assert outcome.reconciled is not None
        done = outcome.reconciled
        interval = min(self.settings.group_heartbeat_interval_ms, max(1, outcome.session_timeout_ms // 3))
        if done.state is not MemberState.STABLE:
            interval = min(interval, RECONCILING_HEARTBEAT_MS)
        assignment = _named(done.assignment, outcome.names)
        return MemberAnswer(request.member_id, done.member_epoch, interval, assignment, done.state)

    def _member_unit(self, conn: Connection, request: _MemberRequest) -> _Outcome:
        now = now_ms()
        epoch = membership_store.lock_group(conn, request.group, now, create=request.join)
        if epoch is None:
            unknown = UnknownMember(f"group {request.group!r} has no member {request.member_id!r}")
            return _Outcome(None, 0, {}, unknown)
        loaded = membership_store.load_group(conn, request.group, epoch)
        group = loaded.copy()
        reason = "expiry" if group.expire(now) else "heartbeat"
        member = group.members.get(request.member_id)
        error: BrokerError | None = None
        if request.join and member is None:
            assert request.topics is not None and request.session_timeout_ms is not None
            group.join(request.member_id, request.topics, request.session_timeout_ms, now)
            reason = "join"
        elif request.join:  # the same join again: its answer was lost
            group.touch(request.member_id, now, topics=request.topics, session_timeout_ms=request.session_timeout_ms)
        elif member is None:
            error = UnknownMember(f"group {request.group!r} has no member {request.member_id!r} (it left or expired)")
        elif request.member_epoch != member.member_epoch:
            error = FencedMemberEpoch(
                f"member epoch {request.member_epoch} of {request.member_id!r} is stale: the current one is "
                f"{member.member_epoch}; join again"
            )
        else:
            group.touch(request.member_id, now, topics=request.topics)
        names = self._rebalance(conn, group, reason)
        reconciled = None
        if error is None:
            reconciled = group.reconcile(request.member_id, None if request.join else request.owned)
            names.update(membership_store.topic_names(conn, {t for t, _ in reconciled.assignment} - set(names)))
        membership_store.save_group(conn, loaded, group, now)
        timeout = group.members[request.member_id].session_timeout_ms if error is None else 0
        return _Outcome(reconciled, timeout, names, error)

    @staticmethod
    def _rebalance(conn: Connection, group: ConsumerGroup, reason: str) -> dict[int, str]:
        """New targets from the members and the topics as they are now; the topic names by id."""
        topics = membership_store.subscribed_topics(conn, group.subscribed_topics())
        if group.rebalance(topics):
            GROUP_REBALANCES.labels(reason).inc()
        return {t.topic_id: t.name for t in topics.values()}

    async def _topic_ids(self, partitions: Sequence[NamedPartition]) -> frozenset[TopicPartition]:
        """The partitions a heartbeat reports, by topic id; names of topics that do not exist are left out."""
        known: dict[str, int] = {}
        for name in {name for name, _ in partitions}:
            with contextlib.suppress(TopicNotFound):
                known[name] = (await self.store.topic(name)).topic_id
        return frozenset((known[name], p) for name, p in partitions if name in known)

    # -- expiry (the checker) -------------------------------------------------------------

    async def expire_sessions(self, limit: int = 100) -> int:
        """Remove members whose session lapsed, one group per unit; how many groups changed."""
        groups = await self.store.read(lambda conn: membership_store.groups_with_expired_members(conn, now_ms(), limit))
        for group in groups:

            def unit(conn: Connection, group: str = group) -> None:
                now = now_ms()
                epoch = membership_store.lock_group(conn, group, now, create=False)
                if epoch is None:
                    return
                loaded = membership_store.load_group(conn, group, epoch)
                changed = loaded.copy()
                if changed.expire(now):
                    self._rebalance(conn, changed, "expiry")
                    membership_store.save_group(conn, loaded, changed, now)

            await self.store.write(unit)
        return len(groups)

    # -- what operators see --------------------------------------------------------------------

    async def list_groups(self) -> list[GroupSummary]:
        def query(conn: Connection) -> tuple[list[tuple[str, int, bool]], list[GroupLag]]:
            return membership_store.group_summaries(conn, now_ms()), group_store.all_lags(conn)

        rows, lags = await self.store.read(query)
        totals: dict[str, int] = {}
        for found in lags:
            totals[found.group] = totals.get(found.group, 0) + found.lag
        return [
            GroupSummary(
                name,
                GroupState.EMPTY if live == 0 else GroupState.RECONCILING if reconciling else GroupState.STABLE,
                live,
                totals.get(name, 0),
            )
            for name, live, reconciling in rows
        ]

    async def lags(self) -> list[GroupLag]:
        """Every group's lag per partition, read when /metrics is scraped."""
        return await self.store.read(group_store.all_lags)

    async def describe(self, group: str) -> GroupView:
        def query(conn: Connection) -> GroupView:
            epoch, has_offsets = membership_store.group_exists(conn, group)
            if epoch is None and not has_offsets:
                raise GroupNotFound(f"group {group!r} has neither members nor committed offsets")
            loaded = membership_store.load_group(conn, group, epoch or 0)
            held = {tp for tp in loaded.partitions} | {tp for tps in loaded.targets.values() for tp in tps}
            names = membership_store.topic_names(conn, {t for t, _ in held})
            offsets = group_store.group_offsets_with_lag(conn, group)
            now = now_ms()
            members = [_member_view(loaded, m, names) for m in sorted(loaded.members) if loaded.members[m].live_at(now)]
            return GroupView(group, loaded.state(now), loaded.group_epoch, members, offsets)

        return await self.store.read(query)

    async def live_member_counts(self) -> dict[str, int]:
        return await self.store.read(lambda conn: membership_store.live_member_counts(conn, now_ms()))


def _named(partitions: frozenset[TopicPartition], names: dict[int, str]) -> tuple[NamedPartition, ...]:
    return tuple(sorted((names[t], p) for t, p in partitions if t in names))


def _member_view(group: ConsumerGroup, member_id: str, names: dict[int, str]) -> MemberView:
    member = group.members[member_id]
    assigned = assignment_of(member_id, group.partitions)
    revoking = frozenset(
        tp for tp, o in group.partitions.items() if o.owner == member_id and o.state is OwnershipState.REVOKING
    )
    return MemberView(
        member_id,
        member.member_epoch,
        group.member_state(member_id),
        member.topics,
        member.session_timeout_ms,
        member.joined_at,
        member.last_heartbeat_at,
        _named(assigned, names),
        _named(revoking, names),
        _named(group.targets.get(member_id, frozenset()), names),
    )
