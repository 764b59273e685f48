"""Proof of the three delivery guarantees, with real processes: a broker, and three consumers of one
group, one SIGKILLed a third of the way through and another SIGSTOPped (a zombie: its session
lapses, the others take its partitions, then it wakes up) two thirds of the way through.

What each guarantee promises is checked against what was produced:

- at-most-once: no message is handed out twice; at most the killed consumer's batch in hand is lost;
- at-least-once: no message is lost; at most the killed consumer's batch in hand is repeated
  (and the zombie's, which it had processed before it stopped);
- exactly-once: the outputs (read ``read_committed``) hold every input exactly once.

On SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.broker_process import REPO_ROOT, BrokerProcess
from tests.support.databases import PostgresDatabases

pytestmark = pytest.mark.e2e

MESSAGES = 300
PARTITIONS = 4
BATCH = 5
SESSION_TIMEOUT_MS = 1000
GROUP_SETTINGS = {
    "group_min_session_timeout_ms": 500,
    "group_heartbeat_interval_ms": 250,
    "group_expiry_interval_seconds": 0.2,
    "check_interval_seconds": 0.3,  # the transaction timeout job, for the killed worker's open transaction
}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker per database for the three guarantees (each run has its own topics and group)."""
    directory = tmp_path_factory.mktemp(f"guarantees-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite:///{directory}/broker.db"
    else:
        databases: PostgresDatabases = request.getfixturevalue("postgres_databases")
        url = databases.new()
    process = BrokerProcess(url, log_path=directory / "broker.log", **GROUP_SETTINGS).start()
    yield process
    process.stop()


def wait_for(what: str, condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


class Run:
    """The broker's view of one run: topics, the group, its committed progress."""

    def __init__(self, broker: BrokerProcess, tmp_path: Path, delivery: str) -> None:
        self.http = httpx.Client(base_url=broker.url, timeout=30)
        self.url = broker.url
        self.tmp_path = tmp_path
        self.delivery = delivery
        self.group = f"g-{uuid.uuid4().hex[:8]}"
        self.source, self.sink = f"in-{self.group}", f"out-{self.group}"
        for name, partitions in ((self.source, PARTITIONS), (self.sink, 2)):
            assert self.http.post("/v1/topics", json={"name": name, "partitions": partitions}).status_code == 201
        self.workers: list[subprocess.Popen[bytes]] = []

    def start_worker(self, index: int) -> None:
        command = [
            sys.executable, "-m", "tests.e2e.group_worker", "--url", self.url, "--group", self.group,
            "--topic", self.source, "--delivery", self.delivery, "--record", str(self.record(index)),
            "--output-topic", self.sink, "--session-timeout-ms", str(SESSION_TIMEOUT_MS), "--max-messages", str(BATCH),
        ]
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        with open(self.tmp_path / f"worker-{index}.log", "wb") as log:  # the child keeps its own copy
            self.workers.append(subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))

    def record(self, index: int) -> Path:
        return self.tmp_path / f"worker-{index}.ids"

    def members(self) -> int:
        response = self.http.get(f"/v1/groups/{self.group}")
        return len(response.json()["members"]) if response.status_code == 200 else 0

    def stable_with(self, members: int) -> bool:
        response = self.http.get(f"/v1/groups/{self.group}")
        return response.status_code == 200 and response.json()["state"] == "STABLE" and self.members() == members

    def committed(self) -> int:
        return sum(o["offset"] for o in self.http.get(f"/v1/groups/{self.group}/offsets").json()["offsets"])

    def produce(self) -> None:
        messages = [{"value": {"id": i}} for i in range(MESSAGES)]
        assert self.http.post(f"/v1/topics/{self.source}/messages", json={"messages": messages}).status_code == 200

    def settled_output(self) -> bool:
        partitions = self.http.get(f"/v1/topics/{self.sink}").json()["partitions"]
        return all(p["last_stable_offset"] == p["high_watermark"] for p in partitions)

    def outputs(self) -> list[int]:
        ids = []
        for p in range(2):
            offset = 0
            while True:
                path = f"/v1/topics/{self.sink}/partitions/{p}/messages"
                page = self.http.get(path, params={"offset": offset}).json()
                ids += [m["value"]["id"] for m in page["messages"]]
                if page["next_offset"] == offset:
                    break
                offset = page["next_offset"]
        return ids

    def recorded(self) -> list[int]:
        ids = []
        for index in range(len(self.workers)):
            if self.record(index).exists():
                # A killed worker may leave half a line: only whole lines were done.
                ids += [int(line) for line in self.record(index).read_text().split("\n")[:-1]]
        return ids

    def stop_all(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGCONT)
                worker.terminate()
        for worker in self.workers:
            worker.wait(30)


@pytest.mark.parametrize("delivery", ["at_most_once", "at_least_once", "exactly_once"])
def test_a_guarantee_holds_through_a_killed_consumer_and_a_zombie(
    broker: BrokerProcess, tmp_path: Path, delivery: str
) -> None:
    run = Run(broker, tmp_path, delivery)
    try:
        for index in range(3):
            run.start_worker(index)
        wait_for("three members share the partitions", lambda: run.stable_with(3))
        run.produce()

        wait_for("a third is committed", lambda: run.committed() >= MESSAGES // 3)
        run.workers[0].kill()  # SIGKILL mid-run: its partitions move once its session lapses
        wait_for("two thirds are committed", lambda: run.committed() >= 2 * MESSAGES // 3)
        run.workers[1].send_signal(signal.SIGSTOP)  # a zombie: alive, silent, holding partitions
        wait_for("the zombie's session lapsed", lambda: run.members() == 1)
        run.workers[1].send_signal(signal.SIGCONT)  # it wakes up believing it still owns them

        wait_for("everything is committed", lambda: run.committed() == MESSAGES)
        if delivery == "exactly_once":
            wait_for("the killed worker's open transaction is aborted", run.settled_output)
        run.stop_all()
        counts = Counter(run.outputs() if delivery == "exactly_once" else run.recorded())
    finally:
        run.stop_all()
        run.http.close()

    if delivery == "exactly_once":
        assert set(counts) == set(range(MESSAGES)), f"lost: {sorted(set(range(MESSAGES)) - set(counts))}"
        assert [i for i, n in counts.items() if n > 1] == []
        return
    repeated = sum(n - 1 for n in counts.values())
    lost = set(range(MESSAGES)) - set(counts)
    if delivery == "at_most_once":
        assert repeated == 0, f"repeated: {[i for i, n in counts.items() if n > 1]}"
        assert len(lost) <= BATCH  # what the killed consumer had been handed when it died
    else:
        assert lost == set(), f"lost: {sorted(lost)}"
        assert repeated <= 2 * BATCH  # the killed consumer's batch in hand, and the zombie's
