"""Spark ingest benchmark: halfmq -> Parquet against Spark's JSON-lines -> Parquet ceiling.

1. Starts its own broker (``python -m app``) on a temporary SQLite database and
   produces N committed messages with 1 KiB values (round-robin over P partitions).
2. halfmq -> Parquet: the ingest job's own query (``readStream.format("halfmq")``,
   availableNow, Parquet file sink with a checkpoint), timed from start to finish.
3. The ceiling, in the same run and Spark session: the same rows written once as a
   local JSON-lines file, then ``spark.read.json`` (explicit schema) -> Parquet.

The two alternate ``--repeats`` times (default 2) after a warm-up; the best of each
counts, and each line shows the CPU seconds our processes (broker, Spark JVM,
Python workers) and the whole machine used, since other work on a shared machine
skews every figure. Prints rows/s for both and halfmq's share of the ceiling. Spark
start-up and data production are not timed. Not part of the test suite.

``python -m bench.spark_ingest [--messages N] [--partitions P] [--repeats R] [--master local[2]]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.support.broker_process import BrokerProcess  # noqa: E402

TOPIC = "spark-bench"
# A JSON string value whose JSON text is exactly 1 KiB: 1022 characters plus the quotes.
VALUE = "v" * 1022
PRODUCE_BATCH = 2000
PRODUCERS = 2


def produce(url: str, messages: int, partitions: int) -> float:
    """Produce ``messages`` committed 1 KiB messages; returns the seconds it took."""
    httpx.post(f"{url}/v1/topics", json={"name": TOPIC, "partitions": partitions}, timeout=30).raise_for_status()
    chunks = [(start, min(PRODUCE_BATCH, messages - start)) for start in range(0, messages, PRODUCE_BATCH)]
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker() -> None:
        with httpx.Client(base_url=url, timeout=120) as client:
            while True:
                with lock:
                    if not chunks or errors:
                        return
                    start, count = chunks.pop()
                body = orjson.dumps(
                    {"messages": [{"value": VALUE, "partition": (start + i) % partitions} for i in range(count)]}
                )
                try:
                    client.post(
                        f"/v1/topics/{TOPIC}/messages", content=body, headers={"content-type": "application/json"}
                    ).raise_for_status()
                except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                    errors.append(exc)
                    return

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(PRODUCERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started


def _proc_stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()  # fields from 3 (state) on


def machine_cpu_seconds() -> float:
    """Busy CPU seconds of the whole machine so far (all cores, every process)."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in stat.readline().split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds of ``root`` and its live descendants (reaped children included via cutime)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parents[int(entry)] = int(_proc_stat(int(entry))[1])
            except (OSError, IndexError):
                continue  # exited meanwhile
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    total = 0
    for pid in tree:
        try:
            fields = _proc_stat(pid)
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return total / os.sysconf("SC_CLK_TCK")


@dataclass
class Measurement:
    """One timed run: rows/s, and who used the CPU meanwhile."""

    name: str
    rows: int
    seconds: float
    cpu_window: float  # wall seconds over which the CPU figures were taken (a bit more than ``seconds``)
    own_cpu: float  # this benchmark's processes: broker, Spark JVM, Python workers
    broker_cpu: float  # the broker process alone
    machine_cpu: float  # everything on the machine, other people's work included

    @property
    def rate(self) -> float:
        """Rows per second."""
        return self.rows / self.seconds

    def line(self) -> str:
        """One printable line."""
        cores = os.cpu_count() or 1
        return (
            f"{self.name:<22} {self.rows:,} rows in {self.seconds:6.1f} s = {self.rate:10,.0f} rows/s "
            f"(CPU: ours {self.own_cpu:5.1f} s of which broker {self.broker_cpu:4.1f} s, "
            f"machine {self.machine_cpu:5.1f} s of {self.cpu_window * cores:5.1f} s)"
        )


def measure(name: str, broker_pid: int, run: Callable[[], float], count: Callable[[], int]) -> Measurement:
    """Time ``run`` (which returns the seconds it timed itself) with CPU accounting; ``count`` the rows."""
    own, broker, machine = tree_cpu_seconds(os.getpid()), tree_cpu_seconds(broker_pid), machine_cpu_seconds()
    started = time.perf_counter()
    seconds = run()
    window = time.perf_counter() - started
    own, broker = tree_cpu_seconds(os.getpid()) - own, tree_cpu_seconds(broker_pid) - broker
    return Measurement(name, count(), seconds, window, own, broker, machine_cpu_seconds() - machine)


