"""Consumer groups: consume throughput of 1, 2 and 4 members, and how long a rebalance takes.

    python -m bench.groups [--db sqlite|postgresql|both] [--messages 20000]
                           [--session-ms 6000] [--heartbeat-ms 3000]

For each database a broker is started on a scratch database (PostgreSQL:
``halfmq_bench_groups_<pid>`` next to ``HALFMQ_BENCH_PG_ADMIN``, dropped afterwards).

- **Throughput.** N member processes (SDK ``Consumer``, at-least-once with auto-commit, 500 a
  poll) join a group on an empty 4-partition topic; once the group is STABLE, ``--messages``
  small JSON messages are produced (1000 a request) and the clock runs from the first produce
  until every offset is committed: messages read *and committed* per second. (Producing a
  topic first would let the first member read it all while the others were still joining.)
  The time the produce alone took is printed beside it: it bounds what the members can do.
- **Rebalance time.** Three members on an idle topic. *join*: a fourth member's join until
  the group is STABLE again (every member holds its target: the old owners were told at
  their next heartbeat, committed, let go, and the newcomer took over). *leave*: a member
  closes (leaves) until STABLE again. *death*: a member is SIGKILLed until every partition is
  held by a live member and the group is STABLE: the session timeout, then the same hand-over.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from multiprocessing.process import BaseProcess
from typing import Any

import httpx

from tests.support.broker_process import BrokerProcess

PARTITIONS = 4
PG_ADMIN_URL = os.environ.get("HALFMQ_BENCH_PG_ADMIN", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def member_main(url: str, group: str, topic: str, session_ms: int) -> None:
    """One member process: consume until terminated (SIGTERM closes it: it leaves the group)."""
    from sdk import Consumer

    stopping = False

    def stop(_signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    options: dict[str, Any] = {"session_timeout_ms": session_ms, "max_poll_messages": 500, "long_poll_slice": 0.1}
    with Consumer(url, group, topic, **options) as consumer:
        while not stopping:
            consumer.poll(timeout=0.2)


@dataclass
class Figures:
    database: str
    session_ms: int
    heartbeat_ms: int
    messages: int
    throughput: dict[int, float]  # members -> messages read and committed per second
    produce_seconds: dict[int, float]  # members -> how long producing them took
    rebalance: dict[str, float]  # join / leave / death -> seconds until STABLE again


class Bench:
    def __init__(self, broker: BrokerProcess, session_ms: int) -> None:
        self.url = broker.url
        self.http = httpx.Client(base_url=broker.url, timeout=60)
        self.session_ms = session_ms
        self.context = multiprocessing.get_context("spawn")

    def topic(self, name: str) -> str:
        assert self.http.post("/v1/topics", json={"name": name, "partitions": PARTITIONS}).status_code == 201
        return name

    def fill(self, topic: str, count: int) -> None:
        payload = {"order": "x" * 64}
        for start in range(0, count, 1000):
            batch = [{"value": {"n": i, **payload}} for i in range(start, min(count, start + 1000))]
            assert self.http.post(f"/v1/topics/{topic}/messages", json={"messages": batch}).status_code == 200

    def start_member(self, group: str, topic: str) -> BaseProcess:
        process = self.context.Process(target=member_main, args=(self.url, group, topic, self.session_ms))
        process.start()
        return process

    def view(self, group: str) -> dict[str, Any]:
        response = self.http.get(f"/v1/groups/{group}")
        return response.json() if response.status_code == 200 else {"state": "EMPTY", "members": [], "offsets": []}

    def stable_with(self, group: str, members: int) -> bool:
        view = self.view(group)
        held = {(p["topic"], p["partition"]) for m in view["members"] for p in m["assignment"]}
        return view["state"] == "STABLE" and len(view["members"]) == members and len(held) == PARTITIONS

    def committed(self, group: str) -> int:
        return sum(o["offset"] for o in self.http.get(f"/v1/groups/{group}/offsets").json()["offsets"])

    @staticmethod
    def until(condition: Callable[[], bool], timeout: float = 300.0, every: float = 0.01) -> float:
        """Wait for ``condition``; the monotonic time it first held."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError("the group did not get there in time")
            time.sleep(every)
        return time.monotonic()

    @staticmethod
    def stop(members: list[BaseProcess]) -> None:
        for member in members:
            if member.is_alive():
                member.terminate()
        for member in members:
            member.join(30)

    def throughput(self, members: int, messages: int) -> tuple[float, float]:
        """(messages read and committed per second, seconds the produce alone took)."""
        group = f"throughput-{members}"
        topic = self.topic(group)
        processes = [self.start_member(group, topic) for _ in range(members)]
        try:
            self.until(lambda: self.stable_with(group, members))
            started = time.monotonic()
            self.fill(topic, messages)
            produced = time.monotonic() - started
            done_at = self.until(lambda: self.committed(group) == messages, every=0.02)
        finally:
            self.stop(processes)
        return messages / (done_at - started), produced

    def rebalances(self) -> dict[str, float]:
        group, topic = "rebalance", self.topic("rebalance")
        processes = [self.start_member(group, topic) for _ in range(3)]
        try:
            self.until(lambda: self.stable_with(group, 3))
            processes.append(self.start_member(group, topic))
            self.until(lambda: len(self.view(group)["members"]) == 4)  # its join (the process start is left out)
            joined = time.monotonic()
            join = self.until(lambda: self.stable_with(group, 4)) - joined
            left = time.monotonic()
            processes[0].terminate()  # closes: leaves the group
            leave = self.until(lambda: self.stable_with(group, 3)) - left
            killed = time.monotonic()
            assert processes[1].pid is not None
            os.kill(processes[1].pid, signal.SIGKILL)
            death = self.until(lambda: self.stable_with(group, 2)) - killed
        finally:
            self.stop(processes)
        return {"join": join, "leave": leave, "death": death}


