"""Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), in the core's memory.

Kafka keeps a group's generation, members, their protocol metadata and the leader's
assignment in the memory of the broker that coordinates the group, and so does this
service, in the core process of that broker (FindCoordinator names it). Join and Sync
long-poll: a join waits until every known member has rejoined (or the rebalance
timeout drops the ones that did not), a follower's sync waits for the leader's.
Offsets are halfmq's group offsets; :meth:`check_commit` is Kafka's generation check
for a commit made by a member of a classic group.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from dataclasses import dataclass, field

from half_store.domain.classic_groups import (
    ClassicGroupView,
    ClassicMemberView,
    ClassicState,
    JoinAnswer,
    JoinRequest,
    SyncAnswer,
    is_valid_move,
)
from half_store.domain.errors import FencedMemberEpoch, InternalError, UnknownMember
from half_store.settings import Settings

# Kafka's group.initial.rebalance.delay.ms is 3 s: members starting together join one
# generation instead of one each. Shorter here, since a rebalance costs little.
INITIAL_REBALANCE_DELAY_SECONDS = 0.3
EXPIRY_CHECK_SECONDS = 0.5


@dataclass
class _Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    last_heard: float = field(default_factory=time.monotonic)
    assignment: bytes = b""
    joining: asyncio.Future[JoinAnswer] | None = None
    syncing: asyncio.Future[SyncAnswer] | None = None

    def metadata_for(self, protocol: str) -> bytes:
        return next((metadata for name, metadata in self.protocols if name == protocol), b"")


@dataclass
class _Group:
    group_id: str
    state: ClassicState = ClassicState.EMPTY
    generation_id: int = 0
    protocol_type: str = ""
    protocol_name: str = ""
    leader: str = ""
    members: dict[str, _Member] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)  # ids handed out with MEMBER_ID_REQUIRED, not joined yet
    rebalance: asyncio.TimerHandle | None = None
    initial_delay: bool = False  # the first join's delay is running: others starting now join the same generation

    def move(self, target: ClassicState) -> None:
        if not is_valid_move(self.state, target):
            raise InternalError(f"classic group {self.group_id}: no move from {self.state} to {target}")
        self.state = target


class ClassicGroups:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._groups: dict[str, _Group] = {}
        self._expiry: asyncio.Task[None] | None = None

    # -- the protocol --------------------------------------------------------------------------

    async def join(self, request: JoinRequest) -> JoinAnswer:
        self._start_expiry()
        low, high = self.settings.group_min_session_timeout_ms, self.settings.group_max_session_timeout_ms
        if not low <= request.session_timeout_ms <= high:
            return JoinAnswer("INVALID_SESSION_TIMEOUT", member_id=request.member_id)
        group = self._groups.setdefault(request.group, _Group(request.group))
        if group.state is ClassicState.DEAD:
            group = self._groups[request.group] = _Group(request.group)
        if group.members and (
            request.protocol_type != group.protocol_type
            or not self._shares_protocol(group, {name for name, _ in request.protocols})
        ):
            return JoinAnswer("INCONSISTENT_GROUP_PROTOCOL", member_id=request.member_id)
        member_id = request.member_id
        if not member_id:
            member_id = f"{request.client_id or 'member'}-{secrets.token_hex(8)}"
            if request.require_known_member:
                group.pending.add(member_id)
                return JoinAnswer("MEMBER_ID_REQUIRED", member_id=member_id)
        elif member_id not in group.members and member_id not in group.pending:
            return JoinAnswer("UNKNOWN_MEMBER_ID", member_id=member_id)
        group.pending.discard(member_id)
        member = group.members.get(member_id)
        changed = member is None or member.protocols != request.protocols
        if member is None:
            member = _Member(
                member_id, request.group_instance_id, request.client_id, request.client_host, request.protocol_type,
                request.protocols, request.session_timeout_ms, request.rebalance_timeout_ms,
            )
            group.members[member_id] = member
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.last_heard = time.monotonic()
        if group.state is ClassicState.STABLE and not changed and member_id != group.leader:
            return self._join_answer(group, member)  # nothing to rebalance: the current generation stands
        if member.joining is not None and not member.joining.done():
            member.joining.set_result(JoinAnswer("REBALANCE_IN_PROGRESS", member_id=member_id))
        member.joining = asyncio.get_running_loop().create_future()
        if not group.protocol_type:
            group.protocol_type = request.protocol_type
        self._prepare_rebalance(group)
        self._complete_join_if_ready(group)
        try:
            return await asyncio.shield(member.joining)
        except asyncio.CancelledError:
            return JoinAnswer("REBALANCE_IN_PROGRESS", member_id=member_id)

    async def sync(self, group_id: str, generation_id: int, member_id: str, assignments: dict[str, bytes]) -> SyncAnswer:
        group = self._groups.get(group_id)
        if group is None or member_id not in group.members:
            return SyncAnswer("UNKNOWN_MEMBER_ID")
        if generation_id != group.generation_id:
            return SyncAnswer("ILLEGAL_GENERATION")
        if group.state is ClassicState.PREPARING_REBALANCE:
            return SyncAnswer("REBALANCE_IN_PROGRESS")
        member = group.members[member_id]
        member.last_heard = time.monotonic()
        if group.state is ClassicState.STABLE:
            return SyncAnswer(None, member.assignment, group.protocol_type, group.protocol_name)
        if member_id == group.leader:
            for other in group.members.values():
                other.assignment = assignments.get(other.member_id, b"")
            group.move(ClassicState.STABLE)
            for other in group.members.values():
                if other.syncing is not None and not other.syncing.done():
                    other.syncing.set_result(SyncAnswer(None, other.assignment, group.protocol_type, group.protocol_name))
            return SyncAnswer(None, member.assignment, group.protocol_type, group.protocol_name)
        member.syncing = asyncio.get_running_loop().create_future()
        try:
            return await asyncio.wait_for(asyncio.shield(member.syncing), member.rebalance_timeout_ms / 1000)
        except TimeoutError:
            return SyncAnswer("REBALANCE_IN_PROGRESS")

    async def heartbeat(self, group_id: str, generation_id: int, member_id: str) -> str | None:
        group = self._groups.get(group_id)
        if group is None or member_id not in group.members:
            return "UNKNOWN_MEMBER_ID"
        group.members[member_id].last_heard = time.monotonic()
        if group.state is ClassicState.PREPARING_REBALANCE:
            return "REBALANCE_IN_PROGRESS"
        if generation_id != group.generation_id:
            return "ILLEGAL_GENERATION"
        return None

    async def leave(self, group_id: str, member_ids: list[str]) -> dict[str, str | None]:
        group = self._groups.get(group_id)
        answers: dict[str, str | None] = {}
        for member_id in member_ids:
            if group is None or member_id not in group.members:
                answers[member_id] = "UNKNOWN_MEMBER_ID"
                continue
            self._remove(group, member_id)
            answers[member_id] = None
        if group is not None and any(a is None for a in answers.values()):
            self._after_departure(group)
        return answers

    async def check_commit(self, group_id: str, generation_id: int, member_id: str) -> None:
        """Kafka's OffsetCommit check: a member of the current generation, or no classic member at all."""
        group = self._groups.get(group_id)
        if generation_id < 0 and not member_id:
            if group is not None and group.members and group.state is not ClassicState.EMPTY:
                raise FencedMemberEpoch(f"group {group_id} has members; a commit must name its member and generation")
            return
        if group is None or member_id not in group.members:
            raise UnknownMember(f"{member_id!r} is not a member of group {group_id}")
        if generation_id != group.generation_id:
            raise FencedMemberEpoch(f"generation {generation_id} of group {group_id} is over (now {group.generation_id})")
        group.members[member_id].last_heard = time.monotonic()

    async def describe(self, group_ids: list[str]) -> list[ClassicGroupView | None]:
        return [self._view(g) if (g := self._groups.get(group_id)) is not None else None for group_id in group_ids]

    async def list_groups(self) -> list[ClassicGroupView]:
        return [self._view(g) for g in self._groups.values() if g.state is not ClassicState.DEAD]

    # -- rebalancing -----------------------------------------------------------------------------------

    def _prepare_rebalance(self, group: _Group) -> None:
        if group.state is ClassicState.PREPARING_REBALANCE:
            return
        if group.state is ClassicState.COMPLETING_REBALANCE:
            for member in group.members.values():  # their syncs belong to a generation that will not be
                if member.syncing is not None and not member.syncing.done():
                    member.syncing.set_result(SyncAnswer("REBALANCE_IN_PROGRESS"))
        initial = group.state is ClassicState.EMPTY
        group.move(ClassicState.PREPARING_REBALANCE)
        group.initial_delay = initial
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0) / 1000
        loop = asyncio.get_running_loop()
        group.rebalance = loop.call_later(INITIAL_REBALANCE_DELAY_SECONDS if initial else timeout, self._timer_fired, group)

    def _timer_fired(self, group: _Group) -> None:
        group.rebalance = None
        if group.initial_delay:
            group.initial_delay = False
            self._complete_join_if_ready(group)
            if group.state is ClassicState.PREPARING_REBALANCE:  # someone still to rejoin: the usual deadline
                timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0) / 1000
                group.rebalance = asyncio.get_running_loop().call_later(timeout, self._timer_fired, group)
            return
        self._complete_join_if_ready(group, deadline=True)

    def _complete_join_if_ready(self, group: _Group, deadline: bool = False) -> None:
        """End the join phase once every member waits in a join; at the deadline, without those who do not."""
        if group.state is not ClassicState.PREPARING_REBALANCE or group.initial_delay:
            return
        absent = [m.member_id for m in group.members.values() if m.joining is None or m.joining.done()]
        if absent and not deadline:
            return
        for member_id in absent:
            self._remove(group, member_id)  # did not rejoin within the rebalance timeout
        if group.rebalance is not None:
            group.rebalance.cancel()
            group.rebalance = None
        if not group.members:
            group.move(ClassicState.EMPTY)
            group.generation_id += 1
            return
        group.generation_id += 1
        group.protocol_name = self._choose_protocol(group)
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.move(ClassicState.COMPLETING_REBALANCE)
        for member in group.members.values():
            member.assignment = b""
            assert member.joining is not None
            member.joining.set_result(self._join_answer(group, member))

    def _join_answer(self, group: _Group, member: _Member) -> JoinAnswer:
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if member.member_id == group.leader:
            members = tuple(
                (m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name)) for m in group.members.values()
            )
        return JoinAnswer(
            None, group.generation_id, group.protocol_type, group.protocol_name, group.leader, member.member_id, members
        )

    @staticmethod
    def _shares_protocol(group: _Group, offered: set[str]) -> bool:
        common = set.intersection(*({name for name, _ in m.protocols} for m in group.members.values()))
        return bool(common & offered)

    @staticmethod
    def _choose_protocol(group: _Group) -> str:
        """Kafka's vote: among the protocols every member supports, each member votes for its first such one."""
        common = set.intersection(*({name for name, _ in m.protocols} for m in group.members.values()))
        votes: dict[str, int] = {}
        for member in group.members.values():
            choice = next(name for name, _ in member.protocols if name in common)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def _remove(self, group: _Group, member_id: str) -> None:
        member = group.members.pop(member_id, None)
        if member is None:
            return
        if member.joining is not None and not member.joining.done():
            member.joining.set_result(JoinAnswer("UNKNOWN_MEMBER_ID"))
        if member.syncing is not None and not member.syncing.done():
            member.syncing.set_result(SyncAnswer("UNKNOWN_MEMBER_ID"))

    def _after_departure(self, group: _Group) -> None:
        """Members left or expired: the others rebalance (an emptied group becomes EMPTY)."""
        if group.state is ClassicState.EMPTY:
            return
        self._prepare_rebalance(group)
        group.initial_delay = False
        self._complete_join_if_ready(group)

    # -- sessions --------------------------------------------------------------------------------------

    def _start_expiry(self) -> None:
        if self._expiry is None or self._expiry.done():
            self._expiry = asyncio.get_running_loop().create_task(self._expire_forever())

    async def _expire_forever(self) -> None:
        while True:
            await asyncio.sleep(EXPIRY_CHECK_SECONDS)
            self.expire_sessions()

    def expire_sessions(self) -> int:
        """Remove members not heard from within their session timeout (a member waiting in a join is heard)."""
        now = time.monotonic()
        removed = 0
        for group in list(self._groups.values()):
            gone = [
                m.member_id
                for m in group.members.values()
                if (m.joining is None or m.joining.done()) and now - m.last_heard > m.session_timeout_ms / 1000
            ]
            for member_id in gone:
                self._remove(group, member_id)
            if gone:
                removed += len(gone)
                self._after_departure(group)
        return removed

    async def close(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            with contextlib.suppress(BaseException):
                await self._expiry

    def _view(self, group: _Group) -> ClassicGroupView:
        members = tuple(
            ClassicMemberView(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.metadata_for(group.protocol_name), m.assignment
            )
            for m in group.members.values()
        )
        return ClassicGroupView(group.group_id, group.state, group.protocol_type, group.protocol_name, group.generation_id,
                                members)
