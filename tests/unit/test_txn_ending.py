"""Ending transactions, decided without a database: phase one's plan and phase two's writes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from half_store.domain.constants import CONTROL_ABORT, CONTROL_COMMIT
from half_store.domain.errors import AlreadyResolved, ProducerFenced, TransactionNotFound
from half_store.domain.txn_state import TxnState
from half_store.services.txn_ending import (
    EndRequest,
    completion_moves,
    finished,
    markers_to_write,
    offsets_to_commit,
    plan_ends,
)
from half_store.storage.txn_store import StagedCommit, TransactionRow, TxnPartition

NOW = 1_000_000


def txn(
    txn_id: str, state: TxnState = TxnState.OPEN, *, producer: tuple[int, int] | None = None, expires_at: int = NOW + 1
) -> TransactionRow:
    producer_id, epoch = producer if producer else (None, None)
    return TransactionRow(txn_id, producer_id, epoch, state, 60_000, False, NOW - 10, expires_at)


def test_each_request_is_answered_finished_timed_out_or_moved() -> None:
    found = {
        "done": txn("done", TxnState.COMMITTED),
        "half-done": txn("half-done", TxnState.PREPARE_COMMIT),
        "late": txn("late", expires_at=NOW),
        "c": txn("c"),
        "a": txn("a"),
    }
    requests = [EndRequest(i, commit=i != "a") for i in ("done", "half-done", "late", "c", "a")]
    plan = plan_ends(requests, found, {}, NOW)
    assert set(plan.answered) == {"done"}
    assert [t.txn_id for t in plan.resumed] == ["half-done"]
    assert [t.txn_id for t in plan.timed_out] == ["late"]  # a commit past the timeout: the timeout wins
    assert {m.target: [t.txn_id for t in ts] for m, ts in plan.moves.items()} == {
        TxnState.PREPARE_COMMIT: ["c"],
        TxnState.PREPARE_ABORT: ["a"],
    }
    assert plan.committing == {"c"}


@pytest.mark.parametrize(
    ("state", "commit", "raises"),
    [
        (TxnState.ABORTED, True, AlreadyResolved),
        (TxnState.TIMED_OUT, True, AlreadyResolved),
        (TxnState.COMMITTED, False, AlreadyResolved),
        (TxnState.PREPARE_ABORT, True, AlreadyResolved),
    ],
)
def test_the_other_outcome_after_an_end_is_refused(state: TxnState, commit: bool, raises: type[Exception]) -> None:
    with pytest.raises(raises):
        plan_ends([EndRequest("t", commit)], {"t": txn("t", state)}, {}, NOW)


def test_a_missing_or_fenced_transaction_is_refused() -> None:
    with pytest.raises(TransactionNotFound):
        plan_ends([EndRequest("ghost", True)], {}, {}, NOW)
    fenced = txn("t", producer=(7, 2))
    with pytest.raises(ProducerFenced, match="fenced by epoch 3"):
        plan_ends([EndRequest("t", True)], {"t": fenced}, {7: 3}, NOW)
    assert plan_ends([EndRequest("t", True)], {"t": fenced}, {7: 2}, NOW).committing == {"t"}


def test_phase_two_finishes_each_prepared_transaction_where_its_prepare_state_says() -> None:
    prepared = [txn("c", TxnState.PREPARE_COMMIT), txn("a", TxnState.PREPARE_ABORT)]
    timed_out = replace(txn("t", TxnState.PREPARE_ABORT), timed_out=True)
    moves = completion_moves([*prepared, timed_out])
    assert {m.target: ids for m, ids in moves.items()} == {
        TxnState.COMMITTED: ["c"],
        TxnState.ABORTED: ["a"],
        TxnState.TIMED_OUT: ["t"],
    }
    assert [finished(t).state for t in prepared] == [TxnState.COMMITTED, TxnState.ABORTED]


def test_markers_go_only_where_none_was_written_yet() -> None:
    committing, aborting = txn("c", TxnState.PREPARE_COMMIT), txn("a", TxnState.PREPARE_ABORT)
    parts = {
        "c": [TxnPartition(1, 0, 10, None), TxnPartition(1, 1, 4, 9)],  # partition 1 was marked before a crash
        "a": [TxnPartition(2, 0, 0, None)],
    }
    markers = markers_to_write([committing, aborting], parts)
    assert [(m.txn.txn_id, m.part.topic_id, m.part.partition, m.control) for m in markers] == [
        ("c", 1, 0, CONTROL_COMMIT),
        ("a", 2, 0, CONTROL_ABORT),
    ]
    assert [m.aborted for m in markers] == [False, True]


def test_staged_offsets_are_applied_by_committers_in_order_and_forgotten_by_all() -> None:
    first, second, aborting = (
        txn("t1", TxnState.PREPARE_COMMIT),
        txn("t2", TxnState.PREPARE_COMMIT),
        txn("t3", TxnState.PREPARE_ABORT),
    )
    staged = [
        StagedCommit("t2", "g", 1, 0, 7, None, None, None),
        StagedCommit("t1", "g", 1, 0, 5, "m", None, None),
        StagedCommit("t3", "g", 1, 0, 99, None, None, None),
    ]
    forgotten, commits = offsets_to_commit([first, second, aborting], staged)
    assert forgotten == ["t1", "t2", "t3"]
    assert commits == [("g", [(1, 0, 5, "m")]), ("g", [(1, 0, 7, None)])]  # the later commit wins
    assert offsets_to_commit([first], []) == ([], [])