class ScratchDatabase:
    """A SQLite file, or a PostgreSQL database of this bench's own (other benches may use theirs)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = f"halfmq_bench_groups_{os.getpid()}"
        self.directory = tempfile.TemporaryDirectory(prefix="halfmq-bench-groups-")

    def __enter__(self) -> str:
        if self.kind == "sqlite":
            return f"sqlite:///{self.directory.name}/groups.db"
        self._admin(f'CREATE DATABASE "{self.name}"')
        return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{self.name}"

    def __exit__(self, *exc: object) -> None:
        if self.kind == "postgresql":
            self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        self.directory.cleanup()

    @staticmethod
    def _admin(sql: str) -> None:
        from sqlalchemy import create_engine, text

        engine = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(text(sql))
        finally:
            engine.dispose()


def measure(kind: str, messages: int, session_ms: int, heartbeat_ms: int) -> Figures:
    with ScratchDatabase(kind) as url:
        broker = BrokerProcess(
            url, group_min_session_timeout_ms=min(session_ms, 6000), group_heartbeat_interval_ms=heartbeat_ms,
        ).start()
        try:
            bench = Bench(broker, session_ms)
            runs = {n: bench.throughput(n, messages) for n in (1, 2, 4)}
            rebalance = bench.rebalances()
            bench.http.close()
        finally:
            broker.stop()
    throughput = {n: rate for n, (rate, _) in runs.items()}
    produced = {n: seconds for n, (_, seconds) in runs.items()}
    return Figures(kind, session_ms, heartbeat_ms, messages, throughput, produced, rebalance)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.groups", description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--session-ms", type=int, default=6000, help="members' session timeout (default: the minimum)")
    parser.add_argument("--heartbeat-ms", type=int, default=3000, help="the broker's heartbeat interval (default 3000)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    kinds = ["sqlite", "postgresql"] if args.db == "both" else [args.db]
    results = [measure(kind, args.messages, args.session_ms, args.heartbeat_ms) for kind in kinds]
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
        return
    for r in results:
        print(f"{r.database}: {r.messages} messages, {PARTITIONS} partitions, "
              f"session {r.session_ms} ms, heartbeat {r.heartbeat_ms} ms")
        for members, rate in r.throughput.items():
            print(f"  consume, {members} member(s)   {rate:>9,.0f} messages/s read and committed "
                  f"(producing them took {r.produce_seconds[members]:.2f} s)")
        for event, seconds in r.rebalance.items():
            print(f"  rebalance on {event:<6}       {seconds:>9.2f} s until STABLE again")


if __name__ == "__main__":
    main()
