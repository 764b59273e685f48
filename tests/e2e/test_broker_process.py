"""End to end: real `halfmq serve` processes over HTTP, SIGKILLed and restarted."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.broker_process import BrokerProcess, free_port
from tests.support.callback_server import CallbackServer
from tests.support.databases import SqliteDatabases

pytestmark = pytest.mark.e2e


def wait_for(condition: Any, timeout: float = 60.0, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("condition not met in time")


def read_all(url: str, topic: str, partition: int = 0) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    offset = 0
    while True:
        body = httpx.get(f"{url}/v1/topics/{topic}/partitions/{partition}/messages", params={"offset": offset}).json()
        messages.extend(body["messages"])
        if body["next_offset"] == offset:
            return messages
        offset = body["next_offset"]


def test_the_console_script_migrates_and_serves_with_two_workers(tmp_path: Path) -> None:
    script = shutil.which("halfmq", path=str(Path(sys.executable).parent))
    assert script, "the halfmq console script is not installed"
    database_url = f"sqlite:///{tmp_path / 'cli.db'}"
    upgraded = subprocess.run(
        [script, "db", "upgrade", "--database-url", database_url], capture_output=True, text=True, timeout=60
    )
    assert upgraded.returncode == 0, upgraded.stderr
    port = free_port()
    process = subprocess.Popen(
        [script, "serve", "--database-url", database_url, "--port", str(port), "--log-level", "warning", "--workers", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _ready(url))
        assert httpx.post(f"{url}/v1/topics", json={"name": "t"}).status_code == 201
        assert httpx.post(f"{url}/v1/topics/t/messages", json={"messages": [{"value": "hello"}]}).status_code == 200
        assert [m["value"] for m in read_all(url, "t")] == ["hello"]
    finally:
        process.terminate()
        process.wait(15)


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def test_a_half_message_survives_sigkill_and_is_resolved_by_the_checker(
    sqlite_databases: SqliteDatabases,
) -> None:
    url = sqlite_databases.new()
    broker = BrokerProcess(url, transaction_timeout_seconds=0.5, check_interval_seconds=0.3, lease_seconds=1)
    with CallbackServer(lambda check: "COMMIT" if check["value"] == "ship it" else "ROLLBACK") as listener:
        broker.start()
        try:
            api = broker.url
            httpx.post(f"{api}/v1/topics", json={"name": "orders"})
            half = {"topic": "orders", "producer_group": "pg"}
            kept = httpx.post(f"{api}/v1/half-messages", json={**half, "value": "ship it"}).json()
            dropped = httpx.post(f"{api}/v1/half-messages", json={**half, "value": "cancel"}).json()
            broker.kill()  # the producer dies too: nobody will commit or roll back
            broker.start()
            assert read_all(broker.url, "orders") == []
            body = {"callback_url": listener.url, "ttl_seconds": 60, "secret": "k"}
            httpx.put(f"{broker.url}/v1/producer-groups/pg/listeners/p1", json=body)

            def state(message_id: str) -> str:
                return httpx.get(f"{broker.url}/v1/half-messages/{message_id}").json()["state"]  # type: ignore[no-any-return]

            wait_for(lambda: state(kept["message_id"]) == "COMMITTED" and state(dropped["message_id"]) == "ROLLED_BACK")
            assert [m["value"] for m in read_all(broker.url, "orders")] == ["ship it"]
            assert all(h["X-Halfmq-Signature"].startswith("sha256=") for _, h, _ in listener.received)
        finally:
            broker.stop()


def test_commit_after_a_crash_between_prepare_and_commit_delivers_once(sqlite_databases: SqliteDatabases) -> None:
    broker = BrokerProcess(sqlite_databases.new(), check_interval_seconds=60, lease_seconds=1).start()
    try:
        httpx.post(f"{broker.url}/v1/topics", json={"name": "orders"})
        prepared = httpx.post(
            f"{broker.url}/v1/half-messages", json={"topic": "orders", "producer_group": "pg", "value": 1, "transaction_id": "t1"}
        ).json()
        broker.kill()
        broker.start()
        again = httpx.post(
            f"{broker.url}/v1/half-messages", json={"topic": "orders", "producer_group": "pg", "value": 1, "transaction_id": "t1"}
        )
        assert again.status_code == 200 and again.json()["message_id"] == prepared["message_id"]
        first = httpx.post(f"{broker.url}/v1/half-messages/{prepared['message_id']}/commit").json()
        broker.kill()
        broker.start()
        assert httpx.post(f"{broker.url}/v1/half-messages/{prepared['message_id']}/commit").json() == first
        assert [m["value"] for m in read_all(broker.url, "orders")] == [1]
    finally:
        broker.stop()


def test_kafka_mode_transactions_across_a_sigkill(sqlite_databases: SqliteDatabases) -> None:
    broker = BrokerProcess(sqlite_databases.new(), check_interval_seconds=0.3, lease_seconds=1).start()
    try:
        api = broker.url
        httpx.post(f"{api}/v1/topics", json={"name": "t", "partitions": 2})
        producer = httpx.post(f"{api}/v1/producers", json={"transactional_id": "etl"}).json()
        # Long enough to outlast the kill and the restart on a loaded machine (8 s did not once).
        open_txn = httpx.post(f"{api}/v1/transactions", json={**producer, "timeout_ms": 20_000}).json()["txn_id"]
        httpx.post(f"{api}/v1/topics/t/partitions/0/messages", json={"messages": [{"value": "orphan"}], "txn_id": open_txn})
        committed = httpx.post(f"{api}/v1/transactions", json={}).json()["txn_id"]
        httpx.post(f"{api}/v1/topics/t/partitions/1/messages", json={"messages": [{"value": "kept"}], "txn_id": committed})
        assert httpx.post(f"{api}/v1/transactions/{committed}/commit").json()["state"] == "COMMITTED"
        broker.kill()  # mid-transaction for `open_txn`
        broker.start()
        api = broker.url
        assert httpx.get(f"{api}/v1/topics/t").json()["partitions"][0]["last_stable_offset"] == 0
        wait_for(lambda: httpx.get(f"{api}/v1/transactions/{open_txn}").json()["state"] == "TIMED_OUT", timeout=45)
        assert read_all(api, "t", 0) == [] and [m["value"] for m in read_all(api, "t", 1)] == ["kept"]
        fenced = httpx.post(
            f"{api}/v1/topics/t/partitions/0/messages", json={"messages": [{"value": 1}], "base_sequence": 0, **producer}
        )
        assert fenced.json()["error"]["code"] == "PRODUCER_FENCED"
    finally:
        broker.stop()


def test_two_brokers_on_one_postgres_never_share_or_skip_an_offset(postgres_url: str) -> None:
    url = postgres_url
    brokers = [BrokerProcess(url).start(), BrokerProcess(url).start()]
    try:
        httpx.post(f"{brokers[0].url}/v1/topics", json={"name": "t", "partitions": 2})

        def produce(worker: int) -> list[tuple[int, int]]:
            got: list[tuple[int, int]] = []
            with httpx.Client(base_url=brokers[worker % 2].url) as http:
                for i in range(40):
                    batch = [{"value": f"{worker}-{i}-{j}", "partition": (worker + i) % 2} for j in range(3)]
                    response = http.post("/v1/topics/t/messages", json={"messages": batch})
                    got += [(o["partition"], o["offset"]) for o in response.json()["offsets"]]
            return got

        with ThreadPoolExecutor(8) as pool:
            assigned = [pair for result in pool.map(produce, range(8)) for pair in result]
        assert len(assigned) == len(set(assigned)) == 8 * 40 * 3
        for partition in (0, 1):
            offsets = sorted(o for p, o in assigned if p == partition)
            assert offsets == list(range(len(offsets)))  # dense: nothing skipped
            stored = read_all(brokers[1].url, "t", partition)
            assert [m["offset"] for m in stored] == offsets
        assert len(Counter(m["value"] for p in (0, 1) for m in read_all(brokers[0].url, "t", p))) == 8 * 40 * 3
    finally:
        for broker in brokers:
            broker.stop()


def test_a_killed_checkers_lease_is_taken_over(postgres_url: str) -> None:
    brokers = [BrokerProcess(postgres_url, lease_seconds=1.5).start(), BrokerProcess(postgres_url, lease_seconds=1.5).start()]

    def leaders() -> list[int]:
        found = []
        for index, broker in enumerate(brokers):
            try:
                if "halfmq_checker_leader 1.0" in httpx.get(f"{broker.url}/metrics", timeout=2).text:
                    found.append(index)
            except httpx.TransportError:
                pass
        return found

    try:
        first = wait_for(lambda: leaders() if len(leaders()) == 1 else None)[0]
        brokers[first].kill()
        survivor = 1 - first
        wait_for(lambda: leaders() == [survivor], timeout=45)
    finally:
        for broker in brokers:
            broker.stop()


def test_a_long_poll_ends_when_its_client_goes_away(sqlite_databases: SqliteDatabases) -> None:
    with BrokerProcess(sqlite_databases.new()) as broker:
        httpx.post(f"{broker.url}/v1/topics", json={"name": "t"})
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(f"{broker.url}/v1/topics/t/partitions/0/messages", params={"max_wait_ms": 30_000}, timeout=0.3)

        def waiting() -> bool:
            metrics = httpx.get(f"{broker.url}/metrics").text
            return "halfmq_long_poll_waiters 0.0" in metrics

        wait_for(waiting, timeout=15)
