"""What the consumer-group service takes and answers (they cross the front/core link)."""

from __future__ import annotations

from dataclasses import dataclass

from half_store.domain.group_state import GroupState, MemberState
from half_store.domain.records import GroupOffset

NamedPartition = tuple[str, int]
"""``(topic name, partition)``, as clients name partitions."""


@dataclass(frozen=True, slots=True)
class MemberRef:
    """Who commits offsets: a member and the epoch it last heard (KIP-447 fencing)."""

    member_id: str
    member_epoch: int


@dataclass(frozen=True, slots=True)
class MemberAnswer:
    """The answer to a join or a heartbeat."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: tuple[NamedPartition, ...]
    state: MemberState


@dataclass(frozen=True, slots=True)
class MemberView:
    member_id: str
    member_epoch: int
    state: MemberState
    topics: tuple[str, ...]
    session_timeout_ms: int
    joined_ms: int
    last_heartbeat_ms: int
    assignment: tuple[NamedPartition, ...]  # told it owns
    revoking: tuple[NamedPartition, ...]  # taken out of its assignment, not yet given up
    target: tuple[NamedPartition, ...]  # where the assignor wants it to end up


@dataclass(frozen=True, slots=True)
class GroupView:
    group: str
    state: GroupState
    group_epoch: int
    members: list[MemberView]
    offsets: list[GroupOffset]


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group: str
    state: GroupState
    members: int
    lag: int = 0  # committed records still to read, over all its partitions (markers not counted)
