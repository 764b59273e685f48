"""Mode 1 through the real app: half messages, the op-half log and the back-checker."""

from __future__ import annotations

import hashlib
import hmac
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Connection, select

from app.api.half_routes import HalfDetail
from app.broker import Broker
from app.main import create_app
from checker.back_check import BackChecker, RoundReport
from half_store.domain.constants import CHECK_MAX_TOPIC, HALF_TOPIC, OP_HALF_TOPIC
from half_store.services.retention import Retention
from half_store.storage import half_message_store as half_index
from half_store.storage.schema import half_messages
from tests.integration.conftest import create_topic, error_code, make_settings, read_all
from tests.support.callback_server import CallbackServer


def prepare(client: TestClient, value: Any = "v", **fields: Any) -> dict[str, Any]:
    body = {"topic": "orders", "producer_group": "pg", "value": value, **fields}
    response = client.post("/v1/half-messages", json=body)
    assert response.status_code in (200, 201), response.text
    return response.json()  # type: ignore[no-any-return]


def state_of(client: TestClient, message_id: str) -> str:
    return client.get(f"/v1/half-messages/{message_id}").json()["state"]  # type: ignore[no-any-return]


def check_round(client: TestClient) -> RoundReport:
    """One checker round inside the app's event loop, waiting for its calls to finish."""
    broker: Broker = client.app.state.broker  # type: ignore[attr-defined]

    async def run() -> RoundReport:
        async with httpx.AsyncClient() as http:
            checker = BackChecker(broker.halves, broker.settings, http)
            report = await checker.run_once()
            await checker.drain()
            return report

    return client.portal.call(run)  # type: ignore[union-attr]


def register(client: TestClient, url: str, secret: str | None = None, instance: str = "i1") -> None:
    body: dict[str, Any] = {"callback_url": url, "ttl_seconds": 60}
    if secret:
        body["secret"] = secret
    assert client.put(f"/v1/producer-groups/pg/listeners/{instance}", json=body).status_code == 200


@pytest.fixture
def orders(client: TestClient) -> TestClient:
    create_topic(client, "orders")
    return client


def test_a_half_message_is_invisible_until_committed(orders: TestClient) -> None:
    prepared = prepare(orders, {"order": 1}, key="k", headers={"h": "1"})
    assert prepared["state"] == "PREPARED" and prepared["transaction_id"] == prepared["message_id"]
    assert read_all(orders, "orders", isolation="read_uncommitted") == []
    half_log = read_all(orders, HALF_TOPIC)
    assert [m["value"] for m in half_log] == [{"order": 1}]

    committed = orders.post(f"/v1/half-messages/{prepared['message_id']}/commit").json()
    where = {"topic": "orders", "partition": 0, "offset": 0}
    assert committed == {"message_id": prepared["message_id"], "state": "COMMITTED", **where}
    visible = read_all(orders, "orders")
    assert [(m["key"], m["value"], m["headers"]) for m in visible] == [("k", {"order": 1}, {"h": "1"})]
    ops = read_all(orders, OP_HALF_TOPIC)
    assert [(m["value"]["half_offset"], m["value"]["state"], m["headers"]) for m in ops] == [(0, "COMMITTED", {"TAGS": "d"})]


def test_commit_is_idempotent_and_final(orders: TestClient) -> None:
    message_id = prepare(orders)["message_id"]
    first = orders.post(f"/v1/half-messages/{message_id}/commit").json()
    assert orders.post(f"/v1/half-messages/{message_id}/commit").json() == first
    rollback = orders.post(f"/v1/half-messages/{message_id}/rollback")
    assert (rollback.status_code, error_code(rollback)) == (409, "ALREADY_RESOLVED")
    assert len(read_all(orders, "orders")) == 1
    assert len(read_all(orders, OP_HALF_TOPIC)) == 1


def test_rollback_writes_only_an_op_record(orders: TestClient) -> None:
    message_id = prepare(orders)["message_id"]
    assert orders.post(f"/v1/half-messages/{message_id}/rollback").json() == {"message_id": message_id, "state": "ROLLED_BACK"}
    assert orders.post(f"/v1/half-messages/{message_id}/rollback").json()["state"] == "ROLLED_BACK"
    commit = orders.post(f"/v1/half-messages/{message_id}/commit")
    assert (commit.status_code, error_code(commit)) == (409, "ALREADY_RESOLVED")
    assert read_all(orders, "orders", isolation="read_uncommitted") == []
    assert [m["value"]["state"] for m in read_all(orders, OP_HALF_TOPIC)] == ["ROLLED_BACK"]


