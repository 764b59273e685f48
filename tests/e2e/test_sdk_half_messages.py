"""RocketMQ-style TransactionProducer against a real broker and its checker.

The broker runs with a 1 s transaction timeout and a 0.3 s check interval, so a
half message left unresolved is back-checked about a second after it was sent.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from sdk import (
    AlreadyResolvedError,
    Client,
    HalfMessageNotFoundError,
    IllegalStateError,
    LocalTransactionState,
    Message,
    RetryPolicy,
    TopicNotFoundError,
    TransactionListener,
    TransactionProducer,
)
from sdk._callback_server import SIGNATURE_HEADER, sign
from tests.e2e.sdk_fixtures import (  # noqa: F401
    REPO_ROOT,
    FaultyProxy,
    admin,
    broker,
    faulty_proxy,
    new_topic,
    read_all,
    unique,
)

pytestmark = pytest.mark.e2e

MODES = pytest.mark.parametrize("callback_port", [0, None], ids=["callback", "polling"])


class LocalStore(TransactionListener):
    """A listener whose local transaction is a dict entry, decided by ``arg``.

    ``arg`` is ``(decision, reported)``: the local outcome recorded for checks, and
    what ``execute_local_transaction`` reports now (a state, or ``"raise"``).
    """

    def __init__(self) -> None:
        self.outcomes: dict[str, LocalTransactionState] = {}
        self.checked: list[Message] = []
        self.lock = threading.Lock()

    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        decision, reported = arg
        assert message.message_id and message.transaction_id
        with self.lock:
            self.outcomes[message.transaction_id] = decision
        if reported == "raise":
            raise RuntimeError("the local transaction crashed half-way")
        return reported

    def check_local_transaction(self, message: Message) -> LocalTransactionState:
        with self.lock:
            self.checked.append(message)
            return self.outcomes.get(message.transaction_id or "", LocalTransactionState.UNKNOWN)


def wait_for_state(client: Client, message_id: str, expected: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        state = client.get_half_message(message_id).state
        if state == expected:
            return
        time.sleep(0.1)
    raise AssertionError(f"half message {message_id} is {state}, expected {expected}")


COMMIT, ROLLBACK, UNKNOWN = LocalTransactionState.COMMIT, LocalTransactionState.ROLLBACK, LocalTransactionState.UNKNOWN


@MODES
def test_commit_and_rollback_right_away(admin: Client, new_topic: Callable[..., str], callback_port: int | None) -> None:
    topic, group, listener = new_topic(1), unique("pg"), LocalStore()
    with TransactionProducer(admin.url, group, listener, callback_port=callback_port) as producer:
        committed = producer.send_message_in_transaction(Message(topic, {"order": 1}, key="o1"), (COMMIT, COMMIT))
        rolled_back = producer.send_message_in_transaction(Message(topic, b"\x00", key="o2"), (ROLLBACK, ROLLBACK))
    assert committed.local_state is COMMIT and rolled_back.local_state is ROLLBACK
    assert admin.get_half_message(committed.message_id).state == "COMMITTED"
    info = admin.get_half_message(rolled_back.message_id)
    assert (info.state, info.producer_group, info.topic) == ("ROLLED_BACK", group, topic)
    assert [m.value for m in read_all(admin, topic)] == [{"order": 1}]
    assert listener.checked == []


@MODES
def test_unknown_and_crashed_local_transactions_are_resolved_by_the_checker(
    admin: Client, new_topic: Callable[..., str], callback_port: int | None
) -> None:
    topic, group, listener = new_topic(1), unique("pg"), LocalStore()
    with TransactionProducer(admin.url, group, listener, callback_port=callback_port) as producer:
        unknown = producer.send_message_in_transaction(Message(topic, "unknown→commit"), (COMMIT, UNKNOWN))
        crashed = producer.send_message_in_transaction(Message(topic, "raised→rollback"), (ROLLBACK, "raise"))
        assert unknown.local_state is UNKNOWN and crashed.local_state is UNKNOWN
        assert admin.get_half_message(unknown.message_id).state == "PREPARED"
        assert [h.message_id for h in admin.list_half_messages(group)] == [unknown.message_id, crashed.message_id]
        wait_for_state(admin, unknown.message_id, "COMMITTED")
        wait_for_state(admin, crashed.message_id, "ROLLED_BACK")
    assert [m.value for m in read_all(admin, topic)] == ["unknown→commit"]
    checked = {m.transaction_id: m for m in listener.checked}
    assert checked[unknown.transaction_id].topic == topic
    assert checked[unknown.transaction_id].value == "unknown→commit"
    assert checked[unknown.transaction_id].message_id == unknown.message_id


def test_half_message_info_says_where_it_went_and_who_resolved_it(
    admin: Client, new_topic: Callable[..., str]
) -> None:
    topic, group, listener = new_topic(3), unique("pg"), LocalStore()
    # With a callback server the checker asks and resolves; a polling producer would resolve it itself.
    with TransactionProducer(admin.url, group, listener, callback_port=0) as producer:
        by_producer = producer.send_message_in_transaction(Message(topic, "p", key="c-1"), (COMMIT, COMMIT))
        rolled_back = producer.send_message_in_transaction(Message(topic, "r", key="c-1"), (ROLLBACK, ROLLBACK))
        by_checker = producer.send_message_in_transaction(Message(topic, "c", key="c-1"), (COMMIT, UNKNOWN))
        pending = admin.get_half_message(by_checker.message_id)
        assert (pending.state, pending.offset, pending.resolved_by) == ("PREPARED", None, None)
        wait_for_state(admin, by_checker.message_id, "COMMITTED")
    stored = {m.value: (m.partition, m.offset) for m in read_all(admin, topic)}
    mine, checked = admin.get_half_message(by_producer.message_id), admin.get_half_message(by_checker.message_id)
    assert (mine.partition, mine.offset, mine.resolved_by) == (*stored["p"], "producer")
    assert (checked.partition, checked.offset, checked.resolved_by) == (*stored["c"], "checker")
    assert pending.partition == checked.partition  # known from the prepare on
    dropped = admin.get_half_message(rolled_back.message_id)
    assert (dropped.state, dropped.offset, dropped.resolved_by) == ("ROLLED_BACK", None, "producer")
    assert dropped.resolved_at is not None and dropped.born_timestamp is not None
    assert dropped.resolved_at >= dropped.born_timestamp


CRASHING_PRODUCER = """
import os, sqlite3, sys
from sdk import LocalTransactionState, Message, TransactionListener, TransactionProducer

