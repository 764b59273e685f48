"""The official RocketMQ 5 Node.js client (npm ``rocketmq-client-nodejs``) against a real broker.

Slow: it installs the client from the npm registry into a cache directory the first time.
Skipped where ``node`` or ``npm`` is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.rocketmq_fixtures import create_topic
from tests.support.broker_process import BrokerProcess, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
CLIENT = "rocketmq-client-nodejs@1.0.8"
SCRIPT = Path(__file__).parent / "nodejs" / "roundtrip.js"


@pytest.fixture(scope="module")
def node_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for the Node.js client")
    cache = Path(os.environ.get("HALFMQ_TEST_NODE_CACHE", Path.home() / ".cache" / "halfmq-tests" / "nodejs"))
    if not (cache / "node_modules" / "rocketmq-client-nodejs").exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--prefix", str(cache), CLIENT], check=True, timeout=300)
    return cache / "node_modules"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    path = tmp_path_factory.mktemp("rocketmq-nodejs")
    process = BrokerProcess(f"sqlite:///{path}/broker.db", log_path=path / "broker.log", grpc_port=free_port())
    process.start()
    try:
        yield process
    finally:
        process.stop()


def test_the_nodejs_client_sends_every_kind_and_receives_them(
    node_modules: Path, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = create_topic(broker, "nodejs", partitions=2)
    env = dict(os.environ, NODE_PATH=str(node_modules), HOME=str(tmp_path))  # the client logs under ~/logs
    done = subprocess.run(
        ["node", str(SCRIPT), f"127.0.0.1:{broker.settings['grpc_port']}", topic, "nodejs-group"],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, (done.stdout, done.stderr[-2000:])
    sent, received = events[0], events[1]["received"]
    assert sorted(m["messageId"] for m in received) == sorted(sent["sent"]) and sent["transactionId"]
    by_body = {m["body"]: m for m in received}
    plain = by_body["plain"]
    assert (plain["tag"], plain["keys"], plain["properties"]) == ("TagA", ["k1"], {"color": "red"})
    assert (by_body["fifo"]["messageGroup"], by_body["fifo"]["keys"]) == ("g1", [])
    assert by_body["delayed"]["at"] >= sent["deliverAt"]
