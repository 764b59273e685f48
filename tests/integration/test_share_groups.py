"""Share groups through the real app on both databases: receive, acks, extend, dead letters, describe."""

from __future__ import annotations

import threading
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
def jobs(client: TestClient) -> TestClient:
    create_topic(client, "jobs")
    return client


@pytest.fixture
def short_client(database_url: str) -> Iterator[TestClient]:
    """A broker that dead-letters after two deliveries and allows 100 ms locks."""
    settings = make_settings(database_url, share_max_deliveries=2, share_min_lock_ms=100)
    with TestClient(create_app(settings)) as test_client:
        create_topic(test_client, "jobs")
        yield test_client


def test_consumers_split_messages_and_an_accepted_message_is_never_delivered_again(jobs: TestClient) -> None:
    produce(jobs, list(range(10)))
    first = receive(jobs, max_messages=4)
    second = receive(jobs, max_messages=100)
    assert [m["value"] for m in first] == [0, 1, 2, 3]
    assert [m["value"] for m in second] == [4, 5, 6, 7, 8, 9]  # locked ones are hidden from the whole group
    assert all(m["delivery_count"] == 1 and m["topic"] == "jobs" and m["lock_expires_ms"] > 0 for m in first + second)
    assert all(r["ok"] for r in ack(jobs, first + second))
    assert receive(jobs) == []
    summary = describe(jobs)["topics"][0]
    assert (summary["topic"], summary["available"], summary["locked"], summary["accepted"], summary["dlq"]) == (
        "jobs", 0, 0, 10, 0,
    )
    assert summary["partitions"][0]["start_offset"] == summary["partitions"][0]["end_offset"] == 10


def test_two_groups_each_get_every_message(jobs: TestClient) -> None:
    produce(jobs, ["a", "b"])
    assert [m["value"] for m in receive(jobs, group="one")] == ["a", "b"]
    assert [m["value"] for m in receive(jobs, group="two")] == ["a", "b"]


def test_release_redelivers_with_the_delivery_count_raised(jobs: TestClient) -> None:
    produce(jobs, ["x"])
    first = receive(jobs)
    assert ack(jobs, first, "RELEASE") == [{"receipt": first[0]["receipt"], "ok": True}]
    again = receive(jobs)
    assert [(m["value"], m["delivery_count"]) for m in again] == [("x", 2)]
    assert again[0]["receipt"] != first[0]["receipt"]
    assert ack(jobs, first) == [{"receipt": first[0]["receipt"], "ok": False, "error": "RECEIPT_EXPIRED"}]
    assert ack(jobs, again)[0]["ok"]


def test_release_with_a_delay_holds_the_message_back_until_then(jobs: TestClient) -> None:
    produce(jobs, ["later"])
    released_at = time.time() * 1000
    assert ack(jobs, receive(jobs), "RELEASE", delay_ms=600)[0]["ok"]
    assert receive(jobs) == []
    again = receive(jobs, max_wait_ms=10_000)
    assert [m["value"] for m in again] == ["later"] and time.time() * 1000 >= released_at + 600


def test_an_expired_lock_redelivers_and_stales_the_old_receipt(short_client: TestClient) -> None:
    produce(short_client, ["slow"])
    first = receive(short_client, lock_ms=100)
    again = receive(short_client, lock_ms=30_000, max_wait_ms=10_000)  # long-polls until the lock runs out
    assert [(m["value"], m["delivery_count"]) for m in again] == [("slow", 2)]
    assert again[0]["lock_expires_ms"] >= first[0]["lock_expires_ms"]
    assert ack(short_client, first)[0]["error"] == "RECEIPT_EXPIRED"
    assert ack(short_client, again)[0]["ok"]


