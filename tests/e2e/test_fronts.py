"""End to end: several HTTP fronts (HALFMQ_WORKERS=2) share one core process and its state."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.fronts import STEADY_SECONDS
from tests.support.broker_process import BrokerProcess
from tests.support.databases import SqliteDatabases

pytestmark = pytest.mark.e2e


def _fronts(broker: BrokerProcess) -> list[int]:
    """The supervisor's front processes (its other children: the core, multiprocessing's tracker)."""
    return [pid for pid in broker.children() if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text()]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _produced_by_front(url: str) -> dict[str, float]:
    """Single-message produce requests each front answered, from any front's /metrics."""
    counted: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics").text):
        for sample in family.samples:
            if sample.name == "halfmq_http_requests_total" and sample.labels["route"] == "/v1/topics/{topic}/messages":
                counted[sample.labels["front"]] = counted.get(sample.labels["front"], 0) + sample.value
    return counted


def test_two_fronts_share_one_core_a_killed_one_is_replaced_and_the_broker_stops_cleanly(
    sqlite_databases: SqliteDatabases,
) -> None:
    broker = BrokerProcess(sqlite_databases.new(), workers=2).start()
    try:
        first, _ = _fronts(broker)
        assert httpx.post(f"{broker.url}/v1/topics", json={"name": "t"}).status_code == 201
        woken: list[httpx.Response] = []
        poll = threading.Thread(
            target=lambda: woken.append(
                httpx.get(f"{broker.url}/v1/topics/t/partitions/0/messages", params={"max_wait_ms": 20_000}, timeout=30)
            )
        )
        poll.start()
        # A new connection each: the kernel hands them to both fronts; each writes through the one core.
        for number in range(40):
            answer = httpx.post(f"{broker.url}/v1/topics/t/messages", json={"messages": [{"value": number}]})
            assert answer.json()["offsets"] == [{"partition": 0, "offset": number}]
        poll.join(30)
        assert woken and woken[0].json()["messages"][0]["value"] == 0  # the waiter, on whichever front, was woken
        read = httpx.get(f"{broker.url}/v1/topics/t/partitions/0/messages", params={"max_messages": 100}).json()
        assert [m["value"] for m in read["messages"]] == list(range(40))
        time.sleep(1.5)  # each front reports its metrics to the core every second
        counted = _produced_by_front(broker.url)
        assert sum(counted.values()) == 40 and set(counted) == {"0", "1"}

        time.sleep(STEADY_SECONDS)  # a front that dies at once is not replaced (it would die again)
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while len([pid for pid in _fronts(broker) if _alive(pid)]) < 2 or first in _fronts(broker):
            assert time.monotonic() < deadline, broker.log_tail()
            time.sleep(0.1)
        for number in range(40, 50):  # answered by both fronts, the new one included
            assert httpx.post(f"{broker.url}/v1/topics/t/messages", json={"messages": [{"value": number}]}).status_code == 200
        everything = broker.children()
    finally:
        broker.stop()
    assert broker.returncode == 0, broker.log_tail()
    deadline = time.monotonic() + 10  # multiprocessing's tracker leaves once it sees its parent gone
    while [pid for pid in everything if _alive(pid)]:  # the fronts and the core stopped with it
        assert time.monotonic() < deadline, [Path(f"/proc/{pid}/cmdline").read_text() for pid in everything if _alive(pid)]
        time.sleep(0.1)
