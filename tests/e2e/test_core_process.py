"""End to end: the broker's HTTP front and its core process live and die together."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.broker_process import BrokerProcess
from tests.support.databases import SqliteDatabases

pytestmark = pytest.mark.e2e


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_until(condition: object, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_killing_the_broker_kills_its_core_and_a_restart_serves_what_was_acknowledged(sqlite_databases: SqliteDatabases) -> None:
    broker = BrokerProcess(sqlite_databases.new()).start()
    try:
        [core] = broker.children()
        httpx.post(f"{broker.url}/v1/topics", json={"name": "t"})
        assert httpx.post(f"{broker.url}/v1/topics/t/messages", json={"messages": [{"value": "kept"}]}).status_code == 200
        broker.kill()
        _wait_until(lambda: not _alive(core), timeout=5)
        broker.start()
        fetched = httpx.get(f"{broker.url}/v1/topics/t/partitions/0/messages").json()
        assert [m["value"] for m in fetched["messages"]] == ["kept"]
    finally:
        broker.stop()


def test_a_broker_whose_core_dies_stops_instead_of_serving_errors(sqlite_databases: SqliteDatabases) -> None:
    broker = BrokerProcess(sqlite_databases.new()).start()
    try:
        [core] = broker.children()
        os.kill(core, signal.SIGKILL)
        _wait_until(lambda: broker.returncode is not None)
        assert "core process stopped" in broker.log_tail()
    finally:
        broker.stop()


def test_a_graceful_stop_stops_both_processes_cleanly(sqlite_databases: SqliteDatabases) -> None:
    broker = BrokerProcess(sqlite_databases.new()).start()
    [core] = broker.children()
    broker.stop()
    assert broker.returncode in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has shut down
    assert "Traceback" not in broker.log_tail()
    assert not _alive(core)


def test_the_broker_can_run_in_one_process(sqlite_databases: SqliteDatabases) -> None:
    with BrokerProcess(sqlite_databases.new(), core_process="false") as broker:
        assert broker.children() == []
        assert httpx.post(f"{broker.url}/v1/topics", json={"name": "t"}).status_code == 201
        assert httpx.post(f"{broker.url}/v1/topics/t/messages", json={"messages": [{"value": 1}]}).status_code == 200


def _released(metrics: str) -> dict[str, float]:
    families = {f.name: f for f in text_string_to_metric_families(metrics)}  # also: no family named twice
    return {
        name: families[name].samples[0].value
        for name in ("halfmq_http_memory_released_bytes", "halfmq_memory_released_bytes")
        if name in families
    }


def test_both_processes_hand_freed_memory_back_after_large_requests(sqlite_databases: SqliteDatabases) -> None:
    with BrokerProcess(sqlite_databases.new(), memory_trim_seconds="0.2") as broker:
        assert httpx.post(f"{broker.url}/v1/topics", json={"name": "big"}).status_code == 201
        batch = {"messages": [{"value": "x" * 2000, "key": str(i)} for i in range(1000)]}
        for _ in range(5):
            assert httpx.post(f"{broker.url}/v1/topics/big/messages", json=batch, timeout=30).status_code == 200
        _wait_until(lambda: all(v > 0 for v in _released(httpx.get(f"{broker.url}/metrics").text).values()))
        assert set(_released(httpx.get(f"{broker.url}/metrics").text)) == {
            "halfmq_http_memory_released_bytes",
            "halfmq_memory_released_bytes",
        }


def test_both_processes_keep_the_objects_of_their_start_up_out_of_garbage_collection(
    sqlite_databases: SqliteDatabases,
) -> None:
    with BrokerProcess(sqlite_databases.new()) as broker:
        families = {f.name: f for f in text_string_to_metric_families(httpx.get(f"{broker.url}/metrics").text)}
    frozen = {name: families[name].samples[0].value for name in ("halfmq_http_gc_frozen_objects", "halfmq_gc_frozen_objects")}
    # Tens of thousands each: the modules, the app's routes and validators, the tables.
    assert all(count > 10_000 for count in frozen.values()), frozen