def test_extend_keeps_the_lock_and_the_receipt(short_client: TestClient) -> None:
    produce(short_client, ["long job"])
    held = receive(short_client, lock_ms=1000)
    response = short_client.post(
        f"/v1/share-groups/{GROUP}/extend", json={"receipts": [held[0]["receipt"], "forged"], "lock_ms": 60_000}
    )
    assert response.status_code == 200
    renewed, forged = response.json()["results"]
    assert renewed["ok"] and renewed["lock_expires_ms"] > held[0]["lock_expires_ms"]
    assert forged == {"receipt": "forged", "ok": False, "error": "UNKNOWN_RECEIPT"}
    assert receive(short_client, max_wait_ms=1500) == []  # past the first lock: still held
    assert ack(short_client, held)[0]["ok"]


def test_reject_goes_straight_to_the_dead_letter_topic_with_its_origin(jobs: TestClient) -> None:
    message = {"value": {"n": 1}, "key": "k", "headers": {"trace": "t1"}}
    assert jobs.post("/v1/topics/jobs/messages", json={"messages": [message]}).status_code == 200
    rejected = receive(jobs)
    assert ack(jobs, rejected, "REJECT")[0]["ok"]
    assert receive(jobs) == []
    letters = read_all(jobs, f"DLQ.{GROUP}")
    assert len(letters) == 1
    letter = letters[0]
    assert (letter["value"], letter["key"]) == ({"n": 1}, "k")
    assert letter["headers"] == {
        "trace": "t1",
        "halfmq-dlq-topic": "jobs",
        "halfmq-dlq-partition": "0",
        "halfmq-dlq-offset": str(rejected[0]["offset"]),
        "halfmq-delivery-count": "1",
        "halfmq-dlq-reason": "REJECTED",
    }
    topic = jobs.get(f"/v1/topics/DLQ.{GROUP}").json()
    assert len(topic["partitions"]) == 1
    assert describe(jobs)["topics"][0]["dlq"] == 1


def test_after_the_last_allowed_delivery_the_message_is_dead_lettered(short_client: TestClient) -> None:
    produce(short_client, ["poison"])
    for delivery in (1, 2):
        [message] = receive(short_client)
        assert message["delivery_count"] == delivery
        assert ack(short_client, [message], "RELEASE")[0]["ok"]
    assert receive(short_client) == []
    [letter] = read_all(short_client, f"DLQ.{GROUP}")
    assert letter["headers"]["halfmq-dlq-reason"] == "MAX_DELIVERIES"
    assert letter["headers"]["halfmq-delivery-count"] == "2"


def test_a_last_lock_that_runs_out_is_dead_lettered_by_the_sweep(short_client: TestClient) -> None:
    produce(short_client, ["abandoned"])
    receive(short_client, lock_ms=100)
    receive(short_client, lock_ms=100, max_wait_ms=10_000)  # its second and last delivery
    broker: Broker = short_client.app.state.broker  # type: ignore[attr-defined]
    deadline = time.monotonic() + 10
    while not short_client.portal.call(broker.shares.dead_letter_expired):  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the last lock never ran out"
        time.sleep(0.05)
    [letter] = read_all(short_client, f"DLQ.{GROUP}")
    assert (letter["value"], letter["headers"]["halfmq-dlq-reason"]) == ("abandoned", "MAX_DELIVERIES")
    assert describe(short_client)["topics"][0]["locked"] == 0


