"""The share-group record state machine and the delivery planner, without a database."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from half_store.domain.share_state import (
    TRANSITIONS,
    AckType,
    DeadLetterReason,
    DeliveryPlan,
    FreshMessage,
    IllegalRecordTransition,
    InFlightRecord,
    RecordState,
    is_transition_valid,
    plan_delivery,
    transition,
)

NOW = 1_000_000
LOCK_MS = 30_000
MAX = 5


def record(offset: int, state: RecordState = RecordState.ACQUIRED, *, count: int = 1, visible_at: int = NOW + 10,
           key: str | None = None, txn_id: str | None = None, generation: int = 1) -> InFlightRecord:
    return InFlightRecord("g", 7, 0, offset, state, count, generation, visible_at, key, txn_id)


def plan(in_flight: list[InFlightRecord], fresh: list[FreshMessage], budget: int, ordered: bool) -> DeliveryPlan:
    return plan_delivery(
        "g", 7, 0, in_flight, fresh, budget=budget, now=NOW, lock_ms=LOCK_MS, max_deliveries=MAX, ordered=ordered
    )


def test_the_table_is_kip_932s() -> None:
    assert TRANSITIONS[RecordState.AVAILABLE] == {RecordState.ACQUIRED, RecordState.ARCHIVED}
    assert TRANSITIONS[RecordState.ACQUIRED] == {RecordState.AVAILABLE, RecordState.ACCEPTED, RecordState.ARCHIVED}
    for terminal in (RecordState.ACCEPTED, RecordState.ARCHIVED):
        assert terminal.is_terminal and TRANSITIONS[terminal] == frozenset()
    assert not is_transition_valid(RecordState.AVAILABLE, RecordState.ACCEPTED)  # only a held lock is accepted


@pytest.mark.parametrize("source", list(RecordState))
@pytest.mark.parametrize("target", list(RecordState))
def test_every_move_goes_through_the_table(source: RecordState, target: RecordState) -> None:
    if target in TRANSITIONS[source]:
        assert transition(source, target) is target
    else:
        with pytest.raises(IllegalRecordTransition):
            transition(source, target)


def test_a_terminal_record_cannot_be_acquired_again() -> None:
    accepted = record(0).accept()
    with pytest.raises(IllegalRecordTransition):
        accepted.acquire(NOW, LOCK_MS)
    with pytest.raises(IllegalRecordTransition):
        record(0).archive().release(NOW, 0, MAX)


def test_acquire_counts_a_delivery_and_takes_a_new_lock() -> None:
    fresh = InFlightRecord.fresh("g", 7, 0, 3, "k")
    locked = fresh.acquire(NOW, LOCK_MS)
    assert (locked.state, locked.delivery_count, locked.generation, locked.visible_at) == (
        RecordState.ACQUIRED, 1, 1, NOW + LOCK_MS,
    )
    assert locked.holds(1, NOW) and not locked.holds(0, NOW) and not locked.holds(1, NOW + LOCK_MS)


def test_an_expired_lock_makes_the_record_available_and_its_receipt_stale() -> None:
    held = record(0, visible_at=NOW)
    expired = held.expired(NOW)
    assert expired.state is RecordState.AVAILABLE and expired.deliverable(NOW)
    again = expired.acquire(NOW, LOCK_MS)
    assert again.delivery_count == 2 and not again.holds(held.generation, NOW)


def test_a_transactions_lock_does_not_run_out_by_time() -> None:
    enlisted = record(0).enlist("txn-1", NOW - 1)
    assert enlisted.expired(NOW + 10**9) is enlisted
    assert enlisted.locked(NOW + 10**9) and not enlisted.holds(enlisted.generation, NOW)


@pytest.mark.parametrize(("ack", "state", "reason"), [
    (AckType.ACCEPT, RecordState.ACCEPTED, None),
    (AckType.REJECT, RecordState.ARCHIVED, DeadLetterReason.REJECTED),
    (AckType.RELEASE, RecordState.AVAILABLE, None),
])
def test_acknowledgements(ack: AckType, state: RecordState, reason: DeadLetterReason | None) -> None:
    moved, why = record(0, count=2).acknowledge(ack, NOW, 500, MAX)
    assert (moved.state, why) == (state, reason)
    if state is RecordState.AVAILABLE:
        assert moved.delivery_count == 2 and moved.visible_at == NOW + 500 and not moved.deliverable(NOW)


def test_releasing_the_last_allowed_delivery_dead_letters_it() -> None:
    moved, why = record(0, count=MAX).acknowledge(AckType.RELEASE, NOW, 0, MAX)
    assert (moved.state, why) == (RecordState.ARCHIVED, DeadLetterReason.MAX_DELIVERIES)


def test_plan_takes_redeliveries_first_then_fresh_messages_up_to_the_budget() -> None:
    in_flight = [record(1, RecordState.AVAILABLE, visible_at=0), record(2), record(3, visible_at=NOW - 1)]
    fresh = [FreshMessage(o, None) for o in range(4, 10)]
    planned = plan(in_flight, fresh, budget=4, ordered=False)
    assert [r.offset for r in planned.acquired] == [1, 3, 4, 5]
    assert planned.new == {4, 5} and planned.end_offset == 6 and not planned.parked
    assert all(r.state is RecordState.ACQUIRED and r.visible_at == NOW + LOCK_MS for r in planned.acquired)


def test_plan_archives_what_used_up_its_deliveries_without_spending_budget() -> None:
    in_flight = [record(1, visible_at=NOW - 1, count=MAX), record(2, RecordState.AVAILABLE, visible_at=0, count=1)]
    planned = plan(in_flight, [], budget=1, ordered=False)
    assert [r.offset for r in planned.dead_letters] == [1] and planned.dead_letters[0].state is RecordState.ARCHIVED
    assert [r.offset for r in planned.acquired] == [2]


def test_ordered_plan_holds_a_key_back_while_an_earlier_message_of_it_is_in_flight() -> None:
    in_flight = [record(1, key="a"), record(2, RecordState.AVAILABLE, visible_at=0, key="b")]
    fresh = [FreshMessage(offset, key) for offset, key in [(3, "a"), (4, "b"), (5, "c"), (6, "c"), (7, None)]]
    planned = plan(in_flight, fresh, budget=10, ordered=True)
    assert [r.offset for r in planned.acquired] == [2, 5, 7]
    assert [r.offset for r in planned.parked] == [3, 4, 6]
    assert all(r.state is RecordState.AVAILABLE for r in planned.parked)
    assert planned.end_offset is None


def test_unordered_plan_ignores_keys() -> None:
    fresh = [FreshMessage(o, "same") for o in range(3)]
    assert [r.offset for r in plan([], fresh, budget=10, ordered=False).acquired] == [0, 1, 2]


keys = st.sampled_from(["a", "b", "c", None])
in_flight_records = st.lists(
    st.builds(
        lambda offset, state, count, visible, key, txn: record(
            offset, state, count=count, visible_at=visible, key=key, txn_id=txn
        ),
        st.integers(0, 40),
        st.sampled_from([RecordState.AVAILABLE, RecordState.ACQUIRED]),
        st.integers(1, MAX),
        st.sampled_from([0, NOW - 1, NOW, NOW + 1]),
        keys,
        st.sampled_from([None, None, "txn-1"]),
    ),
    max_size=20,
    unique_by=lambda r: r.offset,
)


@settings(max_examples=200, deadline=None)
@given(in_flight_records, st.lists(keys, max_size=20), st.integers(0, 15), st.booleans())
def test_plan_invariants(
    in_flight: list[InFlightRecord], fresh_keys: list[str | None], budget: int, ordered: bool
) -> None:
    in_flight = [r for r in in_flight if not (r.state is RecordState.AVAILABLE and r.txn_id)]  # never stored
    fresh = [FreshMessage(50 + i, k) for i, k in enumerate(fresh_keys)]
    planned = plan(in_flight, fresh, budget, ordered)
    acquired = [r.offset for r in planned.acquired]
    assert len(acquired) <= budget and acquired == sorted(acquired)
    locked_before = {r.offset for r in in_flight if r.locked(NOW)}
    assert not locked_before & set(acquired), "a live lock is never taken twice"
    assert not {r.offset for r in planned.dead_letters} & set(acquired)
    assert all(r.delivery_count <= MAX for r in planned.acquired)
    # Fresh messages are taken in a prefix: everything below the new end offset is in the table.
    taken = planned.new | {r.offset for r in planned.parked}
    end = planned.end_offset if planned.end_offset is not None else 50 + len(fresh)
    assert taken == set(range(50, end))
    if ordered:  # one key, one message out at a time, and never past an earlier one still in flight
        by_key: dict[str, int] = {}
        for r in planned.acquired:
            if r.key is not None:
                assert r.key not in by_key
                by_key[r.key] = r.offset
        waiting = [r for r in in_flight if r.offset not in {d.offset for d in planned.dead_letters}]
        for r in waiting + planned.parked:
            if r.key in by_key and r.offset not in acquired:
                assert r.offset > by_key[r.key]
