"""The share consumer's lock bookkeeping, without a broker."""

from __future__ import annotations

import pytest

from sdk._share_core import HeldLocks, ShareCore, failure, receipts_of
from sdk.errors import IllegalStateError, ReceiptExpiredError, UnknownReceiptError
from sdk.models import AckResult, ReceivedMessage


def message(receipt: str) -> ReceivedMessage:
    return ReceivedMessage("t", {"n": 1}, partition=0, offset=1, receipt=receipt, delivery_count=1)


def test_locks_are_renewed_in_their_second_half_and_counted_from_the_request() -> None:
    held = HeldLocks(lock_ms=10_000, max_extension=None)
    held.hold([message("a"), message("b")], asked_at=100.0)
    assert held.due(104.9) == []
    assert sorted(held.due(105.1)) == ["a", "b"]
    held.renewed([AckResult("a", True), AckResult("b", False, "RECEIPT_EXPIRED")], asked_at=105.1)
    assert held.receipts() == ["a"] and held.due(110.0) == [] and held.due(110.2) == ["a"]


def test_no_renewal_past_the_longest_extension() -> None:
    held = HeldLocks(lock_ms=1_000, max_extension=3.0)
    held.hold([message("a")], asked_at=0.0)
    assert held.due(2.9) == ["a"] and held.due(3.1) == []
    assert held.holds("a")  # still held: the consumer may acknowledge it until the lock runs out


def test_acknowledged_receipts_are_forgotten() -> None:
    held = HeldLocks(lock_ms=1_000, max_extension=None)
    held.hold([message("a"), message("b")], asked_at=0.0)
    held.forget(["a", "unknown"])
    assert held.receipts() == ["b"] and len(held) == 1
    assert held.check_interval() == 0.25


def test_receipts_of_messages_and_strings() -> None:
    assert receipts_of(message("a")) == ["a"]
    assert receipts_of("b") == ["b"]
    assert receipts_of([message("a"), "b"]) == ["a", "b"]


def test_the_first_refused_receipt_picks_the_error() -> None:
    assert failure([AckResult("a", True)]) is None
    results = [AckResult("a", True), AckResult("b", False, "RECEIPT_EXPIRED"), AckResult("c", False, "UNKNOWN_RECEIPT")]
    expired = failure(results)
    assert isinstance(expired, ReceiptExpiredError) and "2 of 3" in expired.message
    assert isinstance(failure([AckResult("c", False, "UNKNOWN_RECEIPT")]), UnknownReceiptError)


def core() -> ShareCore:
    return ShareCore("g", "t", max_messages=10, lock_ms=1_000, ordered=False, max_extension=None,
                     on_acknowledged=lambda results: None)


def test_a_receive_carries_the_deferred_acknowledgements_and_takes_them_back_if_it_fails() -> None:
    consumer = core()
    consumer.received(consumer.receive(None, 0), ([message("a"), message("b")], []))
    consumer.defer(message("a"), "RELEASE", 50)
    request = consumer.receive(None, 0)
    assert request.acks == [("a", "RELEASE", 50)] and request.call.json["acks"][0]["delay_ms"] == 50
    consumer.not_received(request)
    retried = consumer.receive(None, 0)
    assert retried.acks == [("a", "RELEASE", 50)]
    consumer.received(retried, ([], [AckResult("a", True)]))
    assert consumer.held.receipts() == ["b"] and len(consumer.pending) == 0


def test_settle_accepts_what_a_handler_took_and_releases_what_it_failed_on() -> None:
    consumer = core()
    batch = [message("a"), message("b"), message("c")]
    consumer.received(consumer.receive(None, 0), (batch, []))
    consumer.defer("c", "REJECT", 0)  # the handler settled this one itself
    consumer.settle(batch, failed={"b"})
    assert consumer.pending.take() == [("c", "REJECT", None), ("a", "ACCEPT", None), ("b", "RELEASE", None)]


def test_nothing_to_send_sends_nothing_and_a_closed_core_refuses() -> None:
    consumer = core()
    assert consumer.send([]) is None and consumer.extend([], None) is None and consumer.release_held() is None
    consumer.closed = True
    with pytest.raises(IllegalStateError):
        consumer.receive(None, 0)
