"""A broker with its RocketMQ listener on, and the official RocketMQ Python client in a process of its own."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.broker_process import REPO_ROOT, BrokerProcess, free_port

# The topics the module's producer publishes from its start (back-checks go to the producers of a topic).
TX_TOPIC = "rmq-tx"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class RocketMQClient:
    """The official client, run by tests/support/rocketmq_worker.py; each call is one command."""

    def __init__(self, endpoint: str, topics: list[str], home: Path, credentials: tuple[str, str] | None = None) -> None:
        home.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, HOME=str(home), PYTHONPATH=str(REPO_ROOT))  # the client logs under ~/logs
        argv = [sys.executable, "-m", "tests.support.rocketmq_worker", endpoint, ",".join(topics)]
        # What the client prints about connections it lost (a killed broker) goes to a file, not the test's output.
        self.stderr_path = home / "client.stderr"
        with open(self.stderr_path, "ab") as stderr:
            self._process = subprocess.Popen(
                argv + list(credentials or ()), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
                env=env, cwd=REPO_ROOT,
            )
        ready = self._read()
        assert ready.get("ready"), ready

    def _read(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the RocketMQ client process exited ({self._process.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def call(self, op: str, **command: Any) -> dict[str, Any]:
        """The answer to a command that must succeed."""
        answer = self.try_call(op, **command)
        assert "error" not in answer, answer
        return answer

    def try_call(self, op: str, **command: Any) -> dict[str, Any]:
        """The answer, or ``{"error": ...}`` with what the client raised."""
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps({"op": op, **command}) + "\n")
        self._process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self._process.poll() is None:
            with contextlib.suppress(BrokenPipeError, RuntimeError):
                self.try_call("close")
            try:
                self._process.wait(15)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(5)
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()


def create_topic(broker: BrokerProcess, name: str, partitions: int = 1, token: str | None = None) -> str:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    response = httpx.post(f"{broker.url}/v1/topics", json={"name": name, "partitions": partitions}, headers=headers)
    assert response.status_code == 201, response.text
    return name


def rest_messages(broker: BrokerProcess, topic: str, partitions: int = 1) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for partition in range(partitions):
        response = httpx.get(f"{broker.url}/v1/topics/{topic}/partitions/{partition}/messages", params={"offset": 0})
        assert response.status_code == 200, response.text
        found += response.json()["messages"]
    return found


@pytest.fixture(scope="module")
def rocketmq_broker(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """Back-checks after 1 s, asked again 2 s after an unanswered one; dead letters after two deliveries."""
    path = tmp_path_factory.mktemp("rocketmq-broker")
    broker = BrokerProcess(
        module_database_url,
        log_path=path / "broker.log",
        grpc_port=free_port(),
        transaction_timeout_seconds=1,
        check_interval_seconds=1,
        poll_check_lease_seconds=2,
        grpc_check_poll_seconds=0.3,
        share_max_deliveries=2,
        share_min_lock_ms=100,
    )
    broker.start()
    try:
        create_topic(broker, TX_TOPIC)
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def rocketmq(rocketmq_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQClient]:
    port = rocketmq_broker.settings["grpc_port"]
    client = RocketMQClient(f"127.0.0.1:{port}", [TX_TOPIC], tmp_path_factory.mktemp("rocketmq-home"))
    try:
        yield client
    finally:
        client.close()
