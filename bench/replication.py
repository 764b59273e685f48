"""Replication benchmark: copy throughput against the target's own batched produce, and the fail-over re-read window.

1. Starts clusters A and B (one broker each, on their own SQLite files, or on
   PostgreSQL with ``--source-db`` / ``--target-db``).
2. Ceiling, in the same run: one client producing ``--messages`` messages with
   ``--value-bytes`` values into B, ``--batch`` messages per request (the plain batched
   produce endpoint), timed.
3. Replication: the same messages, produced into A beforehand (not timed), copied by a
   real ``python -m app replicate`` process with ``--batch-messages`` = ``--batch``; timed
   from the first copy on B to the last, so the process's start-up does not count.
   The two alternate ``--repeats`` times; the best of each counts.
4. Fail-over window, at the default snapshot interval (1000 ms): a producer writes to
   A at ``--rate`` messages/s while a consumer reads and commits there and the
   replicator syncs its group to B. At random moments the sampler notes the group's
   committed offset on A and its offset on B, what a consumer failing over at that
   instant would resume from. Afterwards, from B's log: how many messages such a
   consumer re-reads (copies at or after B's offset of source offsets it had already
   consumed), and the span of their source timestamps. It also checks no sample would
   have skipped a message.

``python -m bench.replication [--messages N] [--batch B] [--partitions P] [--failover-seconds S]``
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.spark_ingest import tree_cpu_seconds  # noqa: E402
from tests.support.broker_process import BrokerProcess, wait_for  # noqa: E402
from tests.support.replicator_process import ReplicatorProcess, read_partition  # noqa: E402

ORIGIN_OFFSET = "halfmq-origin-offset"


def new_topic(broker: BrokerProcess, partitions: int) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    httpx.post(f"{broker.url}/v1/topics", json={"name": name, "partitions": partitions}, timeout=30).raise_for_status()
    return name


def produce_batched(url: str, topic: str, messages: int, batch: int, partitions: int, value: str) -> float:
    """One client, ``batch`` messages per request, round-robin over partitions; the seconds it took."""
    started = time.perf_counter()
    with httpx.Client(base_url=url, timeout=120) as client:
        for start in range(0, messages, batch):
            count = min(batch, messages - start)
            body = orjson.dumps(
                {"messages": [{"value": value, "partition": (start + i) % partitions} for i in range(count)]}
            )
            client.post(
                f"/v1/topics/{topic}/messages", content=body, headers={"content-type": "application/json"}
            ).raise_for_status()
    return time.perf_counter() - started


@dataclass(frozen=True)
class Rate:
    """A timed run, and the CPU seconds each of our processes spent meanwhile (the machine may be shared)."""

    name: str
    messages: int
    seconds: float
    cpu: dict[str, float]

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds

    def line(self) -> str:
        per_thousand = ", ".join(f"{who} {spent / self.messages * 1000 * 1000:.0f}" for who, spent in self.cpu.items())
        return (
            f"{self.name:<30} {self.messages:>8,} msgs in {self.seconds:6.2f} s = {self.per_second:9,.0f} msg/s "
            f"(CPU ms per 1000 msgs: {per_thousand})"
        )


class CpuMeter:
    """CPU seconds of named process trees between :meth:`start` and :meth:`stop`."""

    def __init__(self, **pids: int) -> None:
        self.pids = pids
        self._before: dict[str, float] = {}

    def start(self) -> None:
        self._before = {name: tree_cpu_seconds(pid) for name, pid in self.pids.items()}

    def stop(self) -> dict[str, float]:
        return {name: tree_cpu_seconds(pid) - self._before[name] for name, pid in self.pids.items()}


def measure_ceiling(b: BrokerProcess, args: argparse.Namespace, value: str) -> Rate:
    topic = new_topic(b, args.partitions)
    meter = CpuMeter(target=b.pid)
    meter.start()
    seconds = produce_batched(b.url, topic, args.messages, args.batch, args.partitions, value)
    return Rate("target's own batched produce", args.messages, seconds, meter.stop())


def measure_replication(a: BrokerProcess, b: BrokerProcess, args: argparse.Namespace, value: str, work: Path) -> Rate:
    topic = new_topic(a, args.partitions)
    produce_batched(a.url, topic, args.messages, args.batch, args.partitions, value)
    replicator = ReplicatorProcess(
        a.url, b.url, [topic], work / f"replicator-{topic}.log", extra=["--batch-messages", str(args.batch)]
    ).start()
    try:

        def copied() -> float:
            return replicator.metric("halfmq_replication_messages_copied_total", topic=topic) or 0.0

        meter = CpuMeter(source=a.pid, target=b.pid, replicator=replicator.process.pid)
        first = wait_for(copied, "the first copies", timeout=120, every=0.01)
        meter.start()
        started = time.perf_counter()
        wait_for(lambda: copied() >= args.messages, "the last copies", timeout=600, every=0.01)
        seconds = time.perf_counter() - started
        cpu = meter.stop()
    finally:
        replicator.stop()
    return Rate("replication A -> B", args.messages - int(first), seconds, cpu)


@dataclass(frozen=True)
class FailoverSample:
    source_committed: int  # the group's offset on A: everything below was consumed
    target_offset: int  # the group's offset on B at the same moment


def failover_window(a: BrokerProcess, b: BrokerProcess, args: argparse.Namespace, work: Path) -> None:
    topic, group = new_topic(a, 1), f"bench-group-{uuid.uuid4().hex[:6]}"
    replicator = ReplicatorProcess(
        a.url, b.url, [topic], work / "replicator-failover.log", groups=[group], snapshot_interval_ms=1000
    )
    replicator.start()
    stop = threading.Event()
    samples: list[FailoverSample] = []

    def producer() -> None:
        with httpx.Client(base_url=a.url, timeout=30) as client:
            n, every = 0, 0.02
            while not stop.wait(every):
                count = max(1, int(args.rate * every))
                client.post(f"/v1/topics/{topic}/messages", json={"messages": [{"value": n + i} for i in range(count)]})
                n += count

    def consumer() -> None:
        position = 0
        with httpx.Client(base_url=a.url, timeout=30) as client:
            while not stop.is_set():
                page = client.get(
                    f"/v1/topics/{topic}/partitions/0/messages",
                    params={"offset": position, "max_messages": 50, "max_wait_ms": 200},
                ).json()
                if page["next_offset"] != position:
                    position = page["next_offset"]
                    client.post(
                        f"/v1/groups/{group}/offsets",
                        json={"offsets": [{"topic": topic, "partition": 0, "offset": position}]},
                    )
                stop.wait(0.01)  # the consumer's own work

    def group_offset(url: str) -> int | None:
        found = httpx.get(f"{url}/v1/groups/{group}/offsets", timeout=10).json()["offsets"]
        return int(found[0]["offset"]) if found else None

    threads = [threading.Thread(target=producer), threading.Thread(target=consumer)]
    for thread in threads:
        thread.start()
    rng = random.Random(33)
    deadline = time.monotonic() + args.failover_seconds
    time.sleep(2.0)  # a first snapshot and sync
    while time.monotonic() < deadline:
        on_a, on_b = group_offset(a.url), group_offset(b.url)
        if on_a is not None and on_b is not None:
            samples.append(FailoverSample(on_a, on_b))
        time.sleep(rng.uniform(0.1, 0.9))
    stop.set()
    for thread in threads:
        thread.join()
    wait_for(lambda: replicator.caught_up(a.url, topic), "the replicator to catch up", timeout=120)
    replicator.stop()

    source = {m["offset"]: m for m in read_partition(a.url, topic, 0)}
    copies = read_partition(b.url, topic, 0)
    re_read_counts, re_read_ms, skipped = [], [], 0
    for sample in samples:
        resumed = [m for m in copies if m["offset"] >= sample.target_offset]
        origins = {int(m["headers"][ORIGIN_OFFSET]) for m in resumed}
        skipped += sum(1 for offset in source if offset >= sample.source_committed and offset not in origins)
        again = [source[o] for o in origins if o < sample.source_committed]
        re_read_counts.append(len(again))
        re_read_ms.append(max(m["timestamp"] for m in again) - min(m["timestamp"] for m in again) if again else 0)
    print(
        f"fail-over at the default snapshot interval (1000 ms), {args.rate} msg/s, {len(samples)} samples: "
        f"re-read median {statistics.median(re_read_counts):.0f} msgs / {statistics.median(re_read_ms):.0f} ms, "
        f"max {max(re_read_counts)} msgs / {max(re_read_ms)} ms; messages skipped: {skipped}",
        flush=True,
    )


def throughput(
    a: BrokerProcess, b: BrokerProcess, args: argparse.Namespace, value: str, work: Path, load_before: float
) -> None:
    ceilings: list[Rate] = []
    copies: list[Rate] = []
    for _repeat in range(args.repeats):
        ceilings.append(measure_ceiling(b, args, value))
        print(ceilings[-1].line(), flush=True)
        copies.append(measure_replication(a, b, args, value, work))
        print(copies[-1].line(), flush=True)
    best_ceiling = max(ceilings, key=lambda r: r.per_second)
    best_copy = max(copies, key=lambda r: r.per_second)
    print(
        f"best: replication {best_copy.per_second:,.0f} msg/s, target's batched produce {best_ceiling.per_second:,.0f} "
        f"msg/s: ratio {best_copy.per_second / best_ceiling.per_second:.2f} (goal >= 0.5; "
        f"{args.batch}-message batches, {args.value_bytes}-byte values, {args.partitions} partitions, "
        f"{os.cpu_count()} CPUs, load average before the run {load_before:.1f})",
        flush=True,
    )


def start_clusters(args: argparse.Namespace, work: Path) -> tuple[BrokerProcess, BrokerProcess]:
    a = BrokerProcess(args.source_db or f"sqlite:///{work}/a.db", log_path=work / "a.log", cluster_name="A")
    b = BrokerProcess(args.target_db or f"sqlite:///{work}/b.db", log_path=work / "b.log", cluster_name="B")
    a.start()
    b.start()
    return a, b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replication", description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=1000, help="messages per produce request and per replicator batch")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2, help="alternating runs of each, the best counts; 0: skip")
    parser.add_argument("--rate", type=int, default=1000, help="messages/s produced during the fail-over measurement")
    parser.add_argument("--failover-seconds", type=float, default=20.0, help="0: skip the fail-over measurement")
    parser.add_argument("--source-db", help="database URL of cluster A (default: a temporary SQLite file)")
    parser.add_argument("--target-db", help="database URL of cluster B (default: a temporary SQLite file)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs)")
    args = parser.parse_args(argv)

    load_before = os.getloadavg()[0]  # other work on the machine skews every figure
    work = Path(tempfile.mkdtemp(prefix="halfmq-replication-bench-"))
    value = "v" * max(0, args.value_bytes - 2)  # a JSON string of value_bytes with its quotes
    a, b = start_clusters(args, work)
    try:
        if args.repeats > 0:
            throughput(a, b, args, value, work, load_before)
        if args.failover_seconds > 0:
            failover_window(a, b, args, work)
    finally:
        b.stop()
        a.stop()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
