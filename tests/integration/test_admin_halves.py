"""Half-message check history, recheck of discarded messages, and the checker's status."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Connection, update

from app.broker import Broker
from app.main import create_app
from half_store.domain.constants import CHECK_HISTORY_KEPT, CHECK_MAX_TOPIC, OP_HALF_TOPIC
from half_store.domain.half_records import CheckSent
from half_store.services.retention import Retention
from half_store.storage import half_message_store as half_index
from half_store.storage.schema import half_messages
from tests.integration.conftest import create_topic, error_code, make_settings, read_all
from tests.integration.test_half_messages import check_round, prepare, register, state_of
from tests.support.callback_server import CallbackServer


@pytest.fixture
def orders(client: TestClient) -> TestClient:
    create_topic(client, "orders")
    return client


def checks_of(client: TestClient, message_id: str) -> list[dict[str, Any]]:
    return client.get(f"/v1/half-messages/{message_id}").json()["checks"]  # type: ignore[no-any-return]


def discarded(client: TestClient, broker: Broker, value: Any = "v") -> str:
    """A half message the checker gave up on (discarded as the checker does after check_max checks)."""
    message_id = str(prepare(client, value)["message_id"])
    client.portal.call(broker.halves.discard, message_id)  # type: ignore[union-attr]
    assert state_of(client, message_id) == "DISCARDED"
    return message_id


# -- check history ------------------------------------------------------------------------------


def test_callback_checks_are_recorded_with_their_answers(orders: TestClient) -> None:
    message_id = prepare(orders, "v")["message_id"]
    answers = iter(["UNKNOWN", "COMMIT"])
    with CallbackServer(lambda _: next(answers)) as listener:
        register(orders, listener.url, instance="pod-1")
        check_round(orders)
        assert [c["answer"] for c in checks_of(orders, message_id)] == ["UNKNOWN"]
        broker: Broker = orders.app.state.broker  # type: ignore[attr-defined]
        orders.portal.call(broker.store.write, _due_now(message_id))  # type: ignore[union-attr]
        check_round(orders)
    checks = checks_of(orders, message_id)
    assert [(c["instance_id"], c["answer"]) for c in checks] == [("pod-1", "UNKNOWN"), ("pod-1", "COMMIT")]
    assert all(isinstance(c["latency_ms"], int) and c["latency_ms"] >= 0 for c in checks)
    assert checks[0]["at_ms"] <= checks[1]["at_ms"]
    assert state_of(orders, message_id) == "COMMITTED"


def test_failed_and_unanswerable_checks_are_recorded(orders: TestClient) -> None:
    lonely = prepare(orders, "nobody")["message_id"]
    check_round(orders)  # no listener at all: counted, as ERROR sent to nobody
    assert [(c["instance_id"], c["answer"]) for c in checks_of(orders, lonely)] == [(None, "ERROR")]

    failing = prepare(orders, "failing", producer_group="pg2")["message_id"]
    with CallbackServer(lambda _: None) as listener:  # answers 500
        body = {"callback_url": listener.url, "ttl_seconds": 60}
        orders.put("/v1/producer-groups/pg2/listeners/broken", json=body)
        check_round(orders)
    assert [(c["instance_id"], c["answer"]) for c in checks_of(orders, failing)] == [("broken", "ERROR")]


def test_a_polled_check_is_answered_by_the_pollers_commit(orders: TestClient) -> None:
    message_id = prepare(orders, "polled")["message_id"]
    handed = orders.get("/v1/producer-groups/pg/checks", params={"instance_id": "worker-7"}).json()["checks"]
    assert [c["message_id"] for c in handed] == [message_id]
    [awaiting] = checks_of(orders, message_id)
    assert (awaiting["instance_id"], awaiting["answer"], awaiting["latency_ms"]) == ("poll:worker-7", None, None)
    orders.post(f"/v1/half-messages/{message_id}/commit")
    [answered] = checks_of(orders, message_id)
    assert (answered["instance_id"], answered["answer"]) == ("poll:worker-7", "COMMIT")
    assert answered["latency_ms"] >= 0


def test_the_history_keeps_the_last_checks_only(orders: TestClient, broker: Broker) -> None:
    message_id = prepare(orders)["message_id"]
    for number in range(1, CHECK_HISTORY_KEPT + 6):
        sent = [CheckSent(message_id, number, f"i{number}")]
        broker.store.writer.run_sync(
            lambda conn, sent=sent, at=number: half_index.record_checks_sent(conn, sent, at, None)
        )
    checks = checks_of(orders, message_id)
    assert [c["instance_id"] for c in checks] == [f"i{n}" for n in range(6, CHECK_HISTORY_KEPT + 6)]
    # Each unanswered check timed out when the next one went out; the last still awaits its answer.
    assert [c["answer"] for c in checks] == ["TIMEOUT"] * (CHECK_HISTORY_KEPT - 1) + [None]


# -- recheck -----------------------------------------------------------------------------------------


def test_recheck_brings_a_discarded_message_back_and_a_commit_moves_it_once(orders: TestClient, broker: Broker) -> None:
    message_id = discarded(orders, broker, "order-1")
    refused = orders.post(f"/v1/half-messages/{message_id}/commit")
    assert (refused.status_code, error_code(refused)) == (409, "ALREADY_RESOLVED")

    rechecked = orders.post(f"/v1/half-messages/{message_id}/recheck")
    assert rechecked.status_code == 200
    assert {k: rechecked.json()[k] for k in ("message_id", "state", "check_times")} == {
        "message_id": message_id,
        "state": "PREPARED",
        "check_times": 0,
    }
    again = orders.post(f"/v1/half-messages/{message_id}/recheck")
    assert (again.status_code, error_code(again)) == (409, "ALREADY_RESOLVED")
    assert [
        h["message_id"] for h in orders.get("/v1/half-messages", params={"state": "PREPARED"}).json()["half_messages"]
    ] == [message_id]

    # The producer commits (retrying, racing itself): the message reaches its topic once.
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: orders.post(f"/v1/half-messages/{message_id}/commit"), range(8)))
    assert {(a.status_code, a.json()["state"]) for a in answers} == {(200, "COMMITTED")}
    assert len({a.json()["offset"] for a in answers}) == 1
    assert [m["value"] for m in read_all(orders, "orders")] == ["order-1"]
    assert [m["value"] for m in read_all(orders, CHECK_MAX_TOPIC)] == ["order-1"]  # the record of the discard stays
    assert [m["value"]["state"] for m in read_all(orders, OP_HALF_TOPIC)] == ["DISCARDED", "COMMITTED"]
    committed = orders.post(f"/v1/half-messages/{message_id}/recheck")
    assert (committed.status_code, error_code(committed)) == (409, "ALREADY_RESOLVED")


def test_a_rechecked_message_is_checked_again_and_committed_once(orders: TestClient, broker: Broker) -> None:
    message_id = discarded(orders, broker, "order-2")
    orders.post(f"/v1/half-messages/{message_id}/recheck")
    with CallbackServer(lambda _: "COMMIT") as listener:
        register(orders, listener.url)
        with ThreadPoolExecutor(4) as pool:  # the producer answers too, at the same time
            producer = [pool.submit(orders.post, f"/v1/half-messages/{message_id}/commit") for _ in range(4)]
            report = check_round(orders)
            assert all(f.result().status_code == 200 for f in producer)
    assert report.discarded == 0
    assert [m["value"] for m in read_all(orders, "orders")] == ["order-2"]
    assert state_of(orders, message_id) == "COMMITTED"


def test_racing_rechecks_reopen_once(orders: TestClient, broker: Broker) -> None:
    message_id = discarded(orders, broker)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: orders.post(f"/v1/half-messages/{message_id}/recheck"), range(8)))
    assert sorted(a.status_code for a in answers) == [200] + [409] * 7
    # Discarded again and rechecked again: still one message in the topic after the commit.
    client_discard = orders.portal.call(broker.halves.discard, message_id)  # type: ignore[union-attr]
    assert client_discard.state.value == "DISCARDED"
    assert orders.post(f"/v1/half-messages/{message_id}/recheck").status_code == 200
    assert orders.post(f"/v1/half-messages/{message_id}/commit").status_code == 200
    assert len(read_all(orders, "orders")) == 1
    assert [m["value"]["state"] for m in read_all(orders, OP_HALF_TOPIC)] == ["DISCARDED", "DISCARDED", "COMMITTED"]


def test_recheck_errors(orders: TestClient) -> None:
    prepared = prepare(orders)["message_id"]
    rolled_back = prepare(orders)["message_id"]
    orders.post(f"/v1/half-messages/{rolled_back}/rollback")
    for message_id in (prepared, rolled_back):
        response = orders.post(f"/v1/half-messages/{message_id}/recheck")
        assert (response.status_code, error_code(response)) == (409, "ALREADY_RESOLVED")
    missing = orders.post("/v1/half-messages/nope/recheck")
    assert (missing.status_code, error_code(missing)) == (404, "HALF_MESSAGE_NOT_FOUND")


def test_compaction_keeps_a_rechecked_message(database_url: str) -> None:
    settings = make_settings(database_url, resolved_retention_seconds=0)
    with TestClient(create_app(settings)) as client:
        create_topic(client, "orders")
        broker: Broker = client.app.state.broker  # type: ignore[attr-defined]
        message_id = discarded(client, broker, "kept")
        assert client.post(f"/v1/half-messages/{message_id}/recheck").status_code == 200
        client.portal.call(Retention(broker.store, settings).run_once)  # type: ignore[union-attr]
        assert client.post(f"/v1/half-messages/{message_id}/commit").json()["state"] == "COMMITTED"
        assert [m["value"] for m in read_all(client, "orders")] == ["kept"]


# -- the checker's status -------------------------------------------------------------------------------


def test_checker_status_reports_prepared_messages_by_group(orders: TestClient) -> None:
    empty = orders.get("/v1/checker").json()
    assert empty == {
        "leader": None,
        "lease_expires_ms": None,
        "last_round_ms": None,
        "last_retention_ms": None,
        "prepared": 0,
        "groups": [],
    }
    first = prepare(orders, 1)["message_id"]
    prepare(orders, 2)
    prepare(orders, 3, producer_group="other")
    orders.post(f"/v1/half-messages/{first}/commit")
    orders.put("/v1/producer-groups/idle/listeners/i1", json={"callback_url": "http://127.0.0.1:9/check"})
    status = orders.get("/v1/checker").json()
    assert status["prepared"] == 3 - 1
    groups = {g["producer_group"]: g for g in status["groups"]}
    assert {name: (g["prepared"], g["live_listeners"]) for name, g in groups.items()} == {
        "idle": (0, 1),
        "other": (1, 0),
        "pg": (1, 0),
    }
    assert groups["idle"]["oldest_born_ms"] is None
    assert groups["pg"]["oldest_born_ms"] <= groups["other"]["oldest_born_ms"]


def _due_now(message_id: str) -> Callable[[Connection], None]:
    """A write unit that makes a half message due for its next check at once (instead of waiting an interval)."""

    def unit(conn: Connection) -> None:
        conn.execute(update(half_messages).where(half_messages.c.message_id == message_id).values(next_check_at=0))

    return unit


# -- what a half message carries ------------------------------------------------------------------


def test_a_half_messages_key_value_and_headers_are_shown(orders: TestClient) -> None:
    """Whole in a describe; in a list a value is cut to 256 characters and says so; binary as base64."""
    long_text = "é" * 300
    small = prepare(orders, {"total": 12}, key="order-1", headers={"source": "web"})["message_id"]
    text = prepare(orders, long_text, key="order-2")["message_id"]
    record = prepare(orders, {"lines": ["x" * 50] * 10})["message_id"]
    binary = orders.post(
        "/v1/half-messages", json={"topic": "orders", "producer_group": "pg", "value_base64": "AAEC" * 100}
    ).json()["message_id"]

    described = orders.get(f"/v1/half-messages/{small}").json()
    assert (described["key"], described["value"], described["headers"]) == ("order-1", {"total": 12}, {"source": "web"})
    assert "value_truncated" not in described
    assert orders.get(f"/v1/half-messages/{text}").json()["value"] == long_text  # whole
    assert orders.get(f"/v1/half-messages/{binary}").json()["value_base64"] == "AAEC" * 100

    listed = {h["message_id"]: h for h in orders.get("/v1/half-messages").json()["half_messages"]}
    assert listed[small]["value"] == {"total": 12} and listed[small]["value_truncated"] is False
    assert listed[small]["key"] == "order-1" and listed[small]["headers"] == {"source": "web"}
    assert (listed[text]["value"], listed[text]["value_truncated"]) == ("é" * 256, True)
    assert listed[record]["value_truncated"] is True and listed[record]["value"].startswith('{"lines":["xxx')
    assert len(listed[record]["value"]) == 256
    assert (listed[binary]["value_base64"], listed[binary]["value_truncated"]) == (("AAEC" * 100)[:256], True)

    orders.post(f"/v1/half-messages/{small}/commit")  # resolved: still shown
    assert orders.get(f"/v1/half-messages/{small}").json()["value"] == {"total": 12}


def test_a_half_messages_body_needs_the_topics_read_right(database_url: str) -> None:
    from tests.integration.test_access_api import ADMIN, AS_ADMIN, bearer, new_principal

    with TestClient(create_app(make_settings(database_url, auth="token", admin_token=ADMIN))) as client:
        client.headers.update(AS_ADMIN)
        create_topic(client, "orders")
        message_id = prepare(client, "secret", key="k")["message_id"]
        group = {"resource_type": "producer_group", "pattern": "pg", "operations": ["describe"]}
        topic = {"resource_type": "topic", "pattern": "orders", "operations": ["describe"]}
        looker = new_principal(client, "looker", group, topic)
        reader = new_principal(client, "reader", group, {**topic, "operations": ["describe", "read"]})
        for principal, hidden in ((looker, True), (reader, False)):
            as_them = bearer(principal["token"])
            described = client.get(f"/v1/half-messages/{message_id}", headers=as_them).json()
            (listed,) = client.get("/v1/half-messages", headers=as_them).json()["half_messages"]
            for shown in (described, listed):
                assert shown["message_id"] == message_id and shown["state"] == "PREPARED"
                if hidden:
                    assert shown["body_hidden"] is True and not {"key", "value", "headers"} & set(shown)
                else:
                    assert (shown["key"], shown["value"]) == ("k", "secret") and "body_hidden" not in shown
