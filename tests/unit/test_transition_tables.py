"""Every state change goes through its machine's transition table: the legal moves are the
table's edges, and any other move is refused with 409 ALREADY_RESOLVED. No database."""

from __future__ import annotations

import itertools

import pytest

from half_store.domain import half_state, txn_state
from half_store.domain.errors import AlreadyResolved, IllegalTransition
from half_store.domain.half_records import HalfMessage, Resolution
from half_store.domain.half_state import HalfState, HalfTransition
from half_store.domain.txn_state import TxnState, TxnTransition
from half_store.services.half_messages import answer_repeat


@pytest.mark.parametrize(("source", "target"), list(itertools.product(TxnState, repeat=2)))
def test_a_transaction_moves_only_along_the_table(source: TxnState, target: TxnState) -> None:
    if target in txn_state.TRANSITIONS[source]:
        assert txn_state.transition(source, target) == TxnTransition(source, target)
        return
    with pytest.raises(IllegalTransition) as refused:
        txn_state.transition(source, target, "transaction txn-1")
    assert refused.value.message == f"transaction txn-1 is {source.value}; it cannot become {target.value}"


@pytest.mark.parametrize(("source", "target"), list(itertools.product(HalfState, repeat=2)))
def test_a_half_message_moves_only_along_the_table(source: HalfState, target: HalfState) -> None:
    if target in half_state.TRANSITIONS[source]:
        assert half_state.transition(source, target) == HalfTransition(source, target)
        return
    with pytest.raises(IllegalTransition) as refused:
        half_state.transition(source, target, "half message m-1")
    assert refused.value.message == f"half message m-1 is already {source.value}; it cannot become {target.value}"


def test_an_illegal_move_is_what_the_contract_calls_already_resolved() -> None:
    # A commit after an abort (Kafka mode) and a rollback after a commit (half messages).
    for refuse in (
        lambda: txn_state.transition(TxnState.ABORTED, TxnState.PREPARE_COMMIT),
        lambda: half_state.transition(HalfState.COMMITTED, HalfState.ROLLED_BACK),
    ):
        # The checker catches AlreadyResolved to skip a message its producer resolved meanwhile.
        with pytest.raises(AlreadyResolved) as refused:
            refuse()
        assert (refused.value.status, refused.value.code) == (409, "ALREADY_RESOLVED")


def test_the_moves_the_coordinator_makes_are_edges() -> None:
    # Ending: OPEN -> PREPARE_*; the timeout: OPEN -> PREPARE_ABORT; phase two: PREPARE_* -> its final state.
    for commit, timed_out in itertools.product((True, False), repeat=2):
        prepared = txn_state.prepare_state(commit)
        txn_state.transition(TxnState.OPEN, prepared)
        txn_state.transition(prepared, txn_state.final_state(prepared, timed_out=timed_out))


def _half(resolved_as: HalfState | None) -> HalfMessage:
    resolution = None if resolved_as is None else Resolution(resolved_as, None, None, None, "producer", 1)
    return HalfMessage("m-1", 0, "shop", "tx-1", "orders", 0, 1, 0, 0, None, resolution)


@pytest.mark.parametrize("resolved_as", [HalfState.COMMITTED, HalfState.ROLLED_BACK, HalfState.DISCARDED])
def test_a_resolved_half_message_answers_a_repeat_and_refuses_any_other_resolution(resolved_as: HalfState) -> None:
    half = _half(resolved_as)
    assert answer_repeat(half, resolved_as) is half
    for other in (HalfState.COMMITTED, HalfState.ROLLED_BACK, HalfState.DISCARDED):
        if other is not resolved_as:
            with pytest.raises(IllegalTransition, match=f"half message m-1 is already {resolved_as.value}"):
                answer_repeat(half, other)
