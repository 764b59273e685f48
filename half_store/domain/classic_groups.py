"""Kafka's classic consumer groups (JoinGroup/SyncGroup): the records the coordinator answers with.

The coordinator keeps this state in memory, as Kafka's group coordinator does in the
broker that coordinates the group; what survives a restart is the group's offsets, which
are halfmq's group offsets. Errors are Kafka's names (``ILLEGAL_GENERATION``…): the state
machine is Kafka's, and so is its vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ClassicState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# The moves a group makes (Kafka's GroupMetadata.validPreviousStates, turned around).
TRANSITIONS: dict[ClassicState, frozenset[ClassicState]] = {
    ClassicState.EMPTY: frozenset({ClassicState.PREPARING_REBALANCE, ClassicState.DEAD}),
    ClassicState.PREPARING_REBALANCE: frozenset(
        {ClassicState.COMPLETING_REBALANCE, ClassicState.EMPTY, ClassicState.DEAD, ClassicState.PREPARING_REBALANCE}
    ),
    ClassicState.COMPLETING_REBALANCE: frozenset(
        {ClassicState.STABLE, ClassicState.PREPARING_REBALANCE, ClassicState.DEAD}
    ),
    ClassicState.STABLE: frozenset({ClassicState.PREPARING_REBALANCE, ClassicState.DEAD}),
    ClassicState.DEAD: frozenset(),
}


def is_valid_move(source: ClassicState, target: ClassicState) -> bool:
    return target in TRANSITIONS[source]


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    require_known_member: bool  # JoinGroup v4+: an unknown member gets MEMBER_ID_REQUIRED and an id first


@dataclass(frozen=True, slots=True)
class JoinAnswer:
    error: str | None
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # (member id, instance id, metadata): for the leader only


@dataclass(frozen=True, slots=True)
class SyncAnswer:
    error: str | None
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class ClassicMemberView:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class ClassicGroupView:
    group: str
    state: ClassicState
    protocol_type: str
    protocol_name: str
    generation_id: int
    members: tuple[ClassicMemberView, ...]