def test_preparing_the_same_transaction_again_returns_the_same_half_message(orders: TestClient) -> None:
    half = {"topic": "orders", "producer_group": "pg", "value": 1, "transaction_id": "tx-1"}
    first = orders.post("/v1/half-messages", json=half)
    again = orders.post("/v1/half-messages", json=half)
    other_group = orders.post("/v1/half-messages", json={**half, "producer_group": "pg2"})
    assert (first.status_code, again.status_code, other_group.status_code) == (201, 200, 201)
    assert again.json()["message_id"] == first.json()["message_id"] != other_group.json()["message_id"]
    assert len(read_all(orders, HALF_TOPIC)) == 2


def test_half_message_errors(orders: TestClient) -> None:
    unknown = orders.post("/v1/half-messages", json={"topic": "nope", "producer_group": "pg", "value": 1})
    assert (unknown.status_code, error_code(unknown)) == (404, "TOPIC_NOT_FOUND")
    system = orders.post("/v1/half-messages", json={"topic": HALF_TOPIC, "producer_group": "pg", "value": 1})
    assert (system.status_code, error_code(system)) == (403, "RESERVED_TOPIC")
    no_group = orders.post("/v1/half-messages", json={"topic": "orders", "value": 1})
    assert no_group.status_code == 422
    bad_partition = orders.post("/v1/half-messages", json={"topic": "orders", "producer_group": "pg", "value": 1, "partition": 5})
    assert (bad_partition.status_code, error_code(bad_partition)) == (404, "PARTITION_NOT_FOUND")


def test_racing_commits_and_rollbacks_resolve_exactly_once(orders: TestClient) -> None:
    ids = [prepare(orders, i)["message_id"] for i in range(10)]
    requests = [(mid, action) for mid in ids for action in ("commit", "rollback", "commit", "rollback")]
    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda r: orders.post(f"/v1/half-messages/{r[0]}/{r[1]}"), requests))
    assert all(r.status_code in (200, 409) for r in responses)
    committed = {mid for mid in ids if state_of(orders, mid) == "COMMITTED"}
    assert sorted(m["value"] for m in read_all(orders, "orders")) == sorted(ids.index(mid) for mid in committed)
    assert len(read_all(orders, OP_HALF_TOPIC)) == len(ids)


def test_listing_and_describing(orders: TestClient) -> None:
    a, b = prepare(orders, 1)["message_id"], prepare(orders, 2)["message_id"]
    orders.post(f"/v1/half-messages/{a}/commit")
    pending = orders.get("/v1/half-messages", params={"producer_group": "pg", "state": "PREPARED"}).json()["half_messages"]
    assert [h["message_id"] for h in pending] == [b]
    described = orders.get(f"/v1/half-messages/{a}").json()
    assert {k: described[k] for k in ("producer_group", "topic", "state", "check_times")} == {
        "producer_group": "pg", "topic": "orders", "state": "COMMITTED", "check_times": 0
    }
    assert orders.get("/v1/half-messages", params={"state": "BOGUS"}).status_code == 422
    everything = orders.get("/v1/half-messages?producer_group=&state=").json()["half_messages"]
    assert sorted(h["message_id"] for h in everything) == sorted([a, b])


def test_the_description_says_where_the_message_went_and_who_resolved_it(client: TestClient) -> None:
    create_topic(client, "orders", partitions=3)
    by_producer = prepare(client, "p", key="c-1")["message_id"]
    by_checker, rolled_back = prepare(client, "c", key="c-1")["message_id"], prepare(client, "r")["message_id"]
    pending = client.get(f"/v1/half-messages/{by_producer}").json()
    # The body is what the OpenAPI schema declares (a JSON value: no value_base64; auth off: nothing hidden).
    assert set(pending) == set(HalfDetail.__annotations__) - {"value_base64", "body_hidden"}
    assert (pending["offset"], pending["resolved_by"], pending["resolved_at"]) == (None, None, None)

    committed = client.post(f"/v1/half-messages/{by_producer}/commit").json()
    client.post(f"/v1/half-messages/{rolled_back}/rollback")
    with CallbackServer(lambda _: "COMMIT") as listener:
        register(client, listener.url)
        check_round(client)
    described = {h["message_id"]: h for h in client.get("/v1/half-messages").json()["half_messages"]}
    mine, checked, dropped = described[by_producer], described[by_checker], described[rolled_back]
    assert (mine["partition"], mine["offset"]) == (committed["partition"], committed["offset"])
    assert (mine["partition"], mine["offset"]) == (pending["partition"], 0)
    stored = read_all(client, "orders", partition=checked["partition"])
    assert [(m["offset"], m["value"]) for m in stored] == [(mine["offset"], "p"), (checked["offset"], "c")]
    assert (mine["resolved_by"], checked["resolved_by"], dropped["resolved_by"]) == ("producer", "checker", "producer")
    assert dropped["offset"] is None and dropped["resolved_at"] >= dropped["born_timestamp"]


