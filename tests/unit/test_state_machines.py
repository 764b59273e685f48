"""Both transaction state machines, without a database."""

from __future__ import annotations

import pytest

from half_store.domain.half_state import HalfState, repeats
from half_store.domain.half_state import is_transition_valid as half_transition_valid
from half_store.domain.txn_state import (
    TRANSITIONS,
    TxnState,
    answers_end_request,
    final_state,
    is_transition_valid,
    prepare_state,
)


def test_kafka_mode_transitions() -> None:
    assert is_transition_valid(TxnState.OPEN, TxnState.PREPARE_COMMIT)
    assert is_transition_valid(TxnState.OPEN, TxnState.PREPARE_ABORT)
    assert is_transition_valid(TxnState.PREPARE_COMMIT, TxnState.COMMITTED)
    assert is_transition_valid(TxnState.PREPARE_ABORT, TxnState.TIMED_OUT)
    assert not is_transition_valid(TxnState.OPEN, TxnState.COMMITTED)  # always through a prepare state
    assert not is_transition_valid(TxnState.PREPARE_COMMIT, TxnState.ABORTED)  # a decided commit stays a commit
    assert not is_transition_valid(TxnState.PREPARE_ABORT, TxnState.COMMITTED)
    for final in (TxnState.COMMITTED, TxnState.ABORTED, TxnState.TIMED_OUT):
        assert final.is_final and TRANSITIONS[final] == frozenset()


def test_every_transition_leads_to_a_final_state() -> None:
    for state in TxnState:
        reachable, frontier = {state}, [state]
        while frontier:
            for target in TRANSITIONS[frontier.pop()]:
                if target not in reachable:
                    reachable.add(target)
                    frontier.append(target)
        assert any(s.is_final for s in reachable)


@pytest.mark.parametrize(("commit", "timed_out", "expected"), [
    (True, False, TxnState.COMMITTED), (False, False, TxnState.ABORTED), (False, True, TxnState.TIMED_OUT),
])
def test_final_state_of_a_prepared_transaction(commit: bool, timed_out: bool, expected: TxnState) -> None:
    assert final_state(prepare_state(commit), timed_out=timed_out) is expected
    assert is_transition_valid(prepare_state(commit), expected)


def test_final_state_needs_a_prepare_state() -> None:
    with pytest.raises(ValueError):
        final_state(TxnState.OPEN, timed_out=False)


def test_repeated_end_requests() -> None:
    assert answers_end_request(TxnState.COMMITTED, commit=True)
    assert answers_end_request(TxnState.PREPARE_COMMIT, commit=True)
    assert not answers_end_request(TxnState.ABORTED, commit=True)
    assert answers_end_request(TxnState.TIMED_OUT, commit=False)
    assert not answers_end_request(TxnState.COMMITTED, commit=False)
    assert not answers_end_request(TxnState.OPEN, commit=False)


def test_half_message_transitions() -> None:
    for outcome in (HalfState.COMMITTED, HalfState.ROLLED_BACK, HalfState.DISCARDED):
        assert half_transition_valid(HalfState.PREPARED, outcome)
        assert outcome.is_resolved
        for other in HalfState:
            # Resolved at most once; only a discarded message can be rechecked (back to PREPARED).
            reopens = (outcome, other) == (HalfState.DISCARDED, HalfState.PREPARED)
            assert half_transition_valid(outcome, other) == reopens
    assert not HalfState.PREPARED.is_resolved
    assert repeats(HalfState.COMMITTED, HalfState.COMMITTED)
    assert not repeats(HalfState.ROLLED_BACK, HalfState.COMMITTED)
    assert not repeats(HalfState.PREPARED, HalfState.PREPARED)
