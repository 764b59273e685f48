"""A real replicator process for end-to-end tests: ``python -m app replicate …``.

Tests start it against two real brokers, SIGKILL it, start it again, and read what it
reports through its own Prometheus endpoint.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from tests.support.broker_process import REPO_ROOT, free_port

METRIC_LINE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.MULTILINE)


def read_partition(url: str, topic: str, partition: int, offset: int = 0) -> list[dict[str, Any]]:
    """Every committed message of a partition from ``offset`` on, following ``next_offset`` as a consumer does.

    A topic that does not exist (yet) reads as empty.
    """
    messages: list[dict[str, Any]] = []
    with httpx.Client(base_url=url, timeout=10) as client:
        while True:
            answer = client.get(
                f"/v1/topics/{topic}/partitions/{partition}/messages", params={"offset": offset, "max_messages": 1000}
            )
            if answer.status_code == 404 and answer.json()["error"]["code"] == "TOPIC_NOT_FOUND":
                return []  # not created there yet: nothing to read
            answer.raise_for_status()
            body = answer.json()
            messages.extend(body["messages"])
            if body["next_offset"] == offset:
                return messages
            offset = body["next_offset"]


class ReplicatorProcess:
    """``halfmq replicate`` from ``source`` to ``target``; ``start()`` returns once the process runs."""

    def __init__(
        self,
        source: str,
        target: str,
        topics: Sequence[str],
        log_path: Path,
        *,
        groups: Sequence[str] = (),
        snapshot_interval_ms: int = 200,
        extra: Sequence[str] = (),
    ) -> None:
        self.metrics_port = free_port()
        self.log_path = log_path
        self.args = [
            sys.executable,
            "-m",
            "app",
            "replicate",
            "--source",
            source,
            "--target",
            target,
            "--topics",
            ",".join(topics),
            "--snapshot-interval-ms",
            str(snapshot_interval_ms),
            "--metrics-port",
            str(self.metrics_port),
            "--status-interval-s",
            "1",
            *extra,
        ]
        if groups:
            self.args += ["--groups", ",".join(groups)]
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> ReplicatorProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HALFMQ_")}
        env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(self.args, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        return self

    @property
    def process(self) -> subprocess.Popen[bytes]:
        assert self._process is not None, "replicator not started"
        return self._process

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: what a crash looks like."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> int:
        """SIGTERM and wait; the exit code."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return int(self.process.returncode)

    def wait_exit(self, timeout: float = 60.0) -> int:
        return int(self.process.wait(timeout))

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """Its ``/metrics`` as ``{(name, labels): value}``; empty while it is not serving yet."""
        try:
            text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2).text
        except httpx.TransportError:
            return {}
        found = {}
        for match in METRIC_LINE.finditer(text):
            labels = frozenset(re.findall(r'([a-z_]+)="([^"]*)"', match["labels"]))
            found[(match["name"], labels)] = float(match["value"])
        return found

    def metric(self, name: str, **labels: str) -> float | None:
        wanted = set(labels.items())
        values = [value for (found, got), value in self.metrics().items() if found == name and wanted <= got]
        return sum(values) if values else None

    def caught_up(self, source_url: str, topic: str) -> bool:
        """Every partition of ``topic`` copied up to the source's last stable offset, as the replicator reports it."""
        described = httpx.get(f"{source_url}/v1/topics/{topic}", timeout=10).json()
        return all(
            self.metric("halfmq_replication_source_position", topic=topic, partition=str(p["partition"]))
            == p["last_stable_offset"]
            for p in described["partitions"]
        )
