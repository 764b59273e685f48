"""Cooperative reconciliation: how a partition moves between members, one heartbeat at a time.

Pure, tested without a database (a table of cases in ``tests/unit/test_group_reconcile.py``).

A partition of a group is FREE, ASSIGNED to one member, or REVOKING from it (taken out of
its assignment, still held until the member confirms it let go). The transition table
has no edge from one owner to another: a partition reaches a new owner only through
FREE, which is what makes the hand-over cooperative and "never two owners" structural.

:func:`reconcile` runs for one member at its heartbeat (KIP-848's CurrentAssignmentBuilder):
it frees what the member confirms it gave up (a REVOKING partition its ``owned`` list
omits), revokes what left its target, takes back a REVOKING partition whose target came
back to it, and grants the FREE partitions of its target. The member epoch goes up
whenever the assignment it is told about changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from half_store.domain.group_assignor import TopicPartition

# While a member still has something to do (give partitions up, or wait for some), it is
# told to heartbeat this often, so a hand-over takes a fraction of the normal interval.
RECONCILING_HEARTBEAT_MS = 200


class OwnershipState(StrEnum):
    FREE = "FREE"
    ASSIGNED = "ASSIGNED"
    REVOKING = "REVOKING"


TRANSITIONS: dict[OwnershipState, frozenset[OwnershipState]] = {
    OwnershipState.FREE: frozenset({OwnershipState.ASSIGNED}),
    # FREE: the owner left or expired.
    OwnershipState.ASSIGNED: frozenset({OwnershipState.REVOKING, OwnershipState.FREE}),
    # FREE: the owner confirmed it let go (or left, or expired); ASSIGNED: its target came back to it.
    OwnershipState.REVOKING: frozenset({OwnershipState.FREE, OwnershipState.ASSIGNED}),
}


def is_transition_valid(source: OwnershipState, target: OwnershipState) -> bool:
    return target in TRANSITIONS[source]


class IllegalOwnershipMove(ValueError):
    """A move the transition table does not allow: a bug, never a client's mistake."""


@dataclass(frozen=True, slots=True)
class Ownership:
    """Who holds a partition now. ``granted_epoch``: the owner's member epoch when it got it."""

    state: OwnershipState = OwnershipState.FREE
    owner: str | None = None
    granted_epoch: int | None = None

    def moved(self, target: OwnershipState, *, owner: str | None = None, granted_epoch: int | None = None) -> Ownership:
        """The next ownership along an edge of :data:`TRANSITIONS`; any other move raises."""
        if not is_transition_valid(self.state, target):
            raise IllegalOwnershipMove(f"a partition cannot go from {self.state} to {target}")
        if target is OwnershipState.FREE:
            return Ownership()
        if target is OwnershipState.REVOKING:
            return replace(self, state=target)
        if self.state is OwnershipState.REVOKING:  # taken back by the member that was giving it up
            return replace(self, state=target)
        if owner is None or granted_epoch is None:
            raise IllegalOwnershipMove("a grant names its owner and the owner's epoch")
        return Ownership(target, owner, granted_epoch)

    def held_by(self, member: str) -> bool:
        """ASSIGNED to ``member``, or still REVOKING from it: nobody else may have it."""
        return self.owner == member and self.state is not OwnershipState.FREE


FREE = Ownership()


class MemberState(StrEnum):
    """Where one member's reconciliation stands (KIP-848's names)."""

    STABLE = "STABLE"  # it holds exactly its target
    UNREVOKED_PARTITIONS = "UNREVOKED_PARTITIONS"  # it still has to give partitions up
    UNRELEASED_PARTITIONS = "UNRELEASED_PARTITIONS"  # it waits for partitions others still hold


class GroupState(StrEnum):
    EMPTY = "EMPTY"
    STABLE = "STABLE"
    RECONCILING = "RECONCILING"


@dataclass(frozen=True, slots=True)
class Reconciled:
    """One member's reconciliation: the partitions that changed, and what the member is told."""

    changes: dict[TopicPartition, Ownership]
    member_epoch: int
    assignment: frozenset[TopicPartition]
    state: MemberState


def assignment_of(member: str, partitions: Mapping[TopicPartition, Ownership]) -> frozenset[TopicPartition]:
    """The partitions ``member`` is told it owns: ASSIGNED to it (not the ones it is giving up)."""
    return frozenset(tp for tp, o in partitions.items() if o.owner == member and o.state is OwnershipState.ASSIGNED)


def member_state(
    member: str, partitions: Mapping[TopicPartition, Ownership], target: frozenset[TopicPartition]
) -> MemberState:
    if any(o.owner == member and o.state is OwnershipState.REVOKING for o in partitions.values()):
        return MemberState.UNREVOKED_PARTITIONS
    if target - assignment_of(member, partitions):
        return MemberState.UNRELEASED_PARTITIONS
    return MemberState.STABLE


def group_state(member_states: list[MemberState]) -> GroupState:
    if not member_states:
        return GroupState.EMPTY
    if all(state is MemberState.STABLE for state in member_states):
        return GroupState.STABLE
    return GroupState.RECONCILING


def reconcile(
    member: str,
    member_epoch: int,
    partitions: Mapping[TopicPartition, Ownership],
    target: frozenset[TopicPartition],
    owned: frozenset[TopicPartition] | None,
) -> Reconciled:
    """One step of ``member``'s reconciliation towards ``target``.

    ``partitions``: the group's partitions that are not FREE (a missing one is FREE).
    ``owned``: the partitions the member's heartbeat says it still holds, or None for a
    join (which reports nothing, so nothing is freed).
    """
    current = dict(partitions)
    changes: dict[TopicPartition, Ownership] = {}

    def move(tp: TopicPartition, moved: Ownership) -> None:
        current[tp] = changes[tp] = moved

    mine = sorted(tp for tp, o in partitions.items() if o.held_by(member))
    for tp in mine:
        held = current[tp]
        if held.state is OwnershipState.REVOKING and owned is not None and tp not in owned:
            move(tp, held.moved(OwnershipState.FREE))  # it confirmed it let go
        elif held.state is OwnershipState.REVOKING and tp in target:
            move(tp, held.moved(OwnershipState.ASSIGNED))
        elif held.state is OwnershipState.ASSIGNED and tp not in target:
            move(tp, held.moved(OwnershipState.REVOKING))
    grants = sorted(tp for tp in target if current.get(tp, FREE).state is OwnershipState.FREE)
    before = assignment_of(member, partitions)
    after_moves = assignment_of(member, current)
    epoch = member_epoch + 1 if grants or after_moves != before else member_epoch
    for tp in grants:
        move(tp, current.get(tp, FREE).moved(OwnershipState.ASSIGNED, owner=member, granted_epoch=epoch))
    return Reconciled(changes, epoch, assignment_of(member, current), member_state(member, current, target))


def release_all(member: str, partitions: Mapping[TopicPartition, Ownership]) -> dict[TopicPartition, Ownership]:
    """What changes when ``member`` leaves or expires: everything it held becomes FREE."""
    return {tp: o.moved(OwnershipState.FREE) for tp, o in partitions.items() if o.held_by(member)}
