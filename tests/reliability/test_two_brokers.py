"""Two broker processes on one PostgreSQL database under concurrent load.

- No shared offsets: producers writing through both processes at once get
  distinct, gap-free offsets, and every acknowledged value is read exactly once
  where it was acknowledged.
- Idempotence and transactions work across processes: a batch retried through the
  other process is a duplicate, a transaction begun on one is produced to and
  committed through the other, a half message prepared on one is committed on the other.
- One checker at a time: the ``checker`` lease has one holder, never both
  processes report ``halfmq_checker_leader 1`` at once.
- A killed checker's lease is taken over: after SIGKILL of the leader the other
  process takes the lease within ``lease_seconds`` and resolves a forgotten half
  message and times out an abandoned transaction.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.support.broker_process import BrokerProcess
from tests.support.callback_server import CallbackServer
from tests.support.databases import PostgresDatabases

pytestmark = pytest.mark.e2e

SETTINGS: dict[str, object] = {
    "check_interval_seconds": 0.3,
    "transaction_timeout_seconds": 0.5,
    "check_max": 1000,
    "lease_seconds": 2,
}
LEADER_RE = re.compile(r"^halfmq_checker_leader (\S+)$", re.MULTILINE)


@pytest.fixture()
def two_brokers(
    postgres_databases: PostgresDatabases, start_broker: Callable[..., BrokerProcess]
) -> Iterator[tuple[BrokerProcess, BrokerProcess, str]]:
    url = postgres_databases.new()
    # Started together: both migrate the empty database at once (an advisory lock serialises them).
    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(lambda _: start_broker(url, **SETTINGS), range(2))
    yield a, b, url


def leader_flag(client: httpx.Client) -> float | None:
    try:
        found = LEADER_RE.search(client.get("/metrics", timeout=5).text)
    except httpx.TransportError:
        return None
    return float(found.group(1)) if found else 0.0


def lease_holder(url: str) -> tuple[str, int] | None:
    parsed = make_url(url)
    with psycopg.connect(host=parsed.host, port=parsed.port or 5432, user=parsed.username, dbname=parsed.database) as conn:
        row = conn.execute("SELECT holder, expires_at FROM leases WHERE name = 'checker'").fetchone()
    return None if row is None else (str(row[0]), int(row[1]))


def test_two_processes_share_one_database_without_sharing_offsets(two_brokers: tuple[BrokerProcess, BrokerProcess, str]) -> None:
    a, b, _url = two_brokers
    listener = CallbackServer(lambda _check: "COMMIT").start()
    clients = [httpx.Client(base_url=p.url, timeout=30) for p in (a, b)]
    try:
        ca, cb = clients
        assert ca.post("/v1/topics", json={"name": "shared", "partitions": 3}).status_code == 201
        assert cb.post("/v1/topics", json={"name": "shared", "partitions": 3}).json()["error"]["code"] == "TOPIC_EXISTS"
        registered = ca.put("/v1/producer-groups/two/listeners/l1", json={"callback_url": listener.url, "ttl_seconds": 60})
        assert registered.status_code == 200

        acknowledged: dict[str, tuple[int, int]] = {}
        lock = threading.Lock()
        stop = threading.Event()
        leader_samples: list[tuple[float | None, float | None]] = []
        errors: list[str] = []
        counter = itertools.count()

        def record(ids: list[str], offsets: list[dict[str, int]]) -> None:
            with lock:
                for value_id, placed in zip(ids, offsets, strict=True):
                    acknowledged[value_id] = (placed["partition"], placed["offset"])

        def plain_producer(worker: int) -> None:
            with httpx.Client(base_url=(a, b)[worker % 2].url, timeout=30) as client:
                while not stop.is_set():
                    ids = [f"plain-{next(counter)}" for _ in range(3)]
                    answer = client.post("/v1/topics/shared/messages", json={"messages": [{"value": {"id": i}} for i in ids]})
                    if answer.status_code != 200:
                        errors.append(f"produce -> {answer.status_code} {answer.text}")
                        return
                    record(ids, answer.json()["offsets"])

        def idempotent_producer(worker: int) -> None:
            """Each batch goes to one process, and its retry to the other: the retry is a duplicate."""
            first, second = (httpx.Client(base_url=p.url, timeout=30) for p in ((a, b) if worker % 2 else (b, a)))
            with first, second:
                pid = first.post("/v1/producers", json={}).json()
                sequence = 0
                while not stop.is_set():
                    ids = [f"idem-{next(counter)}" for _ in range(2)]
                    body = {
                        "messages": [{"value": {"id": i}} for i in ids],
                        "producer_id": pid["producer_id"],
                        "producer_epoch": pid["producer_epoch"],
                        "base_sequence": sequence,
                    }
                    original = first.post("/v1/topics/shared/partitions/1/messages", json=body)
                    retried = second.post("/v1/topics/shared/partitions/1/messages", json=body)
                    if original.status_code != 200 or retried.status_code != 200:
                        errors.append(f"idempotent produce -> {original.text} / retry {retried.text}")
                        return
                    if not retried.json()["duplicate"] or retried.json()["offsets"] != original.json()["offsets"]:
                        errors.append(
                            f"retry through the other process was not a duplicate: {original.json()} vs {retried.json()}"
                        )
                    record(ids, original.json()["offsets"])
                    sequence += 2

        def transactional_producer(worker: int) -> None:
            """Begin on one process, produce on both, commit on the other."""
            with httpx.Client(base_url=a.url, timeout=30) as on_a, httpx.Client(base_url=b.url, timeout=30) as on_b:
                while not stop.is_set():
                    txn = on_a.post("/v1/transactions", json={"timeout_ms": 30000}).json()["txn_id"]
                    ids = [f"txn-{next(counter)}" for _ in range(2)]
                    placed = []
                    for client, value_id in zip((on_a, on_b), ids, strict=True):
                        answer = client.post(
                            "/v1/topics/shared/partitions/2/messages",
                            json={"messages": [{"value": {"id": value_id}}], "txn_id": txn},
                        )
                        placed += answer.json()["offsets"]
                    committed = on_b.post(f"/v1/transactions/{txn}/commit")
                    if committed.status_code != 200 or committed.json()["state"] != "COMMITTED":
                        errors.append(f"commit through the other process -> {committed.text}")
                        return
                    record(ids, placed)

        def half_producer(worker: int) -> None:
            """Prepare on one process, commit on the other (or leave it to the checker)."""
            with httpx.Client(base_url=a.url, timeout=30) as on_a, httpx.Client(base_url=b.url, timeout=30) as on_b:
                while not stop.is_set():
                    value_id = f"half-{next(counter)}"
                    prepared = on_a.post(
                        "/v1/half-messages",
                        json={"topic": "shared", "producer_group": "two", "value": {"id": value_id}, "partition": 0},
                    ).json()
                    if int(value_id.split("-")[1]) % 3:
                        committed = on_b.post(f"/v1/half-messages/{prepared['message_id']}/commit")
                        if committed.status_code != 200:
                            errors.append(f"half commit through the other process -> {committed.text}")
                            return
                    with lock:
                        acknowledged[value_id] = (0, -1)  # committed by the producer or by the checker

        def leader_watch() -> None:
            with httpx.Client(base_url=a.url) as on_a, httpx.Client(base_url=b.url) as on_b:
                while not stop.is_set():
                    leader_samples.append((leader_flag(on_a), leader_flag(on_b)))
                    time.sleep(0.05)

        jobs = [plain_producer, plain_producer, idempotent_producer, idempotent_producer, transactional_producer, half_producer]
        with ThreadPoolExecutor(len(jobs) + 1) as pool:
            futures = [pool.submit(job, n) for n, job in enumerate(jobs)]
            futures.append(pool.submit(leader_watch))
            time.sleep(5)
            stop.set()
            for future in futures:
                future.result()
        assert not errors, errors[:10]

        # One checker at a time.
        assert leader_samples
        both = [s for s in leader_samples if s == (1.0, 1.0)]
        assert not both, f"both processes held the checker lease at once in {len(both)} of {len(leader_samples)} samples"
        assert any(1.0 in s for s in leader_samples), "no process ever took the checker lease"

        # Wait for the checker to commit the forgotten half messages, then read everything through B.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if not cb.get("/v1/half-messages", params={"state": "PREPARED"}).json()["half_messages"]:
                break
            time.sleep(0.2)
        assert not cb.get("/v1/half-messages", params={"state": "PREPARED"}).json()["half_messages"]
        seen: Counter[str] = Counter()
        where: dict[str, tuple[int, int]] = {}
        for partition in range(3):
            offset, last_offset = 0, -1
            while True:
                page = cb.get(
                    f"/v1/topics/shared/partitions/{partition}/messages", params={"offset": offset, "max_messages": 1000}
                ).json()
                for message in page["messages"]:
                    assert message["offset"] > last_offset
                    last_offset = message["offset"]
                    seen[message["value"]["id"]] += 1
                    where[message["value"]["id"]] = (partition, message["offset"])
                if page["next_offset"] >= page["high_watermark"]:
                    break
                offset = page["next_offset"]
        twice = {k: v for k, v in seen.items() if v > 1}
        assert not twice, f"values read more than once: {list(twice.items())[:10]}"
        missing = sorted(set(acknowledged) - set(seen))
        assert not missing, f"acknowledged values missing: {missing[:10]}"
        misplaced = [
            (k, acknowledged[k], where[k]) for k in acknowledged if acknowledged[k][1] >= 0 and acknowledged[k] != where[k]
        ]
        assert not misplaced, f"values read elsewhere than acknowledged: {misplaced[:10]}"
        # Gap-free: every offset below the high watermark of the plain partition holds one acknowledged value.
        plain_offsets = sorted(o for (p, o) in (where[k] for k in seen) if p == 0)
        high_watermark = cb.get("/v1/topics/shared").json()["partitions"][0]["high_watermark"]
        assert plain_offsets == list(range(high_watermark)), "offsets of partition 0 are not 0..hw-1 without gaps"
    finally:
        for client in clients:
            client.close()
        listener.close()


def test_a_killed_checkers_lease_is_taken_over(two_brokers: tuple[BrokerProcess, BrokerProcess, str]) -> None:
    a, b, url = two_brokers
    listener = CallbackServer(lambda _check: "COMMIT").start()
    clients = {a.pid: httpx.Client(base_url=a.url, timeout=30), b.pid: httpx.Client(base_url=b.url, timeout=30)}
    try:
        deadline = time.monotonic() + 10
        leader = None
        while leader is None and time.monotonic() < deadline:
            flags = {process: leader_flag(clients[process.pid]) for process in (a, b)}
            holders = [p for p, flag in flags.items() if flag == 1.0]
            assert len(holders) <= 1, flags
            leader = holders[0] if holders else None
            time.sleep(0.1)
        assert leader is not None, "no process took the checker lease"
        survivor = b if leader is a else a
        on_survivor = clients[survivor.pid]
        before = lease_holder(url)
        assert before is not None

        assert on_survivor.post("/v1/topics", json={"name": "takeover", "partitions": 1}).status_code == 201
        listener_body = {"callback_url": listener.url, "ttl_seconds": 60}
        assert on_survivor.put("/v1/producer-groups/takeover/listeners/l1", json=listener_body).status_code == 200

        leader.kill()
        killed_at = time.monotonic()
        half = on_survivor.post("/v1/half-messages", json={"topic": "takeover", "producer_group": "takeover", "value": 1}).json()
        txn = on_survivor.post("/v1/transactions", json={"timeout_ms": 500}).json()["txn_id"]
        written = on_survivor.post("/v1/topics/takeover/partitions/0/messages", json={"messages": [{"value": 2}], "txn_id": txn})
        assert written.status_code == 200

        took_over = None
        while time.monotonic() - killed_at < 2 + 5:
            if leader_flag(on_survivor) == 1.0:
                took_over = time.monotonic() - killed_at
                break
            time.sleep(0.05)
        assert took_over is not None, f"the survivor did not take the lease within lease_seconds + 5 s: {lease_holder(url)}"
        after = lease_holder(url)
        assert after is not None and after[0] != before[0], (before, after)

        deadline = time.monotonic() + 15
        state = txn_state = None
        while time.monotonic() < deadline:
            state = on_survivor.get(f"/v1/half-messages/{half['message_id']}").json()["state"]
            txn_state = on_survivor.get(f"/v1/transactions/{txn}").json()["state"]
            if state == "COMMITTED" and txn_state == "TIMED_OUT":
                break
            time.sleep(0.1)
        assert state == "COMMITTED" and half["message_id"] in listener.checked_ids(), (state, listener.checked_ids())
        assert txn_state == "TIMED_OUT"
        print(f"lease taken over {took_over:.2f} s after the leader was killed")
    finally:
        for client in clients.values():
            client.close()
        listener.close()
