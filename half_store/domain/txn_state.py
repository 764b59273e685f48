"""Kafka-mode transaction states and the transitions between them.

A pure state machine, tested without a database. The coordinator only moves a
transaction along an edge of ``TRANSITIONS``: it takes each (source, target) pair
from :func:`transition`, which refuses a move the table does not have, and makes the
move with a compare-and-set UPDATE, so two processes racing (a commit against the
timeout job) cannot both win.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from half_store.domain.errors import IllegalTransition


class TxnState(StrEnum):
    OPEN = "OPEN"
    PREPARE_COMMIT = "PREPARE_COMMIT"
    PREPARE_ABORT = "PREPARE_ABORT"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"
    TIMED_OUT = "TIMED_OUT"

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATES

    @property
    def is_preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


FINAL_STATES = frozenset({TxnState.COMMITTED, TxnState.ABORTED, TxnState.TIMED_OUT})
UNFINISHED_STATES = frozenset({TxnState.OPEN, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})

TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.OPEN: frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.COMMITTED}),
    # An abort ends as ABORTED when asked for, TIMED_OUT when the broker gave up on it.
    TxnState.PREPARE_ABORT: frozenset({TxnState.ABORTED, TxnState.TIMED_OUT}),
    TxnState.COMMITTED: frozenset(),
    TxnState.ABORTED: frozenset(),
    TxnState.TIMED_OUT: frozenset(),
}


def is_transition_valid(source: TxnState, target: TxnState) -> bool:
    return target in TRANSITIONS[source]


class TxnTransition(NamedTuple):
    """An edge of ``TRANSITIONS``: the (source, target) pair of one compare-and-set, made by :func:`transition`."""

    source: TxnState
    target: TxnState


def transition(source: TxnState, target: TxnState, subject: str = "the transaction") -> TxnTransition:
    """The move ``source`` → ``target``, if the table has that edge; IllegalTransition otherwise.

    ``subject`` names the transaction in the error. A compare-and-set given this move
    may still miss (another process moved the row first); an illegal move never gets
    that far.
    """
    if target not in TRANSITIONS[source]:
        raise IllegalTransition(f"{subject} is {source.value}; it cannot become {target.value}")
    return TxnTransition(source, target)


def prepare_state(commit: bool) -> TxnState:
    return TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT


def final_state(prepared: TxnState, *, timed_out: bool) -> TxnState:
    """Where a prepared transaction ends."""
    if prepared is TxnState.PREPARE_COMMIT:
        return TxnState.COMMITTED
    if prepared is TxnState.PREPARE_ABORT:
        return TxnState.TIMED_OUT if timed_out else TxnState.ABORTED
    raise ValueError(f"{prepared} is not a prepare state")


def answers_end_request(state: TxnState, commit: bool) -> bool:
    """Whether a repeated commit (or abort) request is already satisfied by ``state``.

    A commit is satisfied by PREPARE_COMMIT or COMMITTED; an abort by PREPARE_ABORT,
    ABORTED or TIMED_OUT (the broker already aborted it).
    """
    if commit:
        return state in (TxnState.PREPARE_COMMIT, TxnState.COMMITTED)
    return state in (TxnState.PREPARE_ABORT, TxnState.ABORTED, TxnState.TIMED_OUT)