def test_one_bad_receipt_does_not_fail_the_batch(jobs: TestClient) -> None:
    produce(jobs, ["a", "b"])
    good, other = receive(jobs)
    other_group = receive(jobs, group="others")[0]
    body = {
        "acks": [
            {"receipt": good["receipt"], "type": "ACCEPT"},
            {"receipt": "not a receipt", "type": "ACCEPT"},
            {"receipt": good["receipt"][:-3] + "AAA", "type": "ACCEPT"},  # signature broken
            {"receipt": other_group["receipt"], "type": "ACCEPT"},  # another group's
            {"receipt": good["receipt"], "type": "REJECT"},  # already accepted above
            {"receipt": "", "type": "RELEASE", "delay_ms": 5},
        ]
    }
    response = jobs.post(f"/v1/share-groups/{GROUP}/acks", json=body)
    assert response.status_code == 200
    assert [(r["ok"], r.get("error")) for r in response.json()["results"]] == [
        (True, None),
        (False, "UNKNOWN_RECEIPT"),
        (False, "UNKNOWN_RECEIPT"),
        (False, "UNKNOWN_RECEIPT"),
        (False, "RECEIPT_EXPIRED"),
        (False, "UNKNOWN_RECEIPT"),
    ]
    assert ack(jobs, [other])[0]["ok"]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"topic": "jobs", "lock_ms": 0}, 422),
        ({"topic": "jobs", "lock_ms": 99}, 422),  # below HALFMQ_SHARE_MIN_LOCK_MS
        ({"topic": "jobs", "lock_ms": 12 * 3600 * 1000 + 1}, 422),
        ({"topic": "jobs", "max_messages": 0}, 422),
        ({"topic": "jobs", "max_messages": 1001}, 422),  # over HALFMQ_SHARE_MAX_MESSAGES
        ({"topic": "jobs", "max_wait_ms": -1}, 422),
        ({"topic": "jobs", "max_wait_ms": 30_001}, 422),
        ({"topic": "jobs", "surprise": 1}, 422),
        ({"topic": "no-such-topic"}, 404),
        ({"topic": "RMQ_SYS_TRANS_HALF_TOPIC"}, 403),
        ({}, 422),
    ],
)
def test_bad_receive_requests(jobs: TestClient, body: dict[str, Any], status: int) -> None:
    response = jobs.post(f"/v1/share-groups/{GROUP}/receive", json=body)
    assert response.status_code == status, response.text
    assert set(response.json()["error"]) == {"code", "message"}


def test_bad_acks_extends_and_names(jobs: TestClient) -> None:
    assert error_code(jobs.post("/v1/share-groups/a%20b/receive", json={"topic": "jobs"})) == "VALIDATION_ERROR"
    assert jobs.post("/v1/share-groups/g/acks", json={"acks": []}).status_code == 422
    assert jobs.post("/v1/share-groups/g/acks", json={"acks": [{"receipt": "x", "type": "MAYBE"}]}).status_code == 422
    delayed_accept = {"acks": [{"receipt": "x", "type": "ACCEPT", "delay_ms": 5}]}
    assert jobs.post("/v1/share-groups/g/acks", json=delayed_accept).status_code == 422
    assert jobs.post("/v1/share-groups/g/extend", json={"receipts": ["x"], "lock_ms": 1}).status_code == 422
    assert jobs.post("/v1/share-groups/g/acks", json={"acks": [{"receipt": 7, "type": "ACCEPT"}]}).status_code == 422
    response = jobs.get("/v1/share-groups/never-used")
    assert (response.status_code, error_code(response)) == (404, "SHARE_GROUP_NOT_FOUND")


def test_only_committed_messages_are_handed_out(jobs: TestClient) -> None:
    produce(jobs, ["plain-1"])
    open_txn = jobs.post("/v1/transactions", json={}).json()["txn_id"]
    aborted = jobs.post("/v1/transactions", json={}).json()["txn_id"]
    for txn, value in ((open_txn, "open"), (aborted, "aborted")):
        body = {"messages": [{"value": value}], "txn_id": txn}
        assert jobs.post("/v1/topics/jobs/partitions/0/messages", json=body).status_code == 200
    assert jobs.post(f"/v1/transactions/{aborted}/abort").status_code == 200
    half = jobs.post("/v1/half-messages", json={"topic": "jobs", "producer_group": "p", "value": "half"}).json()
    rolled = jobs.post("/v1/half-messages", json={"topic": "jobs", "producer_group": "p", "value": "rolled"}).json()
    produce(jobs, ["plain-2"])  # behind the open transaction: held back by the last stable offset
    assert [m["value"] for m in receive(jobs)] == ["plain-1"]
    assert jobs.post(f"/v1/half-messages/{rolled['message_id']}/rollback").status_code == 200
    assert jobs.post(f"/v1/half-messages/{half['message_id']}/commit").status_code == 200
    assert jobs.post(f"/v1/transactions/{open_txn}/commit").status_code == 200
    assert [m["value"] for m in receive(jobs)] == ["open", "plain-2", "half"]
    assert receive(jobs) == []


