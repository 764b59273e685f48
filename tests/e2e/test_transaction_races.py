"""Kafka-mode transactions under races and crashes, with real broker processes."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.databases import SqliteDatabases

pytestmark = pytest.mark.e2e


def values_by_txn(url: str, topic: str, partitions: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    for partition in range(partitions):
        offset = 0
        while True:
            body = httpx.get(f"{url}/v1/topics/{topic}/partitions/{partition}/messages", params={"offset": offset}).json()
            for message in body["messages"]:
                counts[message["value"]["txn"]] = counts.get(message["value"]["txn"], 0) + 1
            if body["next_offset"] == offset:
                break
            offset = body["next_offset"]
    return counts


def open_transaction(url: str, http: httpx.Client, index: int, timeout_ms: int, per_txn: int) -> str:
    txn = http.post(f"{url}/v1/transactions", json={"timeout_ms": timeout_ms}).json()["txn_id"]
    for j in range(per_txn):
        http.post(
            f"{url}/v1/topics/t/partitions/{j % 2}/messages",
            json={"messages": [{"value": {"txn": txn, "i": index, "j": j}}], "txn_id": txn},
        )
    return txn


def holds_the_checker_lease(broker: BrokerProcess) -> bool:
    return "halfmq_checker_leader 1.0" in httpx.get(f"{broker.url}/metrics", timeout=5).text


def test_commits_racing_the_timeout_across_two_processes_end_one_way(postgres_url: str) -> None:
    """One broker commits while the other's timeout job aborts: each transaction ends once, wholly."""
    brokers = [BrokerProcess(postgres_url, lease_seconds=1), BrokerProcess(postgres_url, lease_seconds=1)]
    try:
        with ThreadPoolExecutor(2) as starting:
            list(starting.map(BrokerProcess.start, brokers))
        httpx.post(f"{brokers[0].url}/v1/topics", json={"name": "t", "partitions": 2})
        deadline = time.monotonic() + 20
        while not any(holds_the_checker_lease(b) for b in brokers):  # the timeout job runs where the lease is
            assert time.monotonic() < deadline, "neither process took the checker lease"
            time.sleep(0.05)
        with httpx.Client() as http:
            txns = [open_transaction(brokers[i % 2].url, http, i, timeout_ms=900, per_txn=3) for i in range(20)]
            time.sleep(0.6)

            def commit(index_txn: tuple[int, str]) -> int:
                index, txn = index_txn
                time.sleep((index % 5) * 0.1)  # spread the commits around the moment of expiry
                return http.post(f"{brokers[index % 2].url}/v1/transactions/{txn}/commit").status_code

            with ThreadPoolExecutor(8) as pool:
                statuses = list(pool.map(commit, enumerate(txns)))
            deadline = time.monotonic() + 20
            states: dict[str, str] = {}
            while time.monotonic() < deadline:
                states = {t: http.get(f"{brokers[0].url}/v1/transactions/{t}").json()["state"] for t in txns}
                if all(s in ("COMMITTED", "TIMED_OUT") for s in states.values()):
                    break
                time.sleep(0.2)
        assert set(statuses) <= {200, 409}
        visible = values_by_txn(brokers[1].url, "t", 2)
        for txn, state in states.items():
            assert state in ("COMMITTED", "TIMED_OUT")
            assert visible.get(txn, 0) == (3 if state == "COMMITTED" else 0), (txn, state)
        committed_by_request = {t for t, s in zip(txns, statuses, strict=True) if s == 200}
        assert committed_by_request == {t for t, s in states.items() if s == "COMMITTED"}
    finally:
        for broker in brokers:
            broker.stop()


def test_sigkill_while_commits_are_in_flight_leaves_every_transaction_whole(sqlite_databases: SqliteDatabases) -> None:
    broker = BrokerProcess(sqlite_databases.new(), lease_seconds=1, check_interval_seconds=0.3).start()
    try:
        httpx.post(f"{broker.url}/v1/topics", json={"name": "t", "partitions": 2})
        with httpx.Client(timeout=10) as http:
            txns = [open_transaction(broker.url, http, i, timeout_ms=4000, per_txn=4) for i in range(30)]
            answered: dict[str, Any] = {}

            def commit(txn: str) -> None:
                try:
                    answered[txn] = http.post(f"{broker.url}/v1/transactions/{txn}/commit").json()["state"]
                except httpx.HTTPError:
                    answered[txn] = None  # the broker died under us

            threads = [threading.Thread(target=commit, args=(t,)) for t in txns]
            for thread in threads:
                thread.start()
            time.sleep(0.05)
            broker.kill()
            for thread in threads:
                thread.join()
            broker.start()
            deadline = time.monotonic() + 25
            while time.monotonic() < deadline:
                states = {t: http.get(f"{broker.url}/v1/transactions/{t}").json()["state"] for t in txns}
                if all(s in ("COMMITTED", "TIMED_OUT") for s in states.values()):
                    break
                time.sleep(0.3)
        visible = values_by_txn(broker.url, "t", 2)
        for txn in txns:
            assert states[txn] in ("COMMITTED", "TIMED_OUT")
            assert visible.get(txn, 0) == (4 if states[txn] == "COMMITTED" else 0)
            if answered[txn] == "COMMITTED":
                assert states[txn] == "COMMITTED"  # an acknowledged commit survives the crash
    finally:
        broker.stop()
