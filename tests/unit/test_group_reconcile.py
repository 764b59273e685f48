"""Cooperative reconciliation, case by case (a table), and the ownership transition table."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from half_store.domain.consumer_group import ConsumerGroup, SubscribedTopic
from half_store.domain.group_state import (
    FREE,
    TRANSITIONS,
    GroupState,
    IllegalOwnershipMove,
    MemberState,
    Ownership,
    OwnershipState,
    is_transition_valid,
    reconcile,
)

A, R = OwnershipState.ASSIGNED, OwnershipState.REVOKING
P0, P1, P2, P3 = (1, 0), (1, 1), (1, 2), (1, 3)


@dataclass(frozen=True)
class Case:
    name: str
    held: dict[tuple[int, int], Ownership]  # the group's partitions before (missing: FREE)
    target: frozenset[tuple[int, int]]  # member "m"'s target
    owned: frozenset[tuple[int, int]] | None  # what its heartbeat reports (None: a join)
    assignment: frozenset[tuple[int, int]]  # what "m" is told it owns afterwards
    epoch: int  # its epoch afterwards (it was 5)
    state: MemberState
    after: dict[tuple[int, int], Ownership]  # the partitions that changed


# One case a line or two, to read as a table.
# fmt: off
CASES = [
    Case("a join takes the free partitions of its target", {}, frozenset({P0, P1}), None,
         frozenset({P0, P1}), 6, MemberState.STABLE, {P0: Ownership(A, "m", 6), P1: Ownership(A, "m", 6)}),
    Case("nothing to do: same epoch", {P0: Ownership(A, "m", 2)}, frozenset({P0}), frozenset({P0}),
         frozenset({P0}), 5, MemberState.STABLE, {}),
    Case("a partition another member holds waits", {P0: Ownership(A, "other", 1)}, frozenset({P0}), frozenset(),
         frozenset(), 5, MemberState.UNRELEASED_PARTITIONS, {}),
    Case("... also while that member is giving it up", {P0: Ownership(R, "other", 1)}, frozenset({P0}), frozenset(),
         frozenset(), 5, MemberState.UNRELEASED_PARTITIONS, {}),
    Case("a partition that left the target is revoked first: out of the assignment, still held",
         {P0: Ownership(A, "m", 2), P1: Ownership(A, "m", 2)}, frozenset({P0}), frozenset({P0, P1}),
         frozenset({P0}), 6, MemberState.UNREVOKED_PARTITIONS, {P1: Ownership(R, "m", 2)}),
    Case("... even if the heartbeat already omits it: the omission must come after the revocation",
         {P0: Ownership(A, "m", 2), P1: Ownership(A, "m", 2)}, frozenset({P0}), frozenset({P0}),
         frozenset({P0}), 6, MemberState.UNREVOKED_PARTITIONS, {P1: Ownership(R, "m", 2)}),
    Case("a revoking partition still reported is still held", {P1: Ownership(R, "m", 2)}, frozenset(), frozenset({P1}),
         frozenset(), 5, MemberState.UNREVOKED_PARTITIONS, {}),
    Case("a revoking partition the heartbeat omits is freed, without an epoch bump",
         {P0: Ownership(A, "m", 2), P1: Ownership(R, "m", 2)}, frozenset({P0}), frozenset({P0}),
         frozenset({P0}), 5, MemberState.STABLE, {P1: FREE}),
    Case("a revoking partition whose target came back is taken back", {P1: Ownership(R, "m", 2)}, frozenset({P1}),
         frozenset({P1}), frozenset({P1}), 6, MemberState.STABLE, {P1: Ownership(A, "m", 2)}),
    Case("... and if the member had already let it go, it is granted anew", {P1: Ownership(R, "m", 2)},
         frozenset({P1}), frozenset(), frozenset({P1}), 6, MemberState.STABLE, {P1: Ownership(A, "m", 6)}),
    Case("a join reports nothing, so it frees nothing", {P1: Ownership(R, "m", 2)}, frozenset(), None,
         frozenset(), 5, MemberState.UNREVOKED_PARTITIONS, {}),
    Case("revoke, grant and wait in one step",
         {P0: Ownership(A, "m", 2), P1: Ownership(A, "m", 2), P3: Ownership(A, "other", 1)},
         frozenset({P0, P2, P3}), frozenset({P0, P1}), frozenset({P0, P2}), 6, MemberState.UNREVOKED_PARTITIONS,
         {P1: Ownership(R, "m", 2), P2: Ownership(A, "m", 6)}),
    Case("partitions it reports but never had are ignored", {}, frozenset(), frozenset({P0, P3}),
         frozenset(), 5, MemberState.STABLE, {}),
]
# fmt: on


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_reconcile(case: Case) -> None:
    done = reconcile("m", 5, case.held, case.target, case.owned)
    assert done.assignment == case.assignment
    assert done.member_epoch == case.epoch
    assert done.state is case.state
    assert done.changes == case.after
    # Whatever the case: nothing held by another member changed hands.
    for tp, before in case.held.items():
        if before.owner != "m":
            assert tp not in done.changes


def test_the_transition_table_has_no_edge_from_one_owner_to_another() -> None:
    assert is_transition_valid(OwnershipState.FREE, A)
    assert is_transition_valid(A, R) and is_transition_valid(R, OwnershipState.FREE) and is_transition_valid(R, A)
    assert not is_transition_valid(OwnershipState.FREE, R)
    for state in OwnershipState:
        assert not is_transition_valid(state, state)
    assert TRANSITIONS[OwnershipState.FREE] == frozenset({A})
    with pytest.raises(IllegalOwnershipMove):
        Ownership(A, "a", 1).moved(A, owner="b", granted_epoch=1)
    with pytest.raises(IllegalOwnershipMove):
        FREE.moved(R)
    with pytest.raises(IllegalOwnershipMove):
        FREE.moved(A)  # a grant names its owner


def test_a_partition_moves_to_a_new_member_only_once_the_old_one_lets_go() -> None:
    """The whole hand-over through the group: join, revoke, release, grant; never two holders."""
    topics = {"t": SubscribedTopic("t", 1, 2)}
    group = ConsumerGroup("g")

    def holders() -> dict[tuple[int, int], str]:
        found: dict[tuple[int, int], str] = {}
        for tp, ownership in group.partitions.items():
            assert tp not in found and ownership.owner is not None
            found[tp] = ownership.owner
        return found

    group.join("a", ["t"], 1000, now=0)
    group.rebalance(topics)
    assert group.reconcile("a", None).assignment == {(1, 0), (1, 1)}
    group.join("b", ["t"], 1000, now=1)
    assert group.rebalance(topics)
    assert group.reconcile("b", None).assignment == frozenset()  # "a" still holds both
    assert group.state(now=2) is GroupState.RECONCILING
    revoked = group.reconcile("a", frozenset({(1, 0), (1, 1)}))
    assert revoked.assignment == {(1, 0)} and revoked.member_epoch == 2
    assert group.reconcile("b", frozenset()).assignment == frozenset()  # not released yet
    assert holders() == {(1, 0): "a", (1, 1): "a"}
    group.reconcile("a", frozenset({(1, 0)}))  # its heartbeat omits the revoked partition
    assert holders() == {(1, 0): "a"}
    granted = group.reconcile("b", frozenset())
    assert granted.assignment == {(1, 1)} and granted.member_epoch == 2
    assert group.state(now=3) is GroupState.STABLE
    # "a" expires: its partition is free at once and goes to "b" at b's next heartbeat.
    group.touch("b", now=1500)
    assert group.expire(now=1500) == ["a"]
    assert group.rebalance(topics)
    assert group.reconcile("b", frozenset({(1, 1)})).assignment == {(1, 0), (1, 1)}