def test_a_long_poll_returns_when_a_message_is_committed(jobs: TestClient) -> None:
    broker: Broker = jobs.app.state.broker  # type: ignore[attr-defined]
    answer: list[list[dict[str, Any]]] = []
    waiter = threading.Thread(target=lambda: answer.append(receive(jobs, max_wait_ms=20_000)))
    waiter.start()
    deadline = time.monotonic() + 10
    while broker.log.notifier.waiting == 0:
        assert time.monotonic() < deadline, "the receive never started waiting"
        time.sleep(0.01)
    produce(jobs, ["wake up"])
    waiter.join(20)
    assert [m["value"] for m in answer[0]] == ["wake up"]


def test_ordered_receives_hand_out_one_message_per_key_at_a_time(jobs: TestClient) -> None:
    for value, key in [("a1", "a"), ("b1", "b"), ("a2", "a"), ("n1", None), ("a3", "a"), ("b2", "b")]:
        produce(jobs, [value], key=key)
    first = receive(jobs, ordered=True)
    assert [m["value"] for m in first] == ["a1", "b1", "n1"]
    assert receive(jobs, ordered=True) == []  # a2, a3, b2 wait for their keys
    by_value = {m["value"]: m for m in first}
    assert ack(jobs, [by_value["a1"]])[0]["ok"]
    assert [m["value"] for m in receive(jobs, ordered=True)] == ["a2"]
    assert ack(jobs, [by_value["b1"]], "RELEASE")[0]["ok"]  # b1 comes back before b2
    assert [(m["value"], m["delivery_count"]) for m in receive(jobs, ordered=True)] == [("b1", 2)]


