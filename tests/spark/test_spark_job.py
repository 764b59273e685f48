"""``python -m spark_ingest`` as a subprocess: clear errors, reruns, and a SIGKILL mid-run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.spark.helpers import BrokerApi
from tests.support.broker_process import REPO_ROOT, BrokerProcess, free_port


def job(*args: str, **popen: Any) -> subprocess.Popen[str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONPATH=str(REPO_ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "spark_ingest", *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the kill takes the JVM down with it
        **popen,
    )


def run_job(*args: str, timeout: float = 180) -> tuple[int, str]:
    process = job(*args)
    output, _ = process.communicate(timeout=timeout)
    return process.returncode, output


def test_missing_topic_is_a_clear_error_before_spark_starts(broker: BrokerProcess, tmp_path: Path) -> None:
    started = time.monotonic()
    code, output = run_job("--url", broker.url, "--topic", "no-such-topic", "--output", str(tmp_path / "out"))
    assert code == 2, output
    assert "TOPIC_NOT_FOUND" in output and "no-such-topic" in output
    assert time.monotonic() - started < 15  # no JVM was started
    assert not (tmp_path / "out").exists()


def test_unreachable_broker_is_a_clear_error(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, output = run_job("--url", url, "--topic", "t", "--output", str(tmp_path / "out"))
    assert code == 2, output
    assert "cannot reach the halfmq broker" in output and url in output


def wait_for(condition: Any, process: subprocess.Popen[str], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"the job exited while waiting for {what}: {process.communicate()[0]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.spark
def test_killed_mid_run_then_restarted_continuous_writes_everything_exactly_once(
    spark: Any, broker: BrokerProcess, api: BrokerApi, tmp_path: Path
) -> None:
    topic = api.create_topic("crash", partitions=2)
    expected = api.produce_values(topic, 50, partitions=2)
    txn = api.begin()
    api.produce_in(txn, topic, 1, ["aborted-1", "aborted-2"])
    api.end(txn, commit=False)
    expected += api.produce_values(topic, 10, partitions=2, prefix="late")
    out = tmp_path / "out"
    sink_log = out / "_spark_metadata"
    args = ("--url", broker.url, "--topic", topic, "--output", str(out), "--max-records-per-trigger", "10")

    # Run 1: SIGKILL (the job and its JVM) once a couple of micro-batches are committed.
    process = job(*args)
    wait_for(lambda: (sink_log / "1").exists(), process, "two committed micro-batches")
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)  # reap it and close the pipe
    assert len(list(sink_log.iterdir())) < 7, "the job finished before it could be killed mid-run"

    def caught_up() -> bool:
        # The job reports committed progress as the group's offsets: cheap to poll, unlike Spark.
        stable = {(topic, p["partition"]): p["last_stable_offset"] for p in api.topic(topic)["partitions"]}
        return api.group_offsets("crash-ingest") == stable

    # Run 2, from the same checkpoint, continuous: finishes the backlog, then takes new data.
    process = job(*args, "--trigger", "continuous", "--interval", "1 second", "--group", "crash-ingest")
    try:
        wait_for(caught_up, process, "the backlog")
        expected += api.produce_values(topic, 3, partitions=2, prefix="new")
        wait_for(caught_up, process, "the new messages")
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 130, output
    assert "interrupted" in output

    rows = spark.read.parquet(str(out)).select("partition", "offset", "value").collect()
    assert sorted(r["value"] for r in rows) == sorted(expected)
    assert len({(r["partition"], r["offset"]) for r in rows}) == len(rows)