# -- the checker -------------------------------------------------------------------------------


def test_the_checker_asks_a_signed_listener_and_applies_its_answer(orders: TestClient) -> None:
    keep, drop = prepare(orders, "keep")["message_id"], prepare(orders, "drop")["message_id"]
    answers = {keep: "COMMIT", drop: "ROLLBACK"}
    with CallbackServer(lambda check: answers[check["message_id"]]) as listener:
        register(orders, listener.url, secret="s3cret")
        report = check_round(orders)
    assert report.checked == 2
    assert (state_of(orders, keep), state_of(orders, drop)) == ("COMMITTED", "ROLLED_BACK")
    assert [m["value"] for m in read_all(orders, "orders")] == ["keep"]
    check, headers, raw = listener.received[0]
    sent = {"message_id", "transaction_id", "producer_group", "topic", "key", "value", "headers", "check_times", "born_timestamp"}
    assert set(check) >= sent
    assert check["check_times"] == 1
    expected = "sha256=" + hmac.new(b"s3cret", raw, hashlib.sha256).hexdigest()
    assert headers["X-Halfmq-Signature"] == expected


def test_resolved_and_young_messages_are_never_checked(database_url: str) -> None:
    settings = make_settings(database_url, transaction_timeout_seconds=0)
    with TestClient(create_app(settings)) as client, CallbackServer(lambda _: "UNKNOWN") as listener:
        create_topic(client, "orders")
        register(client, listener.url)
        resolved = prepare(client)["message_id"]
        client.post(f"/v1/half-messages/{resolved}/commit")
        immune = prepare(client, check_immunity_seconds=3600)["message_id"]
        for _ in range(3):
            check_round(client)
        assert listener.checked_ids() == []  # no check storm on resolved messages (RocketMQ #1517, #8003)
        broker: Broker = client.app.state.broker  # type: ignore[attr-defined]
        # Out of the check index too, so the checker's scan of due messages never walks over it.
        assert broker.store.read_sync(lambda conn: _next_check_at(conn, resolved)) is None
        described = client.get(f"/v1/half-messages/{immune}").json()
        assert (described["state"], described["check_times"]) == ("PREPARED", 0)  # immunity spends no checks (#8311)


def _next_check_at(conn: Connection, message_id: str) -> int | None:
    found = conn.execute(select(half_messages.c.next_check_at).where(half_messages.c.message_id == message_id))
    return found.scalar_one()  # type: ignore[no-any-return]


def test_unanswered_checks_count_and_end_in_discard(orders: TestClient) -> None:
    message_id = prepare(orders, "lost")["message_id"]
    with CallbackServer(lambda _: None) as failing:  # answers 500
        register(orders, failing.url)
        for expected_checks in (1, 2, 3):
            check_round(orders)
            assert orders.get(f"/v1/half-messages/{message_id}").json()["check_times"] == expected_checks
            time.sleep(0.25)  # the next check is one check interval later
        check_round(orders)
    assert len(failing.received) == 3
    assert state_of(orders, message_id) == "DISCARDED"
    discarded = orders.get(f"/v1/half-messages/{message_id}").json()
    assert (discarded["resolved_by"], discarded["offset"]) == ("checker", None)  # no offset in "orders"
    assert [m["value"] for m in read_all(orders, CHECK_MAX_TOPIC)] == ["lost"]
    assert read_all(orders, "orders", isolation="read_uncommitted") == []
    late_commit = orders.post(f"/v1/half-messages/{message_id}/commit")
    assert (late_commit.status_code, error_code(late_commit)) == (409, "ALREADY_RESOLVED")


def test_a_commit_after_the_checker_rolled_back_is_refused(orders: TestClient) -> None:
    message_id = prepare(orders)["message_id"]
    with CallbackServer(lambda _: "ROLLBACK") as listener:
        register(orders, listener.url)
        check_round(orders)
    late = orders.post(f"/v1/half-messages/{message_id}/commit")
    assert (late.status_code, error_code(late)) == (409, "ALREADY_RESOLVED")  # RocketMQ #5574, #8158
    assert read_all(orders, "orders", isolation="read_uncommitted") == []


def test_a_failing_check_does_not_stop_the_others(orders: TestClient) -> None:
    ids = [prepare(orders, i)["message_id"] for i in range(4)]
    poison = ids[1]

    def answer(check: dict[str, Any]) -> str:
        if check["message_id"] == poison:
            raise ConnectionError("listener crashed")  # the server drops the connection
        return "COMMIT"

    with CallbackServer(answer) as listener:
        register(orders, listener.url)
        check_round(orders)
    assert [state_of(orders, i) for i in ids] == ["COMMITTED", "PREPARED", "COMMITTED", "COMMITTED"]  # RocketMQ #9500


