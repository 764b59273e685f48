"""A multi-process load generator for request chains wrk cannot express.

Half-message prepare+commit pairs and mode-2 transactions need a value from the
first answer (``message_id``, ``txn_id``) in the next request, so they are driven
by several client processes (``multiprocessing``), each running uvloop with raw
HTTP/1.1 keep-alive connections (no httpx: its per-request cost would make the
client the bottleneck). Every connection runs one chain after another; an
*operation* is one whole chain (a pair, a transaction of 100 messages).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import Any

import orjson

from bench import payloads


class Connection:
    """One keep-alive HTTP/1.1 connection; requests on it are strictly sequential."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.producer: dict[str, int] | None = None  # a chain's producer id and epoch, kept across its runs
        self.sequences = [0] * payloads.PARTITIONS

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port, limit=64 * 1024 * 1024)

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        assert self.reader is not None and self.writer is not None
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            self.writer.write(head.encode() + body)
        else:
            self.writer.write((head + "\r\n").encode())
        header = await self.reader.readuntil(b"\r\n\r\n")
        status = int(header[9:12])
        length = 0
        lower = header.lower()
        at = lower.find(b"content-length:")
        if at >= 0:
            length = int(lower[at + 15 : lower.index(b"\r\n", at)])
        data = await self.reader.readexactly(length) if length else b""
        return status, data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class Failed(Exception):
    pass


def _ok(status: int, data: bytes) -> bytes:
    if status >= 300:
        raise Failed(f"{status}: {data[:200]!r}")
    return data


async def chain_pair(conn: Connection, bodies: dict[str, bytes]) -> int:
    """Mode 1: prepare a half message, then commit it with the message_id from the answer."""
    answer = orjson.loads(_ok(*await conn.request("POST", "/v1/half-messages", bodies["half"])))
    _ok(*await conn.request("POST", f"/v1/half-messages/{answer['message_id']}/commit", b""))
    return 2


async def chain_txn(conn: Connection, bodies: dict[str, bytes]) -> int:
    """Mode 2: begin, 4 x 25 messages over 4 partitions with txn_id, commit."""
    txn_id = orjson.loads(_ok(*await conn.request("POST", "/v1/transactions", b"{}")))["txn_id"]
    for partition in range(payloads.PARTITIONS):
        body = payloads.partition_body(25, txn_id)
        _ok(*await conn.request("POST", f"/v1/topics/{payloads.TOPIC}/partitions/{partition}/messages", body))
    _ok(*await conn.request("POST", f"/v1/transactions/{txn_id}/commit", b""))
    return payloads.PARTITIONS + 2


async def chain_txn_producer(conn: Connection, bodies: dict[str, bytes], writes: int = 4, size: int = 25) -> int:
    """Mode 2, Kafka style: ``writes`` x ``size`` messages over the 4 partitions in turn, with the
    producer's id, epoch and sequences, the first beginning the transaction (KIP-890: no begin
    request), then commit."""
    if conn.producer is None:
        body = orjson.dumps({"transactional_id": f"bench-{os.getpid()}-{id(conn)}"})
        conn.producer = orjson.loads(_ok(*await conn.request("POST", "/v1/producers", body)))
        conn.sequences = [0] * payloads.PARTITIONS
    txn_id: str | None = None
    for write in range(writes):
        partition = write % payloads.PARTITIONS
        body = payloads.partition_body(size, txn_id, producer=conn.producer, base_sequence=conn.sequences[partition])
        answer = orjson.loads(
            _ok(*await conn.request("POST", f"/v1/topics/{payloads.TOPIC}/partitions/{partition}/messages", body))
        )
        conn.sequences[partition] += size
        txn_id = txn_id or answer["txn_id"]  # only the beginning (transactional) write answers with it
    _ok(*await conn.request("POST", f"/v1/transactions/{txn_id}/commit", b""))
    return writes + 1


async def chain_txn_big(conn: Connection, bodies: dict[str, bytes]) -> int:
    """Mode 2 at a Kafka-like size: 10 x 100 messages, Kafka style, then commit."""
    return await chain_txn_producer(conn, bodies, writes=10, size=100)


async def chain_notxn_big(conn: Connection, bodies: dict[str, bytes]) -> int:
    """The same 10 x 100 messages as chain_txn_big, the same 10 writes, no transaction."""
    for write in range(10):
        partition = write % payloads.PARTITIONS
        _ok(*await conn.request("POST", f"/v1/topics/{payloads.TOPIC}/partitions/{partition}/messages", bodies["p100"]))
    return 10


async def chain_notxn(conn: Connection, bodies: dict[str, bytes]) -> int:
    """The same 100 messages as chain_txn, the same 4 requests, no transaction."""
    for partition in range(payloads.PARTITIONS):
        _ok(*await conn.request("POST", f"/v1/topics/{payloads.TOPIC}/partitions/{partition}/messages", bodies["p25"]))
    return payloads.PARTITIONS


