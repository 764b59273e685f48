"""Back-check throughput: how fast the checker resolves a backlog of forgotten half messages.

Starts a broker (SQLite or PostgreSQL) with its checker off and prepares
``--messages`` half messages that nobody commits. It then restarts the broker with
the checker on, registers a real callback server answering COMMIT, and times how
long the checker takes to resolve all of them. (With the checker on while the
backlog builds up, checks of a group without a listener are counted and end in
discards, as they should, which is not what this measures.)

    python -m bench.checker_rate --messages 2000 [--database-url postgresql+psycopg://…]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from bench.scenarios import ScratchDatabase
from tests.support.broker_process import BrokerProcess
from tests.support.callback_server import CallbackServer


def prepare_backlog(url: str, count: int, workers: int = 8) -> None:
    def work(worker: int) -> None:
        with httpx.Client(base_url=url) as http:
            for i in range(worker, count, workers):
                http.post("/v1/half-messages", json={"topic": "orders", "producer_group": "pg", "value": {"i": i}})

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(work, range(workers)))


def pending(url: str) -> int:
    body = httpx.get(f"{url}/v1/half-messages", params={"state": "PREPARED", "limit": 1}).json()
    return len(body["half_messages"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite",
                        help="a scratch database of this kind, dropped afterwards (PostgreSQL: halfmq_bench, as python -m bench)")
    parser.add_argument("--check-interval", type=float, default=0.5)
    args = parser.parse_args()
    with ScratchDatabase(args.db, "checker") as url:
        with BrokerProcess(url, run_checker=False) as quiet:
            httpx.post(f"{quiet.url}/v1/topics", json={"name": "orders", "partitions": 4})
            started = time.perf_counter()
            prepare_backlog(quiet.url, args.messages)
            prepare_rate = args.messages / (time.perf_counter() - started)
        broker = BrokerProcess(
            url, transaction_timeout_seconds=0, check_interval_seconds=args.check_interval, lease_seconds=2
        ).start()
        try:
            api = broker.url
            with CallbackServer(lambda _check: "COMMIT") as listener:
                started = time.perf_counter()
                httpx.put(f"{api}/v1/producer-groups/pg/listeners/bench", json={"callback_url": listener.url, "ttl_seconds": 600})
                while pending(api) > 0:
                    time.sleep(0.1)
                elapsed = time.perf_counter() - started
            print(f"database            {url.split(':')[0]}")
            print(f"half messages       {args.messages}")
            print(f"prepare rate        {prepare_rate:,.0f}/s (8 client threads)")
            print(f"checks answered     {len(listener.received)}")
            print(f"checker resolved    {args.messages / elapsed:,.0f} checks/s ({elapsed:.2f} s for the backlog)")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
