"""``python -m bench``: start everything it measures and print one table of figures and ratios.

Ceilings (raw inserts/reads of the same rows in the same database, the broker's fastest insert;
a storage-free FastAPI app with the same routes served the same way; a bare ASGI app with
the same hot endpoints, one uvicorn worker per core), peers on this
machine (RabbitMQ via pika with publisher confirms and with AMQP transactions per
message; NATS JetStream awaiting each ack), and halfmq itself on SQLite and
PostgreSQL, all under the same load generators in the same run.

Load generators: wrk (C, ``bench/lua/*.lua``) for the requests that do not depend on
an earlier answer; ``bench.loadgen`` (several client processes, raw keep-alive
HTTP/1.1 on uvloop) for prepare+commit pairs and mode-2 transactions, checked
against wrk on the ceiling app in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    with open("/proc/meminfo") as meminfo:
        total_kb = int(meminfo.readline().split()[1])
    cpu_model = ""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            cpu_model = next((ln.split(":", 1)[1].strip() for ln in cpuinfo if ln.startswith("model name")), "")
    except OSError:
        pass
    try:
        wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True, check=False).stdout.splitlines()[0]
    except (OSError, IndexError):
        wrk_version = "not installed"
    with open("/proc/loadavg") as loadavg:
        load = loadavg.read().split()[:3]
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu_model,
        "memory_gib": round(total_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "wrk": wrk_version,
        "loadavg_at_start": load,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per scenario (default 10)")
    parser.add_argument("--skip-peers", action="store_true", help="do not measure RabbitMQ and NATS")
    parser.add_argument(
        "--peer-clients", type=int, default=8,
        help="RabbitMQ client processes / NATS publishers in flight for the concurrent rows",
    )
    parser.add_argument(
        "--soak", type=float, default=0.0, metavar="SECONDS", help="also run a mixed-load RSS soak this long (on the first --db)"
    )
    parser.add_argument("--soak-only", action="store_true", help="run only the soak and add it to the existing --output file")
    parser.add_argument(
        "--profile", type=Path, default=None, metavar="DIR",
        help="py-spy record the broker during each halfmq scenario into DIR (slows it down)",
    )
    parser.add_argument("--only", default=None, metavar="KEYS",
                        help="comma-separated scenario keys to run (produce-1, produce-100, produce-1000, pairs, "
                        "notxn, txn, txn-producer, notxn-big, txn-big, fetch, fetch-arrow, rocketmq, kafka); default all")
    parser.add_argument(
        "--rocketmq-clients", type=int, default=4, metavar="N",
        help="client processes for the RocketMQ-protocol rows and their REST twins (bench.rocketmq); 0 skips them",
    )
    parser.add_argument(
        "--kafka-clients", type=int, default=2, metavar="N",
        help="client processes for the Kafka-protocol rows and their REST twins (bench.kafka); 0 skips them",
    )
    parser.add_argument("--no-bare", action="store_true", help="do not measure the bare ASGI ceiling (bench.bare_app)")
    parser.add_argument(
        "--workers", type=int, default=None, metavar="N", help="start the broker with HALFMQ_WORKERS=N (default: its own)"
    )
    parser.add_argument("--no-checker", action="store_true", help="start the broker with HALFMQ_RUN_CHECKER=false")
    parser.add_argument(
        "--output", type=Path, default=None, help="write the results as JSON (e.g. bench/results/benchmarks.json)"
    )
    parser.add_argument("--broker-root", type=Path, default=None, metavar="DIR",
                        help="measure the broker from this source tree (e.g. `git archive HEAD | tar -x -C DIR`) "
                        "instead of the working tree")
    args = parser.parse_args(argv)
    if args.broker_root is not None:
        # Before any broker module is imported: the in-process parts (raw DB ceiling, plans) use it too.
        os.environ["HALFMQ_BENCH_BROKER_ROOT"] = str(args.broker_root.resolve())
        sys.path.insert(0, str(args.broker_root.resolve()))
    from bench import peers, procs, report, scenarios

    specs = scenarios.select(args.only)
    if args.duration < 1:
        parser.error("--duration must be at least 1 second")

    from bench import wrk

    if not wrk.available():
        parser.error("wrk is not installed (apt-get install wrk)")
    started = time.time()
    dbs = ["sqlite", "postgresql"] if args.db == "both" else [args.db]
    broker_settings: dict[str, Any] = {"run_checker": "false"} if args.no_checker else {}
    if args.workers is not None:
        broker_settings["workers"] = args.workers
    if args.soak_only:
        if args.soak <= 0 or args.output is None:
            parser.error("--soak-only needs --soak SECONDS and --output FILE")
        previous = json.loads(args.output.read_text()) if args.output.exists() else {"rows": [], "soak": []}
        soak = scenarios.soak(dbs[0], args.soak, broker_settings)
        soak["command"] = "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
        previous["soak"] = [s for s in previous.get("soak", []) if s.get("db") != soak["db"]] + [soak]
        previous["goals"] = report.goals(previous)
        args.output.write_text(json.dumps(previous, indent=2, default=str) + "\n")
        print(report.render(previous))
        return 0
    results: dict[str, Any] = {
        "command": "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:]),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "machine": machine(),
        "broker_source": procs.broker_source(),
        "duration_per_scenario_s": args.duration,
        "broker_settings": broker_settings or {"run_checker": "true (default)"},
        "rows": [],
        "databases": {},
        "soak": [],
    }
    rows: list[scenarios.Row] = []
    ceiling = procs.ceiling_app().start()
    bare = None
    try:
        bare = None if args.no_bare else procs.bare_app().start()
        scenarios.warm_up(ceiling)
        rows += scenarios.client_check(ceiling, args.duration)
        for db in dbs:
            rocketmq_clients = args.rocketmq_clients if args.only is None or "rocketmq" in args.only.split(",") else 0
            kafka_clients = args.kafka_clients if args.only is None or "kafka" in args.only.split(",") else 0
            db_rows, meta = scenarios.run_database(
                db, ceiling, bare, args.duration, args.profile, broker_settings, specs, rocketmq_clients, kafka_clients
            )
            rows += db_rows
            results["databases"][db] = meta
    finally:
        ceiling.stop()
        if bare is not None:
            bare.stop()

    if not args.skip_peers:
        scenarios.log(
            f"peers: RabbitMQ (1 and {args.peer_clients} clients), NATS JetStream (1 and {args.peer_clients * 8} in flight)"
        )
        measured = [
            peers.rabbitmq("confirm", 1, args.duration),
            peers.rabbitmq("confirm", args.peer_clients, args.duration),
            peers.rabbitmq("tx", 1, args.duration),
            peers.rabbitmq("tx", args.peer_clients, args.duration),
            peers.nats_jetstream(1, args.duration),
            peers.nats_jetstream(args.peer_clients * 8, args.duration),
        ]
        for peer in measured:
            rabbit = "RabbitMQ" in peer.name
            how = "pika BlockingConnection, 1 process per client" if rabbit else "nats-py, publishers awaiting acks"
            rows.append(
                scenarios.Row("peer", "-", peer.name.lower().replace(" ", "-"), peer.name, "msgs/s", round(peer.rate, 1),
                              messages_per_s=round(peer.rate, 1), p50_ms=round(peer.p50_ms, 2), p99_ms=round(peer.p99_ms, 2),
                              concurrency=peer.clients, loadgen=how, errors=1 if peer.error else 0,
                              extra={"error": peer.error} if peer.error else {})
            )
            scenarios.log(f"  {peer.name} x{peer.clients}: {peer.rate:,.0f} msg/s{' ' + peer.error if peer.error else ''}")

    if args.soak > 0:
        results["soak"].append(scenarios.soak(dbs[0], args.soak, broker_settings))

    results["rows"] = [scenarios.row_dict(r) for r in rows]
    report.annotate(results["rows"])
    results["goals"] = report.goals(results)
    results["elapsed_s"] = round(time.time() - started, 1)
    print()
    print(report.render(results))
    print(f"\n(total {results['elapsed_s']:.0f}s; load average at start {' '.join(results['machine']['loadavg_at_start'])})")
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(results, indent=2, default=str) + "\n")
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
