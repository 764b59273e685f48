"""Share groups with real processes: consumer processes over two broker processes on one database.

While producers write plain messages, transactions (one committed late, one aborted)
and half messages (some committed late, some rolled back), four consumer processes
share one group, receiving through one broker and acknowledging through the other.
One of them is SIGKILLed while it holds locks. At the end:

- every committed message was ACCEPTed exactly once, or is in ``DLQ.{group}`` (and
  was never accepted); nothing else was ever handed out, and nothing is left over;
- a message was never held by two live locks at once: each delivery of a message
  began after the previous one's lock had ended (run out, or given back);
- the killed consumer's messages came back once their locks ran out.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from tests.support.broker_process import REPO_ROOT, BrokerProcess

pytestmark = pytest.mark.e2e

GROUP = "crew"
TOPIC = "work"
LOCK_MS = 1000
MAX_DELIVERIES = 3
SETTINGS: dict[str, object] = {
    "share_max_deliveries": MAX_DELIVERIES,
    "check_interval_seconds": 0.3,
    "transaction_timeout_seconds": 0.5,
    "lease_seconds": 2,
}


@pytest.fixture()
def two_brokers(
    rel_database_url: str, start_broker: Callable[..., BrokerProcess]
) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    with ThreadPoolExecutor(2) as pool:  # both migrate the empty database at once
        a, b = pool.map(lambda _: start_broker(rel_database_url, **SETTINGS), range(2))
    yield a, b


class Workers:
    """Consumer processes running ``tests.support.share_worker``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.outputs: list[IO[bytes]] = []

    def start(self, name: str, receive_url: str, ack_url: str, slow: float = 0.0) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        argv = [
            sys.executable, "-m", "tests.support.share_worker", "--receive-url", receive_url, "--ack-url", ack_url,
            "--group", GROUP, "--topic", TOPIC, "--lock-ms", str(LOCK_MS), "--log", str(self.log(name)),
            "--name", name, "--slow", str(slow),
        ]
        output = open(self.directory / f"{name}.out", "wb")  # noqa: SIM115 - closed by stop()
        self.outputs.append(output)
        self.processes[name] = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)

    def log(self, name: str) -> Path:
        return self.directory / f"{name}.jsonl"

    def entries(self) -> list[dict[str, Any]]:
        found = []
        for name in self.processes:
            path = self.log(name)
            if path.exists():
                for line in path.read_text().splitlines():
                    try:
                        found.append(json.loads(line))
                    except json.JSONDecodeError:  # the line a SIGKILL cut short
                        continue
        return found

    def kill(self, name: str) -> None:
        self.processes[name].send_signal(signal.SIGKILL)
        self.processes[name].wait(10)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        for output in self.outputs:
            output.close()
        for name, process in self.processes.items():
            assert process.returncode in (0, -signal.SIGKILL), (self.directory / f"{name}.out").read_text()[-3000:]


def produce(client: httpx.Client, ids: range, **fields: Any) -> None:
    body = {"messages": [{"value": {"id": i}, "key": f"k{i}"} for i in ids]}
    assert client.post(f"/v1/topics/{TOPIC}/messages", json=body).status_code == 200


def in_transaction(client: httpx.Client, ids: range) -> str:
    txn_id = client.post("/v1/transactions", json={}).json()["txn_id"]
    for i in ids:
        body = {"messages": [{"value": {"id": i}}], "txn_id": txn_id}
        assert client.post(f"/v1/topics/{TOPIC}/partitions/{i % 3}/messages", json=body).status_code == 200
    return str(txn_id)


def half_messages(client: httpx.Client, ids: range) -> dict[int, str]:
    prepared = {}
    for i in ids:
        answer = client.post("/v1/half-messages", json={"topic": TOPIC, "producer_group": "p", "value": {"id": i}})
        assert answer.status_code == 201
        prepared[i] = answer.json()["message_id"]
    return prepared