def test_no_listener_means_checks_are_spent_and_polling_hands_each_check_out_once(orders: TestClient) -> None:
    lonely = prepare(orders, "nobody listens")["message_id"]
    check_round(orders)
    assert orders.get(f"/v1/half-messages/{lonely}").json()["check_times"] == 1

    polled = prepare(orders, "polled", transaction_id="tx-poll")["message_id"]
    time.sleep(0.25)
    first = orders.get("/v1/producer-groups/pg/checks", params={"instance_id": "a"}).json()["checks"]
    second = orders.get("/v1/producer-groups/pg/checks", params={"instance_id": "b"}).json()["checks"]
    handed = [c["message_id"] for c in first + second]
    assert sorted(handed) == sorted({lonely, polled}) and len(handed) == 2
    check_round(orders)  # a polling group's checks are left to its pollers
    assert orders.get(f"/v1/half-messages/{polled}").json()["check_times"] == 1
    assert orders.post(f"/v1/half-messages/{polled}/commit").json()["state"] == "COMMITTED"


def test_resolved_half_messages_are_compacted_after_retention(database_url: str) -> None:
    settings = make_settings(database_url, resolved_retention_seconds=0)
    with TestClient(create_app(settings)) as client:
        create_topic(client, "orders")
        broker: Broker = client.app.state.broker  # type: ignore[attr-defined]
        retention = Retention(broker.store, settings)
        for round_number in range(3):
            ids = [prepare(client, i)["message_id"] for i in range(20)]
            for mid in ids:
                client.post(f"/v1/half-messages/{mid}/commit")
            time.sleep(0.01)
            client.portal.call(retention.run_once)  # type: ignore[union-attr]
            indexed = broker.store.read_sync(half_index.count_indexed)
            assert indexed == (0, 0), f"round {round_number}"
            for topic in (HALF_TOPIC, OP_HALF_TOPIC):
                partition = client.get(f"/v1/topics/{topic}").json()["partitions"][0]
                assert partition["log_start_offset"] == partition["high_watermark"] == 20 * (round_number + 1)
        assert len(read_all(client, "orders")) == 60


def test_retention_keeps_unresolved_half_messages(database_url: str) -> None:
    settings = make_settings(database_url, resolved_retention_seconds=0)
    with TestClient(create_app(settings)) as client:
        create_topic(client, "orders")
        broker: Broker = client.app.state.broker  # type: ignore[attr-defined]
        pending = prepare(client, "pending")["message_id"]
        done = prepare(client, "done")["message_id"]
        client.post(f"/v1/half-messages/{done}/commit")
        time.sleep(0.01)
        client.portal.call(Retention(broker.store, settings).run_once)  # type: ignore[union-attr]
        assert client.post(f"/v1/half-messages/{pending}/commit").json()["state"] == "COMMITTED"
        assert [m["value"] for m in read_all(client, "orders")] == ["done", "pending"]


def test_racing_identical_prepares_store_one_half_message(orders: TestClient) -> None:
    body = {"topic": "orders", "producer_group": "pg", "value": "once", "transaction_id": "tx-race"}
    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda _: orders.post("/v1/half-messages", json=body), range(16)))
    assert sorted({r.status_code for r in responses}) in ([200, 201], [201])
    assert len({r.json()["message_id"] for r in responses}) == 1
    assert [m["value"] for m in read_all(orders, HALF_TOPIC)] == ["once"]


def test_concurrent_prepares_of_several_transactions_store_each_once(orders: TestClient) -> None:
    # Prepares that land in one group commit are stored together; a repeated transaction id
    # among them must still come back as the one message of that transaction.
    bodies = [
        {"topic": "orders", "producer_group": "pg", "value": f"v{n % 8}", "transaction_id": f"tx-{n % 8}"} for n in range(32)
    ]
    with ThreadPoolExecutor(16) as pool:
        responses = list(pool.map(lambda body: orders.post("/v1/half-messages", json=body), bodies))
    assert all(r.status_code in (200, 201) for r in responses)
    ids_by_transaction: dict[str, set[str]] = {}
    for body, response in zip(bodies, responses, strict=True):
        ids_by_transaction.setdefault(str(body["transaction_id"]), set()).add(response.json()["message_id"])
    assert all(len(ids) == 1 for ids in ids_by_transaction.values())
    assert sorted(m["value"] for m in read_all(orders, HALF_TOPIC)) == [f"v{n}" for n in range(8)]
