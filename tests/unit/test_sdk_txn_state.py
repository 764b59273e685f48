"""The transactional producer's state machine, without a broker."""

from __future__ import annotations

import httpx
import pytest

from sdk._txn_state import TransactionManager, TransactionState, is_transition_valid
from sdk.errors import (
    AlreadyResolvedError,
    BrokerUnavailableError,
    IllegalStateError,
    ProducerFencedError,
    TopicNotFoundError,
)
from sdk.models import ProducerIdentity

S = TransactionState


def ready() -> TransactionManager:
    manager = TransactionManager("tid")
    manager.initialized(ProducerIdentity(7, 0))
    return manager


@pytest.mark.parametrize(
    ("source", "target", "valid"),
    [
        (S.UNINITIALIZED, S.READY, True),
        (S.UNINITIALIZED, S.IN_TRANSACTION, False),
        (S.READY, S.IN_TRANSACTION, True),
        (S.READY, S.COMMITTING, False),
        (S.IN_TRANSACTION, S.IN_TRANSACTION, False),
        (S.IN_TRANSACTION, S.COMMITTING, True),
        (S.IN_TRANSACTION, S.ABORTING, True),
        (S.COMMITTING, S.READY, True),
        (S.COMMITTING, S.COMMITTING, True),
        (S.COMMITTING, S.ABORTING, False),
        (S.ABORTABLE_ERROR, S.COMMITTING, False),
        (S.ABORTABLE_ERROR, S.ABORTING, True),
        (S.ABORTING, S.READY, True),
        (S.FATAL_ERROR, S.READY, False),
        (S.READY, S.FATAL_ERROR, True),
        (S.FATAL_ERROR, S.CLOSED, True),
        (S.CLOSED, S.READY, False),
    ],
)
def test_transition_table(source: TransactionState, target: TransactionState, valid: bool) -> None:
    assert is_transition_valid(source, target) is valid


def test_everything_needs_init_first() -> None:
    manager = TransactionManager("tid")
    with pytest.raises(IllegalStateError, match="init_transactions"):
        manager.begin()
    with pytest.raises(IllegalStateError, match="init_transactions"):
        manager.require_in_transaction("send")


def test_send_outside_a_transaction_is_refused() -> None:
    with pytest.raises(IllegalStateError, match=r"send\(\) outside a transaction"):
        ready().require_in_transaction("send")


def test_commit_twice_is_refused() -> None:
    manager = ready()
    manager.begin()
    assert manager.begin_commit() is False  # nothing written: no broker request needed
    manager.completed()
    with pytest.raises(IllegalStateError, match="without an open transaction"):
        manager.begin_commit()


def test_begin_twice_is_refused() -> None:
    manager = ready()
    manager.begin()
    with pytest.raises(IllegalStateError, match="already open"):
        manager.begin()


def test_a_failed_send_makes_the_transaction_abort_only() -> None:
    manager = ready()
    manager.begin()
    manager.failed(TopicNotFoundError("nope", status=404))
    assert manager.state is S.ABORTABLE_ERROR and not manager.needs_epoch_bump
    with pytest.raises(IllegalStateError, match="abort_transaction"):
        manager.begin_commit()
    with pytest.raises(IllegalStateError, match="abort_transaction"):
        manager.require_in_transaction("send")
    manager.begin_abort()
    manager.completed()
    assert manager.state is S.READY


def test_a_send_with_unknown_outcome_needs_a_new_epoch() -> None:
    manager = ready()
    manager.begin()
    manager.txn_id = "txn-1"
    manager.failed(BrokerUnavailableError("gone"))
    assert manager.needs_epoch_bump
    assert manager.begin_abort() is True
    manager.initialized(ProducerIdentity(7, 1))  # what abort does when a bump is needed
    assert manager.state is S.READY and not manager.needs_epoch_bump
    assert manager.base_sequence(("t", 0)) == 0


def test_fencing_is_fatal_and_every_later_call_says_so() -> None:
    manager = ready()
    manager.begin()
    manager.failed(ProducerFencedError("epoch 0 fenced by 1", status=409))
    assert manager.state is S.FATAL_ERROR
    for attempt in (manager.begin, manager.begin_commit, manager.begin_abort,
                    lambda: manager.require_in_transaction("send")):
        with pytest.raises(ProducerFencedError, match="create a new producer"):
            attempt()


def test_commit_with_unknown_outcome_can_be_sent_again() -> None:
    manager = ready()
    manager.begin()
    manager.txn_id = "txn-1"
    assert manager.begin_commit() is True
    manager.failed(BrokerUnavailableError("gone"))
    assert manager.state is S.COMMITTING
    assert manager.begin_commit() is True
    manager.completed()
    assert manager.state is S.READY


def test_commit_refused_by_the_broker_ends_the_transaction() -> None:
    manager = ready()
    manager.begin()
    manager.txn_id = "txn-1"
    manager.begin_commit()
    manager.failed(AlreadyResolvedError("timed out", status=409))
    assert manager.state is S.READY and manager.txn_id is None


def test_sequences_restart_with_each_epoch() -> None:
    manager = ready()
    manager.acknowledge(("t", 0), manager.base_sequence(("t", 0)), 3)
    assert manager.base_sequence(("t", 0)) == 3 and manager.base_sequence(("t", 1)) == 0


def test_closed_producer_refuses_everything() -> None:
    manager = ready()
    manager.close()
    with pytest.raises(IllegalStateError, match="closed"):
        manager.begin()


def test_unknown_transport_errors_count_as_unknown_outcomes() -> None:
    manager = ready()
    manager.begin()
    manager.failed(httpx.ReadTimeout("slow"))
    assert manager.needs_epoch_bump
