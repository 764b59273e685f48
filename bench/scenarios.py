"""The halfmq scenarios, each measured on the two storage-free ceilings and then on the broker.

Every scenario runs against the storage-free FastAPI app, the bare ASGI app (one worker
per core; issue 37's ceiling) and the broker in turn, with the same load generator, so
each ratio compares figures taken a few seconds apart on the same (shared, 2-core) machine.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import db_ceiling, loadgen, payloads, plans, procs, profiling, wrk

SQLITE = "sqlite"
POSTGRESQL = "postgresql"
PG_ADMIN_URL = os.environ.get("HALFMQ_BENCH_PG_ADMIN", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
# Two bench runs at once (several engineers on one machine) need a database each.
PG_DATABASE = os.environ.get("HALFMQ_BENCH_PG_DATABASE", "halfmq_bench")


@dataclass
class Row:
    section: str  # storage | ceiling | bare | halfmq | peer | check
    db: str
    scenario: str
    label: str
    unit: str
    rate: float
    messages_per_s: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    concurrency: int | None = None
    loadgen: str = ""
    errors: int = 0
    rss_mb: float | None = None
    server_cpu: float | None = None
    machine_cpu: float | None = None
    loadavg: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Spec:
    key: str
    label: str
    kind: str  # wrk-post | wrk-fetch | chain
    concurrency: int
    unit: str
    messages: int  # messages per operation
    body: bytes = b""
    path: str = ""
    chain: str = ""
    accept: str = ""  # wrk-fetch: the Accept header (none: JSON)


TOPIC_PATH = f"/v1/topics/{payloads.TOPIC}/messages"
ROUNDS = 2  # each scenario: ceiling, broker, ceiling, broker, duration/ROUNDS each
FETCH_PAGE = 100
ARROW_STREAM = "application/vnd.apache.arrow.stream"
# Fetches need something to read: with ``--only fetch`` the topic is filled to this many
# messages per partition first (the produce scenarios, when they run, write far more).
FETCH_FILL_PER_PARTITION = 5_000
PARTITION_ROUNDS = 20  # produce calls between two looks at the partitions' offsets

SPECS = [
    Spec("produce-1", "produce 1 msg/request", "wrk-post", 64, "req/s", 1, payloads.produce_body(1), TOPIC_PATH),
    Spec("produce-100", "produce 100 msgs/request", "wrk-post", 16, "req/s", 100, payloads.produce_body(100), TOPIC_PATH),
    Spec("produce-1000", "produce 1000 msgs/request", "wrk-post", 8, "req/s", 1000, payloads.produce_body(1000), TOPIC_PATH),
    Spec("pairs", "half prepare+commit pairs", "chain", 64, "pairs/s", 1, chain="pair"),
    Spec("notxn", "4 x 25 msgs, no transaction", "chain", 64, "batches/s", 100, chain="notxn"),
    Spec("txn", "mode-2 txn: 4 x 25 msgs + commit", "chain", 64, "txn/s", 100, chain="txn"),
    Spec("txn-producer", "mode-2 txn, Kafka style: 4 x 25 + commit", "chain", 64, "txn/s", 100, chain="txn-producer"),
    Spec("notxn-big", "10 x 100 msgs, no transaction", "chain", 16, "batches/s", 1000, chain="notxn-big"),
    Spec("txn-big", "mode-2 txn, Kafka style: 10 x 100 + commit", "chain", 16, "txn/s", 1000, chain="txn-big"),
    Spec("fetch", f"read_committed fetch {FETCH_PAGE}/req", "wrk-fetch", 16, "req/s", FETCH_PAGE),
    Spec(
        "fetch-arrow", f"read_committed fetch {FETCH_PAGE}/req, Arrow", "wrk-fetch", 16, "req/s", FETCH_PAGE,
        accept=ARROW_STREAM,
    ),
]
CLIENT_CHECK = Spec("client-check", "produce 1 msg/request (client check)", "chain", 64, "req/s", 1, chain="single")


def select(keys: str | None) -> list[Spec]:
    """The scenarios named in ``keys`` (comma-separated), in table order; all of them for None."""
    if not keys:
        return list(SPECS)
    wanted = {key.strip() for key in keys.split(",") if key.strip()} - {"rocketmq", "kafka"}  # bench.rocketmq's, bench.kafka's
    unknown = wanted - {spec.key for spec in SPECS}
    if unknown:
        raise SystemExit(f"unknown scenario keys: {', '.join(sorted(unknown))}")
    return [spec for spec in SPECS if spec.key in wanted]


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def http_json(method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read() or b"null")


def create_topic(url: str) -> None:
    http_json("POST", f"{url}/v1/topics", {"name": payloads.TOPIC, "partitions": payloads.PARTITIONS})


def fetchable_high(url: str) -> int:
    """The smallest last stable offset over the topic's partitions (fetches stay below it)."""
    described = http_json("GET", f"{url}/v1/topics/{payloads.TOPIC}")
    return min(int(p["last_stable_offset"]) for p in described["partitions"])


