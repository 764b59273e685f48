"""Diagnosis experiments: the unmodified broker vs one knob changed, back to back in the same run.

- PostgreSQL: group-commit writer threads 4 (the broker's choice) vs 1 (``bench.variant``).
  Several writer transactions each lock ``partitions`` rows in the order their units
  arrive, so two batches can wait on each other's rows; PostgreSQL breaks the cycle
  after ``deadlock_timeout`` (1 s). One writer thread cannot deadlock with itself.
- SQLite: ``HALFMQ_SQLITE_SYNCHRONOUS`` FULL (default) vs NORMAL: is it the fsync or the CPU?

``python -m bench.experiments --duration 8 [--output bench/results/benchmarks.json]`` (adds "experiments").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench import procs, scenarios

SPECS = [s for s in scenarios.SPECS if s.key in ("produce-1", "produce-100", "pairs", "txn")]


def variant_broker(url: str, writer_threads: int | None, **settings: object) -> procs.Server:
    server = procs.broker(url, **settings)
    if writer_threads is not None:
        server.argv = [sys.executable, "-m", "bench.variant", "--writer-threads", str(writer_threads), "serve"]
    return server


def compare(kind: str, variants: list[tuple[str, int | None, dict[str, object]]], duration: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name, threads, settings in variants:
        with scenarios.ScratchDatabase(kind, "exp") as url:
            server = variant_broker(url, threads, **settings).start()
            try:
                scenarios.create_topic(server.url)
                scenarios.warm_up(server)
                for spec in SPECS:
                    result, sampler, extra = scenarios.measure(spec, server, duration)
                    row = scenarios.to_row("experiment", kind, spec, result, sampler, extra, scenarios.loadgen_name(spec))
                    record = scenarios.row_dict(row)
                    record["variant"] = name
                    out.append(record)
                    scenarios.log(
                        f"{kind} [{name}] {spec.key}: {row.rate:,.1f} {spec.unit} "
                        f"p50 {row.p50_ms} ms p99 {row.p99_ms} ms cpu {row.server_cpu}"
                    )
            finally:
                server.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.experiments", description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--output", type=Path, default=None, help="add the results to this JSON file under 'experiments'")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    if args.db in ("postgresql", "both"):
        rows += compare("postgresql", [("writer threads 4 (default)", None, {}), ("writer threads 1", 1, {})], args.duration)
    if args.db in ("sqlite", "both"):
        rows += compare(
            "sqlite",
            [("synchronous FULL (default)", None, {}), ("synchronous NORMAL", None, {"sqlite_synchronous": "NORMAL"})],
            args.duration,
        )
    for row in rows:
        print(
            f"{row['db']:<10} {row['variant']:<28} {row['label']:<36} {row['rate']:>9,.1f} {row['unit']:<9} "
            f"p50 {row['p50_ms']:>8.1f} ms  p99 {row['p99_ms']:>8.1f} ms  cpu {row['server_cpu']}"
        )
    if args.output is not None:
        previous = json.loads(args.output.read_text()) if args.output.exists() else {}
        previous["experiments"] = {"command": "python -m bench.experiments " + " ".join(sys.argv[1:]), "rows": rows}
        args.output.write_text(json.dumps(previous, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
