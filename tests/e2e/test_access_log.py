"""`halfmq serve --access-log` prints one JSON line per request on stdout (off by default: tests/integration)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.broker_process import REPO_ROOT, BrokerProcess, free_port

pytestmark = pytest.mark.e2e


def access_lines(log: str) -> list[dict[str, Any]]:
    found = []
    for line in log.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if {"method", "route", "status", "duration_ms", "client"} <= set(record):
                found.append(record)
    return found


def serve_with_flag(database_url: str, port: int, stdout: Any) -> subprocess.Popen[bytes]:
    environment = BrokerProcess(database_url, port=port).environment()  # no HALFMQ_ACCESS_LOG in it
    assert "HALFMQ_ACCESS_LOG" not in environment
    return subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--access-log", "--port", str(port)],
        cwd=REPO_ROOT, env=environment, stdout=stdout, stderr=subprocess.STDOUT,
    )


def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, "the broker exited"
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError("the broker did not become ready")


def test_the_flag_turns_the_access_log_on(tmp_path: Path) -> None:
    port, log_path = free_port(), tmp_path / "stdout.log"
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as stdout:
        process = serve_with_flag(f"sqlite:///{tmp_path}/broker.db", port, stdout)
    try:
        wait_ready(url, process)
        assert httpx.post(f"{url}/v1/topics", json={"name": "orders"}).status_code == 201
        assert httpx.get(f"{url}/v1/topics/orders").status_code == 200
    finally:
        process.terminate()
        process.wait(15)
    lines = [line for line in access_lines(log_path.read_text()) if line["route"] != "/readyz"]
    assert [(line["method"], line["path"], line["route"], line["status"]) for line in lines] == [
        ("POST", "/v1/topics", "/v1/topics", 201),
        ("GET", "/v1/topics/orders", "/v1/topics/{topic}", 200),
    ]
    assert all(line["client"].startswith("127.0.0.1:") for line in lines)