async def chain_single(conn: Connection, bodies: dict[str, bytes]) -> int:
    """One single-message produce (to compare this client with wrk on the same endpoint)."""
    _ok(*await conn.request("POST", f"/v1/topics/{payloads.TOPIC}/messages", bodies["single"]))
    return 1


CHAINS = {
    "pair": chain_pair,
    "txn": chain_txn,
    "txn-producer": chain_txn_producer,
    "notxn": chain_notxn,
    "single": chain_single,
    "txn-big": chain_txn_big,
    "notxn-big": chain_notxn_big,
}
MESSAGES_PER_OP = {
    "pair": 1, "txn": 100, "txn-producer": 100, "notxn": 100, "single": 1, "txn-big": 1000, "notxn-big": 1000,
}


def _bodies() -> dict[str, bytes]:
    return {
        "half": payloads.half_body(),
        "p25": payloads.partition_body(25),
        "p100": payloads.partition_body(100),
        "single": payloads.produce_body(1),
    }


async def _process_main(port: int, chain_name: str, connections: int, start_at: float, duration: float) -> dict[str, object]:
    chain = CHAINS[chain_name]
    bodies = _bodies()
    conns = [Connection("127.0.0.1", port) for _ in range(connections)]
    await asyncio.gather(*(c.open() for c in conns))
    await asyncio.sleep(max(0.0, start_at - time.time()))
    deadline = time.monotonic() + duration
    latencies: list[float] = []
    requests = 0
    errors: list[str] = []

    async def worker(conn: Connection) -> None:
        nonlocal requests
        while time.monotonic() < deadline:
            began = time.perf_counter()
            try:
                sent = await chain(conn, bodies)
            except Failed as error:
                errors.append(str(error) if len(errors) < 5 else "")
                continue
            except (OSError, asyncio.IncompleteReadError, ValueError) as error:
                # The connection broke (or answered garbage): count it, reconnect, go on.
                errors.append(f"connection: {error!r}" if len(errors) < 5 else "")
                conn.close()
                try:
                    await conn.open()
                except OSError:
                    await asyncio.sleep(0.1)
                continue
            requests += sent
            latencies.append(time.perf_counter() - began)

    cpu_began = time.process_time()
    began = time.monotonic()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.monotonic() - began
    cpu = time.process_time() - cpu_began
    for c in conns:
        c.close()
    return {
        "ops": len(latencies),
        "requests": requests,
        "seconds": elapsed,
        "cpu": cpu,
        "latencies": latencies,
        "errors": errors,
    }


def _process_entry(
    port: int, chain_name: str, connections: int, start_at: float, duration: float, out: multiprocessing.Queue[Any]
) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    try:
        out.put(asyncio.run(_process_main(port, chain_name, connections, start_at, duration)))
    except BaseException as error:  # noqa: BLE001 - report to the parent
        out.put({"failure": repr(error)})


@dataclass
class LoadResult:
    ops: int
    requests: int
    seconds: float
    errors: int
    error_samples: list[str]
    p50_ms: float
    p99_ms: float
    client_cpu: list[float]  # busy fraction of each client process (1.0 = one core saturated)

    @property
    def rate(self) -> float:
        return self.ops / self.seconds if self.seconds else 0.0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


PROCESSES = 4


def run(url: str, chain_name: str, *, concurrency: int, duration: float, processes: int = PROCESSES) -> LoadResult:
    """``concurrency`` connections spread over ``processes`` client processes, each running chains for ``duration``."""
    port = int(url.rsplit(":", 1)[1])
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    start_at = time.time() + 1.0  # every process connected before the clock starts
    shares = [concurrency // processes + (1 if i < concurrency % processes else 0) for i in range(processes)]
    workers = [
        context.Process(target=_process_entry, args=(port, chain_name, share, start_at, duration, out), daemon=True)
        for share in shares
        if share
    ]
    for worker in workers:
        worker.start()
    results = [out.get(timeout=duration + 120) for _ in workers]
    for worker in workers:
        worker.join(10)
    failures = [r["failure"] for r in results if "failure" in r]
    if failures:
        raise RuntimeError(f"load generator failed: {failures}")
    latencies = [lat for r in results for lat in r["latencies"]]
    errors = [e for r in results for e in r["errors"]]
    return LoadResult(
        ops=sum(int(r["ops"]) for r in results),
        requests=sum(int(r["requests"]) for r in results),
        seconds=max(float(r["seconds"]) for r in results),
        errors=len(errors),
        error_samples=[e for e in errors if e][:5],
        p50_ms=percentile(latencies, 50) * 1000,
        p99_ms=percentile(latencies, 99) * 1000,
        client_cpu=[round(float(r["cpu"]) / float(r["seconds"]), 3) for r in results],
    )
