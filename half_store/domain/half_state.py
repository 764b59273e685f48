"""Half-message states and the transitions between them.

A pure state machine, unit-tested without a database. In storage a half message
is PREPARED until exactly one resolution row exists for it; the resolution's
primary key is what enforces "at most one transition out of PREPARED", and the
row records a move taken from :func:`transition`, which refuses one the table
does not have.

One edge leads back: DISCARDED → PREPARED, an operator's recheck of a message the
checker gave up on. It deletes the DISCARDED resolution row (a compare-and-set on its
outcome), so the message can be resolved once more. COMMITTED and ROLLED_BACK stay
final, so a message is still committed at most once: a DISCARDED message was never
committed, and nothing leaves COMMITTED.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from half_store.domain.errors import IllegalTransition


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
    # Recheck: the checker gave up, an operator asks for the message to be checked again.
    HalfState.DISCARDED: frozenset({HalfState.PREPARED}),
}


def is_transition_valid(source: HalfState, target: HalfState) -> bool:
    return target in TRANSITIONS[source]


class HalfTransition(NamedTuple):
    """An edge of ``TRANSITIONS``: the move one resolution row records, made by :func:`transition`."""

    source: HalfState
    target: HalfState


def transition(source: HalfState, target: HalfState, subject: str = "the half message") -> HalfTransition:
    """The move ``source`` → ``target``, if the table has that edge; IllegalTransition otherwise.

    ``subject`` names the half message in the error.
    """
    if target not in TRANSITIONS[source]:
        raise IllegalTransition(f"{subject} is already {source.value}; it cannot become {target.value}")
    return HalfTransition(source, target)


def repeats(current: HalfState, requested: HalfState) -> bool:
    """A resolution request that the current state already answers (a retried commit)."""
    return current is requested and current.is_resolved