def spark_session(master: str) -> Any:
    """A local Spark session with the halfmq format registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_ingest

    spark = (
        SparkSession.builder.master(master)
        .appName("halfmq-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark_ingest.register(spark)
    return spark


def ingest_halfmq(spark: Any, url: str, out: Path, fetch_max_messages: int) -> float:
    """The ingest job's query (halfmq, availableNow, Parquet sink) into ``out/data``; returns its seconds."""
    from spark_ingest.job import JobConfig

    config = JobConfig(url=url, topics=(TOPIC,), output=str(out / "data"), checkpoint=str(out / "checkpoint"))
    reader = spark.readStream.format("halfmq")
    for key, value in {**config.source_options(), "fetchMaxMessages": str(fetch_max_messages)}.items():
        reader = reader.option(key, value)
    started = time.perf_counter()
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", config.output)
        .option("checkpointLocation", config.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds = time.perf_counter() - started
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return seconds


def warm_up(spark: Any, url: str, work: Path, partitions: int) -> None:
    """Start Spark's Python workers and JIT-compile the hot paths before anything is timed."""
    warm = spark.read.format("halfmq").option("url", url).option("topic", TOPIC)
    ending = {TOPIC: {str(p): 1000 for p in range(partitions)}}
    rows = warm.option("endingOffsets", orjson.dumps(ending).decode()).load()
    rows.write.parquet(str(work / "warm-up.parquet"))
    rows.write.json(str(work / "warm-up.jsonl"))
    from spark_ingest.rows import SCHEMA

    spark.read.schema(SCHEMA).json(str(work / "warm-up.jsonl")).write.parquet(str(work / "warm-up-2.parquet"))


def ingest_jsonl(spark: Any, source: Path, out: Path) -> float:
    """The ceiling: Spark reads the same rows from JSON lines and writes Parquet."""
    from spark_ingest.rows import SCHEMA

    started = time.perf_counter()
    spark.read.schema(SCHEMA).json(str(source)).write.mode("overwrite").parquet(str(out))
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(prog="python -m bench.spark_ingest", description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2, help="topic partitions (= Spark tasks)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--fetch-max-messages", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=2, help="alternating runs of each; the best counts")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)

    load_before = os.getloadavg()[0]  # other work on the machine skews every figure
    work = Path(tempfile.mkdtemp(prefix="halfmq-spark-bench-"))
    runs: list[Measurement] = []
    try:
        with BrokerProcess(f"sqlite:///{work}/broker.db", log_path=work / "broker.log") as broker:
            produce_seconds = produce(broker.url, args.messages, args.partitions)
            print(
                f"produced {args.messages:,} x 1 KiB in {produce_seconds:.1f} s "
                f"({args.messages / produce_seconds:,.0f} msg/s), {args.partitions} partitions",
                flush=True,
            )
            spark = spark_session(args.master)
            warm_up(spark, broker.url, work, args.partitions)
            jsonl = work / "rows.jsonl"
            for repeat in range(args.repeats):
                out = work / f"halfmq-{repeat}"
                runs.append(
                    measure(
                        "halfmq -> Parquet",
                        broker.pid,
                        # measure() calls both before the loop moves on to the next ``out``.
                        lambda: ingest_halfmq(spark, broker.url, out, args.fetch_max_messages),  # noqa: B023
                        lambda: int(spark.read.parquet(str(out / "data")).count()),  # noqa: B023
                    )
                )
                print(runs[-1].line(), flush=True)
                if runs[-1].rows != args.messages:
                    raise SystemExit(f"halfmq ingest wrote {runs[-1].rows} rows, expected {args.messages}")
                if repeat == 0:
                    # The ceiling's input: exactly the rows halfmq wrote, as JSON lines (not timed).
                    spark.read.parquet(str(out / "data")).coalesce(args.partitions).write.json(str(jsonl))
                runs.append(
                    measure(
                        "JSON lines -> Parquet",
                        broker.pid,
                        lambda: ingest_jsonl(spark, jsonl, work / "jsonl-out"),
                        lambda: int(spark.read.parquet(str(work / "jsonl-out")).count()),
                    )
                )
                print(runs[-1].line(), flush=True)
            spark.stop()
        best_halfmq = max((r for r in runs if r.name.startswith("halfmq")), key=lambda r: r.rate)
        best_json = max((r for r in runs if r.name.startswith("JSON")), key=lambda r: r.rate)
        print(
            f"best: halfmq {best_halfmq.rate:,.0f} rows/s, JSON lines (ceiling) {best_json.rate:,.0f} rows/s: "
            f"ratio {best_halfmq.rate / best_json.rate:.0%} ({args.master}, {os.cpu_count()} CPUs, "
            f"load average before the run {load_before:.1f})"
        )
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
