"""Half-message states and the transitions between them.

A pure state machine, unit-tested without a database. In storage a half message
is PREPARED until exactly one resolution row exists for it; the resolution's
primary key is what enforces "at most one transition out of PREPARED".
"""

from __future__ import annotations

from enum import StrEnum


class HalfState(StrEnum):
    PREPARED = "PREPARED"
    COMMITTED = "COMMITTED"
    ROLLED_BACK = "ROLLED_BACK"
    DISCARDED = "DISCARDED"

    @property
    def is_resolved(self) -> bool:
        return self is not HalfState.PREPARED


TRANSITIONS: dict[HalfState, frozenset[HalfState]] = {
    HalfState.PREPARED: frozenset({HalfState.COMMITTED, HalfState.ROLLED_BACK, HalfState.DISCARDED}),
    HalfState.COMMITTED: frozenset(),
    HalfState.ROLLED_BACK: frozenset(),
    HalfState.DISCARDED: frozenset(),
}


def is_transition_valid(source: HalfState, target: HalfState) -> bool:
    return target in TRANSITIONS[source]


def repeats(current: HalfState, requested: HalfState) -> bool:
    """A resolution request that the current state already answers (a retried commit)."""
    return current is requested and current.is_resolved