def wait_until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_consumer_processes_over_two_brokers_accept_each_committed_message_once(
    two_brokers: tuple[BrokerProcess, BrokerProcess], tmp_path: Path
) -> None:
    a, b = two_brokers
    workers = Workers(tmp_path)
    with httpx.Client(base_url=a.url, timeout=30) as ca, httpx.Client(base_url=b.url, timeout=30) as cb:
        assert ca.post("/v1/topics", json={"name": TOPIC, "partitions": 3}).status_code == 201
        produce(ca, range(0, 150))
        late_txn = in_transaction(ca, range(1000, 1020))
        aborted_txn = in_transaction(cb, range(2000, 2020))
        assert cb.post(f"/v1/transactions/{aborted_txn}/abort").status_code == 200
        halves = half_messages(cb, range(3000, 3010))

        workers.start("victim", a.url, b.url, slow=0.3)
        for index in range(3):
            broker, other = (a, b) if index % 2 else (b, a)
            workers.start(f"worker-{index}", broker.url, other.url)
        try:
            wait_until(lambda: any(e["worker"] == "victim" for e in workers.entries()), 30, "a delivery to the victim")
            workers.kill("victim")  # mid-batch: it holds locks on the rest of its batch
            for start in range(150, 300, 30):
                produce(cb if start % 60 else ca, range(start, start + 30))
            assert cb.post(f"/v1/transactions/{late_txn}/commit").status_code == 200
            for i, message_id in halves.items():
                action = "commit" if i < 3005 else "rollback"
                assert ca.post(f"/v1/half-messages/{message_id}/{action}").status_code == 200

            committed = set(range(300)) | set(range(1000, 1020)) | set(range(3000, 3005))
            dead = {i for i in committed if i % 11 == 0 or i % 13 == 0}

            def settled() -> bool:
                [summary] = ca.get(f"/v1/share-groups/{GROUP}").json()["topics"]
                return (summary["accepted"], summary["dlq"], summary["available"], summary["locked"]) == (
                    len(committed - dead), len(dead), 0, 0,
                )

            wait_until(settled, 120, "every committed message to be accepted or dead-lettered")
        finally:
            workers.stop()
        letters = read_topic(cb, f"DLQ.{GROUP}")

    entries = workers.entries()
    deliveries = [e for e in entries if e["event"] == "delivery"]
    acks = [e for e in entries if e["event"] == "ack"]
    assert {d["id"] for d in deliveries} <= committed, "an uncommitted message was handed out"
    assert any(d["worker"] == "victim" for d in deliveries)

    accepted: dict[int, int] = defaultdict(int)
    for entry in acks:
        if entry["kind"] == "ACCEPT" and entry["ok"]:
            accepted[entry["id"]] += 1
    assert all(count == 1 for count in accepted.values()), "a message was accepted twice"
    assert not set(accepted) & dead
    # An acknowledgement the kill cut off between sending it and logging its answer: its outcome is unknown.
    cut_off = {e["receipt"] for e in entries if e["event"] == "acking"} - {a["receipt"] for a in acks}
    assert {e["worker"] for e in entries if e.get("receipt") in cut_off} <= {"victim"}
    unknown = {e["id"] for e in entries if e["event"] == "acking" and e["receipt"] in cut_off}
    assert committed - dead - set(accepted) <= unknown, "a committed message was neither accepted nor dead-lettered"

    dead_ids = [letter["value"]["id"] for letter in letters]
    assert sorted(dead_ids) == sorted(dead), "every dead letter once, and nothing else"
    for letter in letters:
        headers = letter["headers"]
        assert headers["halfmq-dlq-topic"] == TOPIC
        reason = "REJECTED" if letter["value"]["id"] % 11 == 0 else "MAX_DELIVERIES"
        assert headers["halfmq-dlq-reason"] == reason
        if reason == "MAX_DELIVERIES":
            assert headers["halfmq-delivery-count"] == str(MAX_DELIVERIES)

    check_no_overlapping_locks(deliveries, acks)
    # What the killed consumer held came back to the others once its locks ran out.
    settled_by_victim = {a["receipt"] for a in acks if a["worker"] == "victim" and a["ok"]} | cut_off
    held_at_death = {(d["partition"], d["offset"]) for d in deliveries
                     if d["worker"] == "victim" and d["receipt"] not in settled_by_victim}
    came_back = {
        (d["partition"], d["offset"]) for d in deliveries if d["worker"] != "victim" and d["delivery_count"] > 1
    }
    assert held_at_death and held_at_death <= came_back, "a message the killed consumer held never came back"


def check_no_overlapping_locks(deliveries: list[dict[str, Any]], acks: list[dict[str, Any]]) -> None:
    """Each delivery of a message began after the previous one's lock ended (ran out, or was given back)."""
    given_back = {a["receipt"]: a["sent_at_ms"] for a in acks if a["ok"] and a["kind"] == "RELEASE"}
    by_message: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for delivery in deliveries:
        by_message[(delivery["partition"], delivery["offset"])].append(delivery)
    for where, found in by_message.items():
        found.sort(key=lambda d: d["delivery_count"])
        counts = [d["delivery_count"] for d in found]
        assert len(set(counts)) == len(counts), f"two deliveries of {where} with one delivery count: {counts}"
        for earlier, later in itertools.pairwise(found):
            began = later["lock_expires_ms"] - LOCK_MS
            ended = min(earlier["lock_expires_ms"], given_back.get(earlier["receipt"], float("inf")))
            assert began >= ended - 1, f"{where}: delivery {later['delivery_count']} began while {earlier} was locked"


def read_topic(client: httpx.Client, topic: str) -> list[dict[str, Any]]:
    found, offset = [], 0
    while True:
        page = client.get(f"/v1/topics/{topic}/partitions/0/messages", params={"offset": offset}).json()
        found += page["messages"]
        if page["next_offset"] == offset:
            return found
        offset = page["next_offset"]
