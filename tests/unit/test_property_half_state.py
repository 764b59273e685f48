"""Property tests of the half-message state machine (``half_store.domain.half_state``), no database.

A hypothesis state machine resolves one half message the way
``HalfMessageService._resolve`` decides (the producer committing or rolling back,
retrying, the checker answering, the checker discarding after check_max, in any
order): the first resolution wins, a repeat of it is answered with the same
state, any other one is refused, and only edges of ``TRANSITIONS`` are taken.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from half_store.domain.half_state import (
    TRANSITIONS,
    HalfState,
    is_transition_valid,
    repeats,
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
    # Only a prepared message moves, and only to a resolution: at most one transition ever.
    assert is_transition_valid(source, target) == (source is HalfState.PREPARED and target.is_resolved)


@settings(deadline=None)
@given(states, states)
def test_repeats_only_the_same_resolution(current: HalfState, requested: HalfState) -> None:
    assert repeats(current, requested) == (current == requested and current is not HalfState.PREPARED)
    if repeats(current, requested):
        assert not is_transition_valid(current, requested)


@settings(deadline=None)
@given(states)
def test_resolved_states_are_absorbing(state: HalfState) -> None:
    assert state.is_resolved == (state is not HalfState.PREPARED)
    assert (not TRANSITIONS[state]) == state.is_resolved


class OneHalfMessage(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = HalfState.PREPARED
        self.moves = 0
        self.answered: set[HalfState] = set()

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
        self.moves += 1
        self.answered.add(wanted)

    @invariant()
    def resolved_once(self) -> None:
        assert self.moves <= 1
        assert len(self.answered) <= 1
        assert self.answered <= {self.state}


TestOneHalfMessage = OneHalfMessage.TestCase
TestOneHalfMessage.settings = settings(deadline=None, max_examples=100)
