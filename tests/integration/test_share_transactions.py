"""Acknowledgements inside mode-2 transactions (Pulsar's pending ack), on both databases.

The locks stay held while the transaction is open; the messages are accepted if it
commits and released (delivery count kept) if it aborts or times out, in the same
database transaction as the transaction's own end.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.broker import Broker
from app.main import create_app
from tests.integration.conftest import create_topic, error_code, make_settings, read_all
from tests.integration.share_helpers import GROUP, ack, describe, produce, receive


@pytest.fixture
def jobs(database_url: str) -> Iterator[TestClient]:
    settings = make_settings(database_url, share_max_deliveries=2, share_min_lock_ms=100)
    with TestClient(create_app(settings)) as test_client:
        create_topic(test_client, "jobs")
        create_topic(test_client, "results")
        yield test_client


def begin(client: TestClient, **options: Any) -> str:
    response = client.post("/v1/transactions", json=options)
    assert response.status_code == 201, response.text
    return str(response.json()["txn_id"])


def ack_in(client: TestClient, txn_id: str, messages: list[dict[str, Any]], group: str = GROUP) -> Any:
    body = {"group": group, "receipts": [m["receipt"] for m in messages]}
    return client.post(f"/v1/transactions/{txn_id}/acks", json=body)


def consume_transform_produce(client: TestClient) -> tuple[str, list[dict[str, Any]]]:
    """Receive two jobs, write their results and acknowledge them, all in one open transaction."""
    produce(client, ["job-1", "job-2"])
    received = receive(client)
    txn_id = begin(client)
    for message in received:
        body = {"messages": [{"value": f"done {message['value']}"}], "txn_id": txn_id}
        assert client.post("/v1/topics/results/partitions/0/messages", json=body).status_code == 200
    response = ack_in(client, txn_id, received)
    assert response.status_code == 200
    assert [r["ok"] for r in response.json()["results"]] == [True, True]
    return txn_id, received


def test_commit_accepts_the_messages_with_the_output(jobs: TestClient) -> None:
    txn_id, _ = consume_transform_produce(jobs)
    assert describe(jobs)["topics"][0]["locked"] == 2
    assert jobs.post(f"/v1/transactions/{txn_id}/commit").json()["state"] == "COMMITTED"
    assert [m["value"] for m in read_all(jobs, "results")] == ["done job-1", "done job-2"]
    summary = describe(jobs)["topics"][0]
    assert (summary["accepted"], summary["locked"], summary["available"]) == (2, 0, 0)
    assert receive(jobs) == []


def test_abort_releases_them_with_their_delivery_counts(jobs: TestClient) -> None:
    txn_id, _ = consume_transform_produce(jobs)
    assert jobs.post(f"/v1/transactions/{txn_id}/abort").json()["state"] == "ABORTED"
    assert read_all(jobs, "results") == []
    again = receive(jobs)
    assert [(m["value"], m["delivery_count"]) for m in again] == [("job-1", 2), ("job-2", 2)]
    assert describe(jobs)["topics"][0]["accepted"] == 0


def test_the_transactions_timeout_releases_them(jobs: TestClient) -> None:
    produce(jobs, ["job"])
    received = receive(jobs)
    # Long enough that the acknowledgement lands while the transaction is still open on a loaded machine.
    txn_id = begin(jobs, timeout_ms=2_000)
    assert ack_in(jobs, txn_id, received).json()["results"][0]["ok"]
    broker: Broker = jobs.app.state.broker  # type: ignore[attr-defined]
    deadline = time.monotonic() + 15
    while not jobs.portal.call(broker.coordinator.abort_expired):  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the transaction never timed out"
        time.sleep(0.05)
    assert jobs.get(f"/v1/transactions/{txn_id}").json()["state"] == "TIMED_OUT"
    assert [(m["value"], m["delivery_count"]) for m in receive(jobs)] == [("job", 2)]


def test_the_locks_outlive_their_own_deadline_while_the_transaction_is_open(jobs: TestClient) -> None:
    produce(jobs, ["job"])
    received = receive(jobs, lock_ms=1000)
    txn_id = begin(jobs)
    assert ack_in(jobs, txn_id, received).json()["results"][0]["ok"]
    assert receive(jobs, max_wait_ms=1500) == []  # past the receipt's own lock
    assert ack(jobs, received)[0]["error"] == "RECEIPT_EXPIRED"  # the lock is the transaction's now
    assert jobs.post(f"/v1/transactions/{txn_id}/commit").status_code == 200
    assert describe(jobs)["topics"][0]["accepted"] == 1


def test_an_abort_after_the_last_allowed_delivery_dead_letters(jobs: TestClient) -> None:
    produce(jobs, ["poison"])
    assert ack(jobs, receive(jobs), "RELEASE")[0]["ok"]
    last = receive(jobs)
    assert last[0]["delivery_count"] == 2
    txn_id = begin(jobs)
    assert ack_in(jobs, txn_id, last).json()["results"][0]["ok"]
    assert jobs.post(f"/v1/transactions/{txn_id}/abort").status_code == 200
    [letter] = read_all(jobs, f"DLQ.{GROUP}")
    assert (letter["value"], letter["headers"]["halfmq-dlq-reason"]) == ("poison", "MAX_DELIVERIES")
    assert receive(jobs) == []


def test_repeating_the_acknowledgement_is_harmless_and_another_transaction_cannot_take_it(jobs: TestClient) -> None:
    produce(jobs, ["job"])
    received = receive(jobs)
    first, second = begin(jobs), begin(jobs)
    assert ack_in(jobs, first, received).json()["results"][0]["ok"]
    assert ack_in(jobs, first, received).json()["results"][0]["ok"]
    assert ack_in(jobs, second, received).json()["results"][0]["error"] == "RECEIPT_EXPIRED"
    assert ack_in(jobs, second, [{"receipt": "forged"}]).json()["results"][0]["error"] == "UNKNOWN_RECEIPT"
    assert jobs.post(f"/v1/transactions/{second}/commit").status_code == 200
    assert describe(jobs)["topics"][0]["locked"] == 1  # still the first transaction's


def test_bad_transactional_acknowledgements(jobs: TestClient) -> None:
    produce(jobs, ["job"])
    received = receive(jobs)
    missing = ack_in(jobs, "txn-does-not-exist", received)
    assert (missing.status_code, error_code(missing)) == (404, "TRANSACTION_NOT_FOUND")
    ended = begin(jobs)
    assert jobs.post(f"/v1/transactions/{ended}/commit").status_code == 200
    late = ack_in(jobs, ended, received)
    assert (late.status_code, error_code(late)) == (409, "INVALID_TXN_STATE")
    assert ack_in(jobs, ended, [{"receipt": "forged"}]).status_code == 409  # the transaction is checked first
    for bad in ({"group": GROUP, "receipts": []}, {"group": "bad group", "receipts": ["x"]}):
        assert jobs.post(f"/v1/transactions/{ended}/acks", json=bad).status_code == 422
    assert ack(jobs, received)[0]["ok"]  # none of that touched the lock
