"""CPU time per produce request: the broker's front and core against the storage-free app.

Rates move with whatever else the machine runs; the CPU a process spends per request
moves much less. For single-message and 100-message produce, this runs wrk against the
storage-free app and then the broker (``python -m app``) and prints each one's rate and
CPU milliseconds per request (the broker's split into its HTTP front and its core).

``python -m bench.cpu_per_request [--db sqlite|postgresql] [--duration 5]``
"""

from __future__ import annotations

import argparse
import urllib.request

import orjson

from bench import payloads, procs, wrk
from bench.scenarios import SQLITE, TOPIC_PATH, ScratchDatabase

REQUESTS = ((1, 64), (100, 16))  # messages per request, connections (as the produce scenarios)


def _create_topic(url: str) -> None:
    body = orjson.dumps({"name": payloads.TOPIC, "partitions": payloads.PARTITIONS})
    request = urllib.request.Request(f"{url}/v1/topics", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        answer.read()


def measure(server: procs.Server, label: str, duration: float) -> None:
    _create_topic(server.url)
    for messages, connections in REQUESTS:
        body = payloads.produce_body(messages)
        wrk.post(server.url, TOPIC_PATH, body, connections=connections, duration=1)  # warm up
        total, front = procs.cpu_seconds(server.pid), procs.own_cpu_seconds(server.pid)
        result = wrk.post(server.url, TOPIC_PATH, body, connections=connections, duration=duration)
        total = procs.cpu_seconds(server.pid) - total
        front = procs.own_cpu_seconds(server.pid) - front
        per_request = 1e3 / max(result.requests, 1)
        print(
            f"{label:<8} produce {messages:>4} msg/request: {result.rate:8,.0f} req/s, CPU per request "
            f"{total * per_request:.3f} ms (front {front * per_request:.3f} ms, core {(total - front) * per_request:.3f} ms), "
            f"errors {result.errors}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=[SQLITE, "postgresql"], default=SQLITE)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of wrk per measurement")
    args = parser.parse_args()
    if not wrk.available():
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    with procs.ceiling_app() as ceiling:
        measure(ceiling, "ceiling", args.duration)
    with ScratchDatabase(args.db, "cpu") as database_url, procs.broker(database_url) as broker:
        measure(broker, "broker", args.duration)


if __name__ == "__main__":
    main()
