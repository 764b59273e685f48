"""``python -m bench.writer_trace``: where the group-commit writer's time goes, statement by statement.

Starts the broker as ``python -m bench`` does, with ``bench/writer_trace_hook`` on its
PYTHONPATH: that folder's ``sitecustomize`` times, in the core process, each statement
the writer thread sends and each group commit (see its docstring). One chain scenario
runs (``bench.loadgen``, 64 connections); afterwards the core is asked for its totals.

Prints, per write unit: the writer's busy time, the time spent in statements (sending,
the database's work, the answer back) and in COMMIT, units per group commit; then the
statements that took the most time. The rest of the busy time is the writer's Python.
The first figure is what bounds a latency-bound chain with one writer; unlike a rate,
it hardly moves with the machine's other load.

``python -m bench.writer_trace [--db postgresql|sqlite] [--chain pair|txn|txn-producer|notxn|single] [--seconds S]``
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import loadgen, procs
from bench.scenarios import ScratchDatabase, create_topic, warm_up

HOOK = Path(__file__).resolve().parent / "writer_trace_hook"


@dataclass(frozen=True)
class Statement:
    sql: str
    calls: int
    seconds: float


@dataclass(frozen=True)
class WriterTrace:
    rate: float  # chains per second
    batches: int  # group commits
    units: int
    busy_s: float  # the writer's time in group commits
    commit_s: float  # of which in COMMIT (and SQLite's fsync)
    statements: list[Statement]  # most time first

    def per_unit_us(self, seconds: float) -> float:
        return 1e6 * seconds / max(self.units, 1)


def trace(kind: str, chain: str, seconds: float, warm_up_seconds: float) -> WriterTrace:
    """Run ``chain`` against a fresh broker; the writer's totals over the measured part."""
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HOOK), os.environ.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as scratch, ScratchDatabase(kind, "broker") as url:
        output = Path(scratch) / "trace.json"
        with procs.broker(url, writer_trace=output) as broker:
            core = next(pid for pid in procs.process_tree(broker.pid) if pid != broker.pid)
            create_topic(broker.url)
            warm_up(broker)
            loadgen.run(broker.url, chain, concurrency=64, duration=warm_up_seconds)
            before = _totals(core, output)
            result = loadgen.run(broker.url, chain, concurrency=64, duration=seconds)
            after = _totals(core, output)
    earlier = {s["sql"]: s for s in before["statements"]}
    statements = [
        Statement(s["sql"], s["calls"] - old["calls"], s["seconds"] - old["seconds"])
        for s in after["statements"]
        if s["calls"] > (old := earlier.get(s["sql"], {"calls": 0, "seconds": 0.0}))["calls"]
    ]
    return WriterTrace(
        result.rate,
        after["batches"] - before["batches"],
        after["units"] - before["units"],
        after["busy_s"] - before["busy_s"],
        after["commit_s"] - before["commit_s"],
        sorted(statements, key=lambda s: -s.seconds),
    )


def _totals(core: int, output: Path) -> dict[str, Any]:
    """The hook's totals so far: SIGUSR1 to the core, then its JSON."""
    output.unlink(missing_ok=True)
    os.kill(core, signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            return dict(json.loads(output.read_text()))
        except (FileNotFoundError, json.JSONDecodeError):  # not written yet, or half written
            time.sleep(0.05)
    raise RuntimeError("the broker's core wrote no writer trace: is bench/writer_trace_hook on its PYTHONPATH?")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.writer_trace", description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["postgresql", "sqlite"], default="postgresql")
    parser.add_argument("--chain", choices=sorted(loadgen.MESSAGES_PER_OP), default="pair")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warm-up", type=float, default=3.0, help="seconds of the same chain first, not counted")
    parser.add_argument("--top", type=int, default=12, help="statements listed")
    args = parser.parse_args(argv)
    found = trace(args.db, args.chain, args.seconds, args.warm_up)
    in_statements = sum(s.seconds for s in found.statements)
    print(
        f"{args.db} {args.chain}: {found.rate:,.0f}/s; {found.units:,} units in {found.batches:,} group commits"
        f" ({found.units / max(found.batches, 1):.1f} each); per unit: writer busy {found.per_unit_us(found.busy_s):.0f} us,"
        f" statements {found.per_unit_us(in_statements):.0f} us, commit {found.per_unit_us(found.commit_s):.0f} us"
    )
    for s in found.statements[: args.top]:
        print(f"  {1e6 * s.seconds / s.calls:7.0f} us x {s.calls / max(found.batches, 1):4.2f} per commit  {s.sql[:100]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