def metric(client: TestClient, name: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def test_metrics_count_share_group_work(jobs: TestClient) -> None:
    names = [
        "halfmq_share_delivered_total",
        "halfmq_share_redelivered_total",
        "halfmq_share_accepted_total",
        "halfmq_share_released_total",
        'halfmq_share_dead_lettered_total{reason="REJECTED"}',
    ]
    before = {name: metric(jobs, name) for name in names}
    produce(jobs, ["m1", "m2", "m3"])
    one, two, three = receive(jobs)
    ack(jobs, [one])
    ack(jobs, [two], "RELEASE")
    ack(jobs, [three], "REJECT")
    receive(jobs)
    grown = {name: metric(jobs, name) - before[name] for name in names}
    assert list(grown.values()) == [4, 1, 1, 1, 1]
    assert metric(jobs, "halfmq_share_locked") == 1  # the redelivered one, in this test's own database


def test_two_brokers_never_hand_one_released_message_to_two_consumers(database_url: str) -> None:
    """Redeliveries race hardest: every concurrent one-message receive wants the same lowest released record."""
    settings = make_settings(database_url)
    with TestClient(create_app(settings)) as first, TestClient(create_app(settings)) as second:
        create_topic(first, "jobs")
        produce(first, list(range(40)))
        assert all(r["ok"] for r in ack(first, receive(first, max_messages=40), "RELEASE"))
        taken: list[tuple[int, int]] = []
        lock = threading.Lock()

        def consume(client: TestClient) -> None:
            while True:
                got = receive(client, max_messages=1)
                if not got:
                    return
                with lock:
                    taken.extend((m["offset"], m["delivery_count"]) for m in got)

        threads = [threading.Thread(target=consume, args=(client,)) for client in (first, second) * 4]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(taken) == [(offset, 2) for offset in range(40)]


def test_a_receive_carries_the_acknowledgements_of_the_batch_before(jobs: TestClient) -> None:
    produce(jobs, ["a", "b", "c", "d"])
    first = receive(jobs, max_messages=3)
    body = {
        "topic": "jobs",
        "max_messages": 10,
        "acks": [
            {"receipt": first[0]["receipt"], "type": "ACCEPT"},
            {"receipt": first[1]["receipt"], "type": "RELEASE"},  # back at once: this same receive hands it out
            {"receipt": first[2]["receipt"], "type": "REJECT"},
            {"receipt": "forged", "type": "ACCEPT"},
        ],
    }
    response = jobs.post(f"/v1/share-groups/{GROUP}/receive", json=body)
    assert response.status_code == 200
    answer = response.json()
    assert [(r["ok"], r.get("error")) for r in answer["results"]] == [
        (True, None), (True, None), (True, None), (False, "UNKNOWN_RECEIPT"),
    ]
    assert [(m["value"], m["delivery_count"]) for m in answer["messages"]] == [("b", 2), ("d", 1)]
    summary = describe(jobs)["topics"][0]
    assert (summary["accepted"], summary["dlq"], summary["locked"]) == (1, 1, 2)
    assert "results" not in receive_body(jobs)  # no acks, no results


def receive_body(client: TestClient) -> dict[str, Any]:
    return client.post(f"/v1/share-groups/{GROUP}/receive", json={"topic": "jobs"}).json()  # type: ignore[no-any-return]


def test_acknowledgements_on_a_waiting_receive_are_applied_at_once(jobs: TestClient) -> None:
    produce(jobs, ["only"])
    [held] = receive(jobs)
    body = {"topic": "jobs", "max_wait_ms": 300, "acks": [{"receipt": held["receipt"], "type": "ACCEPT"}]}
    answer = jobs.post(f"/v1/share-groups/{GROUP}/receive", json=body).json()
    assert answer["messages"] == [] and answer["results"][0]["ok"]
    assert describe(jobs)["topics"][0]["accepted"] == 1


def test_too_many_receipts_in_one_request(database_url: str) -> None:
    with TestClient(create_app(make_settings(database_url, max_batch_messages=2))) as client:
        three = [{"receipt": "r", "type": "ACCEPT"}] * 3
        for path, body in (
            ("/v1/share-groups/g/acks", {"acks": three}),
            ("/v1/share-groups/g/extend", {"receipts": ["r"] * 3, "lock_ms": 1000}),
            ("/v1/share-groups/g/receive", {"topic": "jobs", "acks": three}),
            ("/v1/transactions/txn-x/acks", {"group": "g", "receipts": ["r"] * 3}),
        ):
            response = client.post(path, json=body)
            assert (response.status_code, error_code(response)) == (422, "VALIDATION_ERROR"), path


def test_share_groups_are_listed_and_deleted_once_nothing_is_locked(jobs: TestClient) -> None:
    produce(jobs, [1, 2, 3])
    held = receive(jobs, max_messages=2)
    ack(jobs, receive(jobs, group="other", max_messages=3), group="other")
    listed = {g["group"]: g for g in jobs.get("/v1/share-groups").json()["share_groups"]}
    assert listed == {
        GROUP: {"group": GROUP, "topics": ["jobs"], "locked": 2, "accepted": 0, "dlq": 0},
        "other": {"group": "other", "topics": ["jobs"], "locked": 0, "accepted": 3, "dlq": 0},
    }
    busy = jobs.delete(f"/v1/share-groups/{GROUP}")
    assert (busy.status_code, error_code(busy)) == (409, "SHARE_GROUP_IN_USE")
    txn = jobs.post("/v1/transactions", json={}).json()["txn_id"]
    ack(jobs, held[:1])
    pending = jobs.post(f"/v1/transactions/{txn}/acks", json={"group": GROUP, "receipts": [held[1]["receipt"]]})
    assert pending.status_code == 200
    busy = jobs.delete(f"/v1/share-groups/{GROUP}")  # a transaction still holds one acknowledgement
    assert (busy.status_code, error_code(busy)) == (409, "SHARE_GROUP_IN_USE")
    assert jobs.post(f"/v1/transactions/{txn}/commit").status_code == 200

    assert jobs.delete(f"/v1/share-groups/{GROUP}").status_code == 204
    assert [g["group"] for g in jobs.get("/v1/share-groups").json()["share_groups"]] == ["other"]
    gone = jobs.delete(f"/v1/share-groups/{GROUP}")
    assert (gone.status_code, error_code(gone)) == (404, "SHARE_GROUP_NOT_FOUND")
    assert [m["value"] for m in receive(jobs, max_messages=5)] == [1, 2, 3]  # used again: from the beginning
