"""Property tests of the Kafka-mode transaction state machine (``half_store.domain.txn_state``), no database.

Besides the table itself, a hypothesis state machine drives one transaction the
way the coordinator does (commit / abort requests, the timeout job, crash
recovery completing a PREPARE_* state, all in any order and repeated) and checks
the promises of the contract: a transaction ends once, a commit never turns into
an abort or back, repeated requests are answered the same, and only edges of
``TRANSITIONS`` are ever taken.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from half_store.domain.txn_state import (
    FINAL_STATES,
    TRANSITIONS,
    UNFINISHED_STATES,
    TxnState,
    answers_end_request,
    final_state,
    is_transition_valid,
    prepare_state,
)

states = st.sampled_from(list(TxnState))


def reachable_from(start: TxnState) -> set[TxnState]:
    seen, todo = {start}, [start]
    while todo:
        for target in TRANSITIONS[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_every_state_has_a_row_and_the_table_only_names_states() -> None:
    assert set(TRANSITIONS) == set(TxnState)
    assert all(targets <= set(TxnState) for targets in TRANSITIONS.values())


def test_final_and_unfinished_partition_the_states() -> None:
    assert set(TxnState) == FINAL_STATES | UNFINISHED_STATES
    assert not FINAL_STATES & UNFINISHED_STATES


def test_every_state_is_reachable_from_open_and_every_path_ends() -> None:
    assert reachable_from(TxnState.OPEN) == set(TxnState)
    # No cycles: the longest path from OPEN is OPEN -> PREPARE_* -> final.
    for path_length in range(4, len(TxnState) + 2):  # states on a path, i.e. 3+ edges
        for path in itertools.product(list(TxnState), repeat=path_length):
            assert not all(is_transition_valid(a, b) for a, b in itertools.pairwise(path))


@settings(deadline=None)
@given(states, states)
def test_is_transition_valid_is_the_table(source: TxnState, target: TxnState) -> None:
    assert is_transition_valid(source, target) == (target in TRANSITIONS[source])
    if is_transition_valid(source, target):
        assert not source.is_final
        assert source != target


@settings(deadline=None)
@given(states)
def test_final_means_no_way_out(state: TxnState) -> None:
    assert state.is_final == (not TRANSITIONS[state])
    assert state.is_preparing == (state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT))


@settings(deadline=None)
@given(st.booleans(), st.booleans())
def test_prepare_then_final_follows_edges(commit: bool, timed_out: bool) -> None:
    prepared = prepare_state(commit)
    assert is_transition_valid(TxnState.OPEN, prepared)
    final = final_state(prepared, timed_out=timed_out)
    assert is_transition_valid(prepared, final)
    assert final.is_final
    assert (final is TxnState.COMMITTED) == commit


@settings(deadline=None)
@given(states)
def test_final_state_refuses_what_is_not_prepared(state: TxnState) -> None:
    if state.is_preparing:
        return
    try:
        final_state(state, timed_out=False)
    except ValueError:
        return
    raise AssertionError(f"final_state accepted {state}")


@settings(deadline=None)
@given(states)
def test_a_state_answers_at_most_one_kind_of_end_request(state: TxnState) -> None:
    assert not (answers_end_request(state, True) and answers_end_request(state, False))
    if state is TxnState.OPEN:
        assert not answers_end_request(state, True) and not answers_end_request(state, False)
    # A state that answers a commit lies on the commit path, and the same for aborts.
    if answers_end_request(state, True):
        assert state in reachable_from(TxnState.PREPARE_COMMIT)
    if answers_end_request(state, False):
        assert state in reachable_from(TxnState.PREPARE_ABORT)
    if state.is_final:
        assert answers_end_request(state, True) or answers_end_request(state, False)


class OneTransaction(RuleBasedStateMachine):
    """One transaction driven like the coordinator does; requests and jobs in any order."""

    def __init__(self) -> None:
        super().__init__()
        self.state = TxnState.OPEN
        self.timed_out = False
        self.history = [TxnState.OPEN]
        self.first_answer: dict[bool, TxnState] = {}

    def move(self, target: TxnState) -> None:
        assert is_transition_valid(self.state, target), f"{self.state} -> {target}"
        self.state = target
        self.history.append(target)

    @rule(commit=st.booleans())
    def end_request(self, commit: bool) -> None:
        """Coordinator.end: repeated requests answer the same; the other one is refused."""
        if answers_end_request(self.state, commit):
            answer = self.state
        elif self.state is not TxnState.OPEN:
            answer = None  # 409 ALREADY_RESOLVED
        else:
            self.move(prepare_state(commit))
            answer = self.state
        if answer is not None:
            assert answers_end_request(answer, commit)
            self.first_answer.setdefault(commit, answer)
            # Once answered, the same request never goes unanswered again.
            assert commit not in self.first_answer or answers_end_request(self.state, commit)
        else:
            assert commit not in self.first_answer, "a request that was answered is refused later"

    @precondition(lambda self: self.state is TxnState.OPEN)
    @rule()
    def timeout_job(self) -> None:
        """Coordinator.abort_expired: OPEN -> PREPARE_ABORT (timed out)."""
        self.timed_out = True
        self.move(TxnState.PREPARE_ABORT)

    @precondition(lambda self: self.state.is_preparing)
    @rule()
    def complete(self) -> None:
        """Phase two, by the request itself or by crash recovery."""
        self.move(final_state(self.state, timed_out=self.timed_out))

    @invariant()
    def never_both_outcomes(self) -> None:
        on_commit_path = any(s in (TxnState.PREPARE_COMMIT, TxnState.COMMITTED) for s in self.history)
        on_abort_path = any(s in (TxnState.PREPARE_ABORT, TxnState.ABORTED, TxnState.TIMED_OUT) for s in self.history)
        assert not (on_commit_path and on_abort_path), self.history
        assert self.history.count(TxnState.OPEN) == 1
        assert sum(s.is_final for s in self.history) <= 1
        if self.state is TxnState.TIMED_OUT:
            assert self.timed_out


TestOneTransaction = OneTransaction.TestCase
TestOneTransaction.settings = settings(deadline=None, max_examples=100)
