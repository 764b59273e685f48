"""The ingest job through ``spark-submit`` on a standalone cluster, exactly once across a killed driver."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.spark.cluster import StandaloneCluster
from tests.spark.helpers import BrokerApi
from tests.support.broker_process import BrokerProcess


def committed_rows(output: Path) -> list[dict[str, Any]]:
    """The rows of the files the sink log committed, read as Spark reads them (``_spark_metadata``)."""
    paths: set[str] = set()
    for entry in (output / "_spark_metadata").iterdir():
        if entry.name.startswith("."):  # Hadoop's .crc checksum files
            continue
        lines = entry.read_text().splitlines()
        assert lines[0] == "v1", entry
        paths.update(json.loads(line)["path"].removeprefix("file://") for line in lines[1:] if line)
    return [row for path in sorted(paths) for row in pq.read_table(path).to_pylist()]


def wait_for(condition: Callable[[], bool], process: subprocess.Popen[str], what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"the job exited while waiting for {what}: {process.communicate()[0]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.spark
def test_spark_submit_to_a_cluster_ingests_exactly_once_across_a_killed_driver(
    spark_cluster: StandaloneCluster, broker: BrokerProcess, api: BrokerApi, tmp_path: Path
) -> None:
    topic = api.create_topic("cluster", partitions=2)
    expected = api.produce_values(topic, 60, partitions=2)
    aborted = api.begin()
    api.produce_in(aborted, topic, 1, ["aborted-1", "aborted-2", "aborted-3"])
    api.end(aborted, commit=False)
    committed = api.begin()
    api.produce_in(committed, topic, 0, ["in-txn-1", "in-txn-2"])
    api.end(committed, commit=True)
    expected += ["in-txn-1", "in-txn-2"]
    out = tmp_path / "out"
    sink_log = out / "_spark_metadata"
    args = ("--url", broker.url, "--topic", topic, "--output", str(out), "--max-records-per-trigger", "25")

    # Run 1: SIGKILL the driver (spark-submit, its JVM and its Python) once a micro-batch is committed.
    driver = spark_cluster.submit(*args)
    wait_for(lambda: (sink_log / "0").exists(), driver, "the first committed micro-batch")
    os.killpg(driver.pid, signal.SIGKILL)
    driver.communicate(timeout=30)
    # 67 offsets at 25 per micro-batch need three batches: the kill came before the last one.
    assert len(list(sink_log.glob("[0-9]*"))) < 3, "the job finished before it could be killed mid-run"
    expected += api.produce_values(topic, 6, partitions=2, prefix="while-down")

    # Run 2, from the same checkpoint, to the end of what is committed.
    driver = spark_cluster.submit(*args)
    output, _ = driver.communicate(timeout=240)
    assert driver.returncode == 0, output

    # Both drivers ran their executors on the cluster's worker, not in local mode.
    finished = [app for app in spark_cluster.state()["completedapps"] if app["name"] == f"halfmq-ingest[{topic}]"]
    assert len(finished) == 2, spark_cluster.state()
    rows = committed_rows(out)
    assert sorted(row["value"] for row in rows) == sorted(expected)
    assert len({(row["partition"], row["offset"]) for row in rows}) == len(rows)