def fill_for_fetch(url: str) -> int:
    """Produce 100-message batches until every partition holds enough to fetch; the new fetchable high."""
    high = fetchable_high(url)
    body = payloads.produce_body(100)
    while high < FETCH_FILL_PER_PARTITION:
        request = urllib.request.Request(
            f"{url}{TOPIC_PATH}", data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        for _ in range(PARTITION_ROUNDS):
            with urllib.request.urlopen(request, timeout=30) as answer:
                answer.read()
        high = fetchable_high(url)
    return high


def warm_fetch(url: str, accept: str) -> None:
    request = urllib.request.Request(
        f"{url}/v1/topics/{payloads.TOPIC}/partitions/0/messages?max_messages={FETCH_PAGE}", headers={"Accept": accept}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        answer.read()


def measure(
    spec: Spec, server: procs.Server, duration: float, *, fetch_high: int = 0, profile_to: Path | None = None
) -> tuple[Any, procs.RssSampler, dict[str, Any]]:
    spy = profiling.start(server.pid, profile_to, duration) if profile_to is not None else None
    extra: dict[str, Any] = {}
    with procs.RssSampler(server.pid) as sampler:
        if spec.kind == "wrk-post":
            result: Any = wrk.post(server.url, spec.path, spec.body, connections=spec.concurrency, duration=duration)
        elif spec.kind == "wrk-fetch":
            result = wrk.fetch(
                server.url, payloads.TOPIC, payloads.PARTITIONS, fetch_high, FETCH_PAGE,
                connections=spec.concurrency, duration=duration, accept=spec.accept,
            )
        else:
            result = loadgen.run(server.url, spec.chain, concurrency=spec.concurrency, duration=duration)
            extra["client_cpu"] = result.client_cpu
            extra["requests_per_s"] = round(result.requests / result.seconds, 1) if result.seconds else 0
            if result.error_samples:
                extra["error_samples"] = result.error_samples
    if spy is not None and profile_to is not None:
        try:
            spy.wait(duration + 30)
        except Exception:  # noqa: BLE001
            spy.kill()
        extra["profile"] = profiling.summarise(profile_to)
    return result, sampler, extra


def to_row(section: str, db: str, spec: Spec, result: Any, sampler: Any, extra: dict[str, Any], loadgen_name: str) -> Row:
    return Row(
        section=section,
        db=db,
        scenario=spec.key,
        label=spec.label,
        unit=spec.unit,
        rate=round(result.rate, 1),
        messages_per_s=round(result.rate * spec.messages, 1),
        p50_ms=round(result.p50_ms, 2),
        p99_ms=round(result.p99_ms, 2),
        concurrency=spec.concurrency,
        loadgen=loadgen_name,
        errors=result.errors,
        rss_mb=round(sampler.max_mb, 1),
        server_cpu=round(sampler.server_cpu, 2),
        machine_cpu=round(sampler.machine_cpu, 2),
        loadavg=sampler.loadavg,
        extra=extra,
    )


def loadgen_name(spec: Spec) -> str:
    if spec.kind.startswith("wrk"):
        accept = f" (Accept: {spec.accept})" if spec.accept else ""
        script = "fetch" if spec.kind == "wrk-fetch" else "post"
        return f"wrk -t{wrk.WRK_THREADS} -c{spec.concurrency} + bench/lua/{script}.lua{accept}"
    return f"bench.loadgen: {loadgen.PROCESSES} procs x {spec.concurrency // loadgen.PROCESSES} raw keep-alive conns (uvloop)"


@dataclass
class Combined:
    """Several rounds of one measurement: rate over all of them, p50 averaged, p99 the worst."""

    ops: float
    seconds: float
    errors: int
    p50_ms: float
    p99_ms: float

    @property
    def rate(self) -> float:
        return self.ops / self.seconds if self.seconds else 0.0


class CombinedSampler:
    def __init__(self, samplers: list[procs.RssSampler]) -> None:
        self.max_mb = max(s.max_mb for s in samplers)
        self.server_cpu = sum(s.server_cpu for s in samplers) / len(samplers)
        self.machine_cpu = sum(s.machine_cpu for s in samplers) / len(samplers)
        self.loadavg = max(s.loadavg for s in samplers)


def combine(measured: list[tuple[Any, procs.RssSampler, dict[str, Any]]]) -> tuple[Combined, CombinedSampler, dict[str, Any]]:
    results = [m[0] for m in measured]
    combined = Combined(
        ops=sum(r.rate * r.seconds for r in results),
        seconds=sum(r.seconds for r in results),
        errors=sum(r.errors for r in results),
        p50_ms=sum(r.p50_ms for r in results) / len(results),
        p99_ms=max(r.p99_ms for r in results),
    )
    extra: dict[str, Any] = {"rounds": [round(r.rate, 1) for r in results]}
    for _, _, more in measured:
        for key, value in more.items():
            extra.setdefault(key, []).append(value)
    return combined, CombinedSampler([m[1] for m in measured]), extra


def warm_up(server: procs.Server) -> None:
    wrk.post(server.url, TOPIC_PATH, payloads.produce_body(1), connections=16, duration=1)


# -- databases ------------------------------------------------------------------------------


class ScratchDatabase:
    """A fresh database for one phase: a SQLite file in a temp dir, or PostgreSQL ``halfmq_bench``."""

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> str:
        if self.kind == SQLITE:
            self._dir = tempfile.TemporaryDirectory(prefix="halfmq-bench-", dir=os.environ.get("HALFMQ_BENCH_TMP"))
            return f"sqlite:///{self._dir.name}/{self.name}.db"
        self._admin("DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        self._admin("CREATE DATABASE {db}")
        return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{PG_DATABASE}"

    def __exit__(self, *exc: object) -> None:
        if self.kind == SQLITE:
            assert self._dir is not None
            self._dir.cleanup()
        else:
            self._admin("DROP DATABASE IF EXISTS {db} WITH (FORCE)")

    @staticmethod
    def _admin(sql: str) -> None:
        from sqlalchemy import create_engine, text

        engine = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(text(sql.format(db=PG_DATABASE)))
        finally:
            engine.dispose()


def versions(kind: str) -> str:
    if kind == SQLITE:
        import sqlite3

        return f"SQLite {sqlite3.sqlite_version}"
    from sqlalchemy import create_engine, text

    engine = create_engine(PG_ADMIN_URL)
    try:
        with engine.connect() as conn:
            return str(conn.execute(text("SELECT version()")).scalar()).split(" on ")[0]
    finally:
        engine.dispose()


# -- one database -----------------------------------------------------------------------------


def run_database(
    kind: str,
    ceiling: procs.Server,
    bare: procs.Server | None,
    duration: float,
    profile_dir: Path | None,
    broker_settings: dict[str, Any],
    specs: list[Spec] = SPECS,
    rocketmq_clients: int = 0,
    kafka_clients: int = 0,
) -> tuple[list[Row], dict[str, Any]]:
    """``rocketmq_clients`` > 0: also the RocketMQ protocol rows beside their REST twins (bench.rocketmq);
    ``kafka_clients`` > 0: the Kafka protocol rows beside theirs (bench.kafka)."""
    rows: list[Row] = []
    meta: dict[str, Any] = {"version": versions(kind)}

    log(f"{kind}: raw database ceiling ({duration:.0f}s)")
    with ScratchDatabase(kind, "raw") as url:
        for raw in db_ceiling.measure(url, duration):
            rows.append(
                Row(
                    "storage", kind, raw.name, f"raw {raw.name}", "rows/s", round(raw.rows_per_second, 1),
                    messages_per_s=round(raw.rows_per_second, 1), loadgen="bench.db_ceiling (1 connection, in-process)",
                    extra={"transactions_per_s": round(raw.transactions_per_second, 1),
                           "rows_per_cpu_s": round(raw.rows_per_cpu_second, 1)},
                )
            )
            log(f"  {raw.name}: {raw.rows_per_second:,.0f} rows/s ({raw.transactions_per_second:,.1f} txn/s)")

    with ScratchDatabase(kind, "broker") as url:
        grpc_port, kafka_port = procs.free_port(), procs.free_port()
        broker = procs.broker(url, grpc_port=grpc_port, kafka_port=kafka_port, **broker_settings).start()
        meta["broker_log"] = str(broker.log_path)
        try:
            create_topic(broker.url)
            meta["rss_idle_mb"] = round(procs.rss_mb(broker.pid), 1)
            warm_up(broker)
            warm_up(ceiling)
            if bare is not None:
                warm_up(bare)
            for spec in specs:
                high = fill_for_fetch(broker.url) if spec.kind == "wrk-fetch" else 0
                if spec.accept:  # the first answer in a format may import its library: not part of the figure
                    for server in (ceiling, broker):
                        warm_fetch(server.url, spec.accept)
                # Alternate ceilings and broker in ROUNDS halves so drifting background load hits all alike.
                # The bare app answers JSON only: no Arrow row for it.
                with_bare = bare is not None and not spec.accept
                on_ceiling, on_bare, on_broker = [], [], []
                for round_no in range(ROUNDS):
                    on_ceiling.append(measure(spec, ceiling, duration / ROUNDS, fetch_high=high))
                    if with_bare and bare is not None:
                        on_bare.append(measure(spec, bare, duration / ROUNDS, fetch_high=high))
                    profile_to = profile_dir / f"{kind}-{spec.key}-{round_no}.txt" if profile_dir else None
                    on_broker.append(measure(spec, broker, duration / ROUNDS, fetch_high=high, profile_to=profile_to))
                ceiling_row = to_row("ceiling", kind, spec, *combine(on_ceiling), loadgen_name(spec))
                rows.append(ceiling_row)
                bare_text = ""
                if on_bare:
                    bare_row = to_row("bare", kind, spec, *combine(on_bare), loadgen_name(spec))
                    rows.append(bare_row)
                    bare_text = f" | bare {bare_row.rate:,.0f}"
                row = to_row("halfmq", kind, spec, *combine(on_broker), loadgen_name(spec))
                rows.append(row)
                log(
                    f"  {spec.key}: ceiling {ceiling_row.rate:,.0f}{bare_text} {spec.unit} | halfmq {row.rate:,.0f} {spec.unit} "
                    f"({row.messages_per_s:,.0f} msg/s, p50 {row.p50_ms} ms, p99 {row.p99_ms} ms, RSS {row.rss_mb} MB, "
                    f"cpu {row.server_cpu}, errors {row.errors})"
                )
            if rocketmq_clients:
                from bench import rocketmq

                log(f"{kind}: RocketMQ client and REST, {rocketmq_clients} client processes each ({duration:.0f}s)")
                rows += rocketmq.measure(kind, broker.url, f"127.0.0.1:{grpc_port}", duration, rocketmq_clients)
            if kafka_clients:
                from bench import kafka

                log(f"{kind}: Kafka clients and REST, {kafka_clients} client processes each ({duration:.0f}s)")
                rows += kafka.measure(kind, broker.url, f"127.0.0.1:{kafka_port}", duration, kafka_clients)
            meta["rss_end_mb"] = round(procs.rss_mb(broker.pid), 1)
        finally:
            broker.stop()
        try:
            meta["plans"] = plans.explain(url)
        except Exception as error:  # noqa: BLE001 - plans are a report, not a gate
            meta["plans"] = {"error": {"sql": "", "plan": repr(error)}}
    return rows, meta


def client_check(ceiling: procs.Server, duration: float) -> list[Row]:
    """The chain load generator vs wrk on the same ceiling endpoint: is the client the bottleneck?"""
    result, sampler, extra = measure(CLIENT_CHECK, ceiling, duration)
    row = to_row("check", "-", CLIENT_CHECK, result, sampler, extra, loadgen_name(CLIENT_CHECK))
    spec = SPECS[0]
    result, sampler, extra = measure(spec, ceiling, duration)
    wrk_row = to_row("check", "-", spec, result, sampler, extra, loadgen_name(spec))
    wrk_row.scenario = "client-check-wrk"
    wrk_row.label = "produce 1 msg/request (wrk, same run)"
    log(
        f"client check: bench.loadgen {row.rate:,.0f} req/s (client cpu {row.extra['client_cpu']}) "
        f"vs wrk {wrk_row.rate:,.0f} req/s"
    )
    return [row, wrk_row]


# -- soak ---------------------------------------------------------------------------------------


def soak(kind: str, seconds: float, broker_settings: dict[str, Any]) -> dict[str, Any]:
    """Mixed load (wrk single produce at 32 connections + 16 prepare/commit chains) for ``seconds``; RSS every 5 s."""
    log(f"soak on {kind} for {seconds:.0f}s")
    with ScratchDatabase(kind, "soak") as url:
        broker = procs.broker(url, **broker_settings).start()
        try:
            create_topic(broker.url)
            samples: list[tuple[float, float]] = []
            outcome: dict[str, Any] = {}

            def produce() -> None:
                outcome["wrk"] = wrk.post(broker.url, TOPIC_PATH, payloads.produce_body(1), connections=32, duration=seconds)

            sampler = procs.RssSampler(broker.pid, interval=5.0)
            with sampler:
                thread = threading.Thread(target=produce, daemon=True)
                thread.start()
                pairs = loadgen.run(broker.url, "pair", concurrency=16, duration=seconds)
                thread.join(seconds + 120)
            samples = sampler.samples
        finally:
            broker.stop()
    values = [mb for _, mb in samples]
    fifth = max(1, len(values) // 5)
    first, last = sorted(values[:fifth])[len(values[:fifth]) // 2], sorted(values[-fifth:])[len(values[-fifth:]) // 2]
    produced: wrk.WrkResult | None = outcome.get("wrk")
    return {
        "db": kind,
        "seconds": seconds,
        "samples_mb": [(round(t, 1), round(mb, 1)) for t, mb in samples],
        "first_fifth_median_mb": round(first, 1),
        "last_fifth_median_mb": round(last, 1),
        "growth_mb": round(last - first, 1),
        "max_mb": round(max(values), 1),
        "produce_rate": round(produced.rate, 1) if produced else None,
        "pair_rate": round(pairs.rate, 1),
        "errors": (produced.errors if produced else 0) + pairs.errors,
    }


def row_dict(row: Row) -> dict[str, Any]:
    return asdict(row)
