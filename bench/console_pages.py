"""How long the web console's pages take to load, with a million messages in the database.

Fills an empty database in-process (``--messages`` log messages over two topics, half
messages in every state, committed and open transactions, a group's offsets), then
starts a broker process on it and loads each console page as a browser does: the page
itself, then the API calls its script makes, concurrently, timed until the last answer.
A call the broker does not serve (404 NOT_FOUND / 405: another branch's API) is left
out and named. Prints, per page, the median and 95th percentile over ``--rounds`` loads
and the slowest call.

    python -m bench.console_pages --database-url sqlite:////tmp/console-bench.db
    python -m bench.console_pages --database-url postgresql+psycopg://postgres@127.0.0.1:5432/console_bench
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

import httpx
import orjson

from app.broker import running_broker
from bench.procs import broker as broker_process
from half_store.domain.constants import VALUE_JSON
from half_store.domain.records import OffsetCommit, PackedList, ProducerStamp, Record, now_ms
from half_store.settings import Settings

ORDERS, PAYMENTS, GROUP = "bench-orders", "bench-payments", "bench-billing"
FILL_BATCH = 10_000
HALF_MESSAGES = 5_000
NOT_OFFERED = ("NOT_FOUND", "METHOD_NOT_ALLOWED")


async def fill(database_url: str, messages: int) -> None:
    settings = Settings(database_url=database_url, run_checker=False, core_process=False)
    async with running_broker(settings) as broker:
        await broker.log.create_topic(ORDERS, 6)
        await broker.log.create_topic(PAYMENTS, 1)
        value = orjson.dumps({"order": 123456, "amount": 42.5, "currency": "EUR", "note": "x" * 40})
        for first in range(0, messages, FILL_BATCH):
            count = min(FILL_BATCH, messages - first)
            records = PackedList(
                Record, (Record(f"customer-{(first + n) % 997}", value, VALUE_JSON, None, now_ms()) for n in range(count))
            )
            topic = ORDERS if first % (10 * FILL_BATCH) else PAYMENTS  # a tenth to payments
            await broker.log.produce(topic, records, [None] * count)
        await broker.log.commit_group_offsets(GROUP, [OffsetCommit(ORDERS, p, 1000, None) for p in range(6)])

        async def half(n: int) -> None:
            record = Record(f"cart-{n}", orjson.dumps({"cart": n}), VALUE_JSON, None, now_ms())
            prepared = await broker.halves.prepare(
                ORDERS, f"checkout-{n % 4}", record, partition=None, transaction_id=None, check_immunity_seconds=86400
            )
            if n % 10 < 8:
                await broker.halves.commit(prepared.half.message_id)
            elif n % 10 == 8:
                await broker.halves.rollback(prepared.half.message_id)

        for first in range(0, HALF_MESSAGES, 200):  # concurrently, as producers would: the writer groups them
            await asyncio.gather(*(half(n) for n in range(first, min(first + 200, HALF_MESSAGES))))

        record = Record("k", orjson.dumps("in a transaction"), VALUE_JSON, None, now_ms())
        for n in range(205):
            txn = await broker.coordinator.begin(None, None, 600_000)
            await broker.coordinator.produce(PAYMENTS, 0, [record], ProducerStamp(None, None, None, txn.txn_id))
            if n >= 5:  # five stay open
                await broker.coordinator.end(txn.txn_id, commit=True)


def page_calls(client: httpx.Client) -> dict[str, list[str]]:
    """What each page's script asks for on load (see app/api/console/static/console.js)."""
    halves = client.get("/v1/half-messages", params={"limit": 1}).json()["half_messages"]
    one_half = halves[0]["message_id"] if halves else "none"
    txn = client.post("/v1/transactions", json={"timeout_ms": 600_000}).json()["txn_id"]
    end = client.get(f"/v1/topics/{ORDERS}").json()["partitions"][0]["high_watermark"]
    unfinished = [f"/v1/transactions?state={s}" for s in ("OPEN", "PREPARE_COMMIT", "PREPARE_ABORT")]
    return {
        "overview": [
            "/console",
            "/metrics",
            "/v1/topics",
            *unfinished,
            *[f"/v1/half-messages?state={s}&limit=1000" for s in ("PREPARED", "DISCARDED")],
            *[f"/v1/half-messages?state={s}&limit=100" for s in ("COMMITTED", "ROLLED_BACK")],
            "/v1/checker",
        ],
        "topics": [
            f"/console/topics?topic={ORDERS}",
            "/v1/topics",
            f"/v1/topics/{ORDERS}",
            f"/v1/topics/{ORDERS}/partitions/0/messages?offset={max(0, end - 50)}&max_messages=50&isolation=read_committed",
        ],
        "groups": [f"/console/groups?group={GROUP}", "/v1/groups", f"/v1/groups/{GROUP}", f"/v1/groups/{GROUP}/offsets"],
        "share-groups": ["/console/share-groups?group=bench-share", "/v1/share-groups/bench-share"],
        "half-messages": ["/console/half-messages", "/v1/half-messages?limit=500", f"/v1/half-messages/{one_half}"],
        "transactions": ["/console/transactions", *unfinished, f"/v1/transactions/{txn}"],
    }


def offered(client: httpx.Client, path: str) -> bool:
    answer = client.get(path)
    return not (answer.status_code in (404, 405) and answer.json().get("error", {}).get("code") in NOT_OFFERED)


async def load_page(url: str, paths: list[str]) -> tuple[float, dict[str, float]]:
    """The page, then its calls at once (as its script makes them): total seconds and each call's."""
    timings: dict[str, float] = {}
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        started = time.perf_counter()
        await client.get(paths[0])
        timings[paths[0]] = time.perf_counter() - started

        async def call(path: str) -> None:
            began = time.perf_counter()
            (await client.get(path)).raise_for_status()
            timings[path] = time.perf_counter() - began

        await asyncio.gather(*(call(p) for p in paths[1:]))
        return time.perf_counter() - started, timings


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def measure(url: str, rounds: int, say: Callable[[str], None]) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        pages = page_calls(client)
        missing = {p for calls in pages.values() for p in calls if not offered(client, p)}
    if missing:
        say(f"not offered by this broker (left out): {', '.join(sorted(missing))}")
    say(f"{'page':<14} {'median ms':>10} {'p95 ms':>8}  slowest call (median ms)")
    for name, calls in pages.items():
        wanted = [p for p in calls if p not in missing]
        totals: list[float] = []
        each: dict[str, list[float]] = {p: [] for p in wanted}
        for _ in range(rounds):
            total, timings = asyncio.run(load_page(url, wanted))
            totals.append(total)
            for path, seconds in timings.items():
                each[path].append(seconds)
        slowest = max(each, key=lambda p: statistics.median(each[p]))
        say(
            f"{name:<14} {statistics.median(totals) * 1000:>10.1f} {percentile(totals, 0.95) * 1000:>8.1f}  "
            f"{slowest.split('?')[0]} ({statistics.median(each[slowest]) * 1000:.1f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.console_pages", description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True, help="an empty database (it is filled)")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=20)
    arguments = parser.parse_args()
    started = time.perf_counter()
    asyncio.run(fill(arguments.database_url, arguments.messages))
    filled = time.perf_counter() - started
    print(f"filled {arguments.messages} messages, {HALF_MESSAGES} half messages, 205 transactions in {filled:.0f} s")
    with broker_process(arguments.database_url, check_interval_seconds=3600) as broker:
        measure(broker.url, arguments.rounds, print)


if __name__ == "__main__":
    main()
