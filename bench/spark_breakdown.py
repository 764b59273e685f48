"""Where a Spark ingest's CPU goes: the broker, Spark's Python workers, the JVM.

One local Spark session and one broker (SQLite); N committed 1 KiB messages. Each case
runs twice (the first round warms up the JVM) and prints its wall time and the CPU
seconds of the broker (front + core), of Spark's Python worker processes, and of the
rest of this process tree (the JVM and the driver):

* halfmq batch read -> ``noop`` and JSON lines -> ``noop``: reading alone;
* the same into Parquet;
* the ingest job's streaming query (availableNow, file sink, checkpoint) into Parquet.

``python -m bench.spark_breakdown [--messages 100000]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.spark_ingest import TOPIC, ingest_halfmq, produce, spark_session, tree_cpu_seconds
from tests.support.broker_process import BrokerProcess


def python_workers_cpu() -> float:
    """CPU seconds of the live Spark Python worker processes (``pyspark.daemon`` and its forks)."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline") as cmdline:
                if "pyspark.daemon" not in cmdline.read():
                    continue
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        total += sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def cases(spark: Any, url: str, work: Path) -> list[tuple[str, Callable[[], object]]]:
    from spark_ingest.rows import SCHEMA

    def halfmq() -> Any:
        return spark.read.format("halfmq").option("url", url).option("topic", TOPIC).load()

    halfmq().write.mode("overwrite").json(str(work / "rows.jsonl"))

    def json_lines() -> Any:
        return spark.read.schema(SCHEMA).json(str(work / "rows.jsonl"))

    def stream() -> object:
        shutil.rmtree(work / "stream", ignore_errors=True)
        return ingest_halfmq(spark, url, work / "stream", 5000)

    return [
        ("halfmq batch -> noop", lambda: halfmq().write.format("noop").mode("overwrite").save()),
        ("JSON lines -> noop", lambda: json_lines().write.format("noop").mode("overwrite").save()),
        ("halfmq batch -> Parquet", lambda: halfmq().write.mode("overwrite").parquet(str(work / "p1"))),
        ("JSON lines -> Parquet", lambda: json_lines().write.mode("overwrite").parquet(str(work / "p2"))),
        ("halfmq stream -> Parquet", stream),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spark_breakdown", description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="halfmq-spark-breakdown-"))
    try:
        with BrokerProcess(f"sqlite:///{work}/broker.db", log_path=work / "broker.log") as broker:
            produce(broker.url, args.messages, 2)
            spark = spark_session(args.master)
            for round_number in (1, 2):
                for name, run in cases(spark, broker.url, work):
                    # The broker and Spark (JVM, Python workers) are all children of this process.
                    own, served = tree_cpu_seconds(os.getpid()), tree_cpu_seconds(broker.pid)
                    workers = python_workers_cpu()
                    started = time.perf_counter()
                    run()
                    wall = time.perf_counter() - started
                    own = tree_cpu_seconds(os.getpid()) - own
                    served = tree_cpu_seconds(broker.pid) - served
                    workers = python_workers_cpu() - workers
                    print(
                        f"round {round_number} {name:26s} wall {wall:6.1f} s; CPU s: broker {served:4.1f}, "
                        f"Python workers {workers:4.1f}, JVM + driver {own - served - workers:4.1f}, all {own:5.1f}",
                        flush=True,
                    )
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
