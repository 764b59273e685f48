"""Property tests of the half-message state machine (``half_store.domain.half_state``), no database.

A hypothesis state machine resolves one half message the way
``HalfMessageService._resolve`` decides (the producer committing or rolling back,
retrying, the checker answering, the checker discarding after check_max, in any
order), and an operator rechecking it: the first resolution wins, a repeat of
it is answered with the same state, any other one is refused, only edges of
``TRANSITIONS`` are taken, and only a discarded message is ever reopened, so a
message is committed at most once however many times it is rechecked.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from half_store.domain.errors import AlreadyResolved
from half_store.domain.half_state import (
    TRANSITIONS,
    HalfState,
    is_transition_valid,
    repeats,
    transition,
)

states = st.sampled_from(list(HalfState))
RESOLUTIONS = [HalfState.COMMITTED, HalfState.ROLLED_BACK, HalfState.DISCARDED]


def test_every_state_has_a_row() -> None:
    assert set(TRANSITIONS) == set(HalfState)
    assert TRANSITIONS[HalfState.PREPARED] == frozenset(RESOLUTIONS)


@settings(deadline=None)
@given(states, states)
def test_is_transition_valid_is_the_table(source: HalfState, target: HalfState) -> None:
    assert is_transition_valid(source, target) == (target in TRANSITIONS[source])
    # A prepared message moves to a resolution; the one way back is a recheck of a discarded one.
    resolves = source is HalfState.PREPARED and target.is_resolved
    rechecks = (source, target) == (HalfState.DISCARDED, HalfState.PREPARED)
    assert is_transition_valid(source, target) == (resolves or rechecks)


@settings(deadline=None)
@given(states, states)
def test_transition_refuses_what_the_table_lacks(source: HalfState, target: HalfState) -> None:
    if is_transition_valid(source, target):
        assert transition(source, target, "half message m-1") == (source, target)
    else:
        with pytest.raises(AlreadyResolved):
            transition(source, target, "half message m-1")


@settings(deadline=None)
@given(states, states)
def test_repeats_only_the_same_resolution(current: HalfState, requested: HalfState) -> None:
    assert repeats(current, requested) == (current == requested and current is not HalfState.PREPARED)
    if repeats(current, requested):
        assert not is_transition_valid(current, requested)


@settings(deadline=None)
@given(states)
def test_committed_and_rolled_back_are_final(state: HalfState) -> None:
    assert state.is_resolved == (state is not HalfState.PREPARED)
    assert (not TRANSITIONS[state]) == (state in (HalfState.COMMITTED, HalfState.ROLLED_BACK))


class OneHalfMessage(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = HalfState.PREPARED
        self.commits = 0  # resolutions to COMMITTED: the message went to its topic
        self.answered: set[HalfState] = set()  # outcomes answered since the last recheck

    @rule(wanted=st.sampled_from(RESOLUTIONS), who=st.sampled_from(["producer", "checker", "other-broker"]))
    def resolve(self, wanted: HalfState, who: str) -> None:
        if self.state.is_resolved:
            if repeats(self.state, wanted):
                self.answered.add(wanted)  # 200, same body, nothing written
            else:
                assert wanted not in self.answered  # 409 ALREADY_RESOLVED
            return
        assert is_transition_valid(self.state, wanted)
        self.state = wanted
        self.commits += wanted is HalfState.COMMITTED
        self.answered.add(wanted)

    @rule()
    def recheck(self) -> None:
        """An operator's recheck, as ``HalfMessageService.recheck`` decides it (409 unless DISCARDED)."""
        if not is_transition_valid(self.state, HalfState.PREPARED):
            assert self.state is not HalfState.DISCARDED
            return
        assert self.state is HalfState.DISCARDED
        self.state = HalfState.PREPARED
        self.answered = set()

    @invariant()
    def committed_at_most_once(self) -> None:
        assert self.commits <= 1
        assert len(self.answered) <= 1
        assert self.answered <= {self.state}
        if self.commits:
            assert self.state is HalfState.COMMITTED  # nothing leaves COMMITTED


TestOneHalfMessage = OneHalfMessage.TestCase
TestOneHalfMessage.settings = settings(deadline=None, max_examples=100)