url, group, topic, db = sys.argv[1:5]

class CommitsThenDies(TransactionListener):
    def execute_local_transaction(self, message, arg):
        with sqlite3.connect(db) as conn:
            conn.execute("INSERT INTO orders (transaction_id) VALUES (?)", (message.transaction_id,))
        print(message.message_id, flush=True)
        os._exit(17)  # the process dies between its local commit and telling the broker

    def check_local_transaction(self, message):
        return LocalTransactionState.UNKNOWN

producer = TransactionProducer(url, group, CommitsThenDies(), callback_port=None).start()
producer.send_message_in_transaction(Message(topic, {"paid": True}))
"""


class SqliteOrders(TransactionListener):
    """Answers checks from the orders table the crashed process wrote."""

    def __init__(self, db: Path) -> None:
        self.db = db

    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        raise AssertionError("not used")

    def check_local_transaction(self, message: Message) -> LocalTransactionState:
        with sqlite3.connect(self.db) as conn:
            row = conn.execute("SELECT 1 FROM orders WHERE transaction_id = ?", (message.transaction_id,)).fetchone()
        return COMMIT if row else ROLLBACK


@MODES
def test_a_producer_process_that_dies_mid_transaction_is_resolved_by_another_instance(
    admin: Client, new_topic: Callable[..., str], tmp_path: Path, callback_port: int | None
) -> None:
    topic, group, db = new_topic(1), unique("pg"), tmp_path / "orders.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (transaction_id TEXT PRIMARY KEY)")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    crashed = subprocess.run(
        [sys.executable, "-c", CRASHING_PRODUCER, admin.url, group, topic, str(db)],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert crashed.returncode == 17, crashed.stderr
    message_id = crashed.stdout.strip()
    assert admin.get_half_message(message_id).state == "PREPARED"
    with TransactionProducer(admin.url, group, SqliteOrders(db), callback_port=callback_port):
        wait_for_state(admin, message_id, "COMMITTED")
    assert [m.value for m in read_all(admin, topic)] == [{"paid": True}]


def test_callback_server_rejects_unsigned_and_forged_checks(admin: Client, new_topic: Callable[..., str]) -> None:
    topic, listener = new_topic(1), LocalStore()
    listener.outcomes["t-1"] = COMMIT
    with TransactionProducer(admin.url, unique("pg"), listener) as producer:
        url = producer.callback_url
        assert url is not None and url.startswith("http://127.0.0.1:")
        body = json.dumps({"message_id": "m", "transaction_id": "t-1", "topic": topic, "value": 1}).encode()
        unsigned = httpx.post(url, content=body)
        forged = httpx.post(url, content=body, headers={SIGNATURE_HEADER: sign(b"wrong secret", body)})
        assert unsigned.status_code == forged.status_code == 401
        signed = httpx.post(url, content=body, headers={SIGNATURE_HEADER: sign(producer._secret.encode(), body)})
        assert signed.status_code == 200 and signed.json() == {"state": "COMMIT"}
    assert [m.transaction_id for m in listener.checked] == ["t-1"]


def test_retried_prepare_reuses_the_transaction_id(
    admin: Client, new_topic: Callable[..., str], faulty_proxy: FaultyProxy
) -> None:
    topic, group, listener = new_topic(1), unique("pg"), LocalStore()
    retry = RetryPolicy(initial_backoff=0.01)
    with TransactionProducer(faulty_proxy.url, group, listener, retry=retry) as producer:
        faulty_proxy.fail("/v1/half-messages", "lose_answer")
        result = producer.send_message_in_transaction(Message(topic, "once"), (COMMIT, COMMIT))
        explicit = Message(topic, "again", transaction_id=result.transaction_id)
        again = producer.send_message_in_transaction(explicit, (COMMIT, COMMIT))
    prepares = [json.loads(body) for method, path, body in faulty_proxy.seen if path == "/v1/half-messages"]
    assert len(prepares) == 3 and prepares[0] == prepares[1]
    assert again.message_id == result.message_id
    assert len(admin.list_half_messages(group, state=None)) == 1
    assert [m.value for m in read_all(admin, topic)] == ["once"]


def test_registration_heartbeats_and_unregisters(faulty_proxy: FaultyProxy) -> None:
    group = unique("pg")
    with TransactionProducer(faulty_proxy.url, group, LocalStore(), ttl_seconds=1, instance_id="inst-1"):
        time.sleep(1.2)
    listener_calls = [(m, json.loads(b) if b else None) for m, p, b in faulty_proxy.seen if "/listeners/inst-1" in p]
    puts = [body for method, body in listener_calls if method == "PUT"]
    assert len(puts) >= 3, "registration plus heartbeats every ttl/3"
    assert puts[0]["ttl_seconds"] == 1 and len(puts[0]["secret"]) >= 32
    assert puts[0]["callback_url"].endswith("/halfmq/check")
    assert listener_calls[-1][0] == "DELETE"


def test_lifecycle_errors_and_manual_resolution(admin: Client, new_topic: Callable[..., str]) -> None:
    topic, listener = new_topic(1), LocalStore()
    producer = TransactionProducer(admin.url, unique("pg"), listener, check_immunity_seconds=60)
    with pytest.raises(IllegalStateError, match="start"):
        producer.send_message_in_transaction(Message(topic, 1))
    producer.start()
    with pytest.raises(IllegalStateError):
        producer.start()
    with pytest.raises(TopicNotFoundError):
        producer.send_message_in_transaction(Message(unique("missing"), 1), (COMMIT, COMMIT))
    pending = producer.send_message_in_transaction(Message(topic, "by hand"), (COMMIT, UNKNOWN))
    producer.close()
    producer.close()  # idempotent
    with pytest.raises(IllegalStateError, match="closed"):
        producer.send_message_in_transaction(Message(topic, 1))
    assert admin.commit_half_message(pending.message_id)["state"] == "COMMITTED"
    assert admin.commit_half_message(pending.message_id)["state"] == "COMMITTED"
    with pytest.raises(AlreadyResolvedError):
        admin.rollback_half_message(pending.message_id)
    with pytest.raises(HalfMessageNotFoundError):
        admin.get_half_message("0" * 32)
    assert listener.checked == []
