"""``python -m bench.auth_overhead``: what token authentication costs a single-message produce.

Two brokers on two fresh databases of one kind, started the same way, in the same run:
one with ``HALFMQ_AUTH=none``, one with ``HALFMQ_AUTH=token`` where the load carries the
token of a principal holding ``topic:write`` on the topic (not the admin token, which
skips the ACL decision). wrk posts the same one-message body to each, the runs
interleaved (off, on, off, on ...) so drift of the machine hits both alike; the
figure is the median rate of each side and the overhead ``1 - on / off``. On a shared
machine the rate swings with other load, so the broker's CPU time per request (its
front and core processes, read from /proc around each run) is reported too: it is what
authentication adds, and much less sensitive to neighbours. Last, the authorizing
dependency alone is timed in this process (no HTTP, no database): its cost per request
with auth off and with a principal's token, best of five.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench import procs, wrk

ADMIN = "bench-admin-token"
TOPIC = "bench-auth"
BODY = json.dumps({"messages": [{"key": "k", "value": {"n": 1, "text": "x" * 100}}]}).encode()


def _call(url: str, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
    request = urllib.request.Request(
        url + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        data = answer.read()
    return json.loads(data) if data else None


def database_url(kind: str, directory: Path, name: str, postgres_admin: str | None) -> str:
    if kind == "sqlite":
        return f"sqlite:///{directory}/{name}.db"
    if postgres_admin is None:
        raise SystemExit("--db postgresql needs --postgres-url (an admin URL; databases are created next to it)")
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = create_engine(postgres_admin, isolation_level="AUTOCOMMIT")
    database = f"halfmq_bench_auth_{name}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{database}"'))
        conn.execute(text(f'CREATE DATABASE "{database}"'))
    admin.dispose()
    return make_url(postgres_admin).set(database=database).render_as_string(hide_password=False)


def dependency_cost(directory: Path, calls: int = 20_000) -> dict[str, float]:
    """Microseconds per call of ``app.api.authorize.authorize`` for a produce, auth off and on (in-process)."""
    import asyncio

    from fastapi.security import HTTPAuthorizationCredentials
    from fastapi.testclient import TestClient
    from starlette.requests import Request

    from app.api.authorize import authorize
    from app.api.log_routes import produce
    from app.main import create_app
    from half_store.settings import Settings

    class ProduceRoute:  # what the router puts in the scope: the matched route and its endpoint
        endpoint = produce
        path = "/v1/topics/{topic}/messages"

    costs: dict[str, float] = {}
    for mode in ("none", "token"):
        settings = Settings(
            database_url=f"sqlite:///{directory}/dependency-{mode}.db",
            core_process=False,
            run_checker=False,
            auth=mode,
            admin_token=ADMIN,  # type: ignore[arg-type]
        )
        app = create_app(settings)
        with TestClient(app) as client:
            admin = {"Authorization": f"Bearer {ADMIN}"}
            client.post("/v1/principals", json={"name": "producer"}, headers=admin)
            token = client.post("/v1/principals/producer/tokens", headers=admin).json()["token"]
            acl = {"principal": "producer", "resource_type": "topic", "pattern": TOPIC, "operations": ["write"]}
            client.post("/v1/acls", json=acl, headers=admin)
            scope = {
                "type": "http",
                "method": "POST",
                "path": f"/v1/topics/{TOPIC}/messages",
                "headers": [(b"authorization", f"Bearer {token}".encode())],
                "query_string": b"",
                "app": app,
                "route": ProduceRoute,
                "path_params": {"topic": TOPIC},
            }
            credentials = HTTPAuthorizationCredentials(scheme="Bearer", credentials=token)

            async def timed(
                scope: dict[str, Any] = scope, credentials: HTTPAuthorizationCredentials = credentials
            ) -> float:
                best = float("inf")
                for _ in range(5):
                    started = time.perf_counter()
                    for _ in range(calls):
                        await authorize(Request(dict(scope)), credentials)
                    best = min(best, (time.perf_counter() - started) / calls * 1e6)
                    await asyncio.sleep(0)
                return best

            costs[mode] = client.portal.call(timed)  # type: ignore[union-attr]
    return costs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.auth_overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--postgres-url", default=None, help="admin URL for --db postgresql")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per wrk run (default 8)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs of each side (default 3)")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    if not wrk.available():
        raise SystemExit("wrk is not installed")
    directory = Path(tempfile.mkdtemp(prefix="halfmq-bench-auth-"))
    off = procs.broker(database_url(args.db, directory, "off", args.postgres_url), auth="none").start()
    on = procs.broker(
        database_url(args.db, directory, "on", args.postgres_url), auth="token", admin_token=ADMIN
    ).start()
    try:
        _call(off.url, "POST", "/v1/topics", {"name": TOPIC, "partitions": 1})
        _call(on.url, "POST", "/v1/topics", {"name": TOPIC, "partitions": 1}, ADMIN)
        _call(on.url, "POST", "/v1/principals", {"name": "producer"}, ADMIN)
        token = _call(on.url, "POST", "/v1/principals/producer/tokens", None, ADMIN)["token"]
        acl = {"principal": "producer", "resource_type": "topic", "pattern": TOPIC, "operations": ["write"]}
        _call(on.url, "POST", "/v1/acls", acl, ADMIN)
        path = f"/v1/topics/{TOPIC}/messages"
        rates: dict[str, list[float]] = {"off": [], "on": []}
        p50: dict[str, list[float]] = {"off": [], "on": []}
        cpu_us: dict[str, list[float]] = {"off": [], "on": []}
        front_us: dict[str, list[float]] = {"off": [], "on": []}
        for _ in range(args.rounds):
            for side, server, authorization in (("off", off, None), ("on", on, f"Bearer {token}")):
                cpu_before, front_before = procs.cpu_seconds(server.pid), procs.own_cpu_seconds(server.pid)
                result = wrk.post(
                    server.url,
                    path,
                    BODY,
                    connections=args.connections,
                    duration=args.duration,
                    authorization=authorization,
                )
                if result.errors:
                    raise SystemExit(f"{side}: {result.errors} errors: {result.raw}")
                per_request = (procs.cpu_seconds(server.pid) - cpu_before) / max(1, result.requests) * 1e6
                front = (procs.own_cpu_seconds(server.pid) - front_before) / max(1, result.requests) * 1e6
                front_us[side].append(front)
                rates[side].append(result.rate)
                p50[side].append(result.p50_ms)
                cpu_us[side].append(per_request)
                print(
                    f"  {side:3}  {result.rate:8.1f} req/s  p50 {result.p50_ms:6.2f} ms  p99 {result.p99_ms:6.2f} ms"
                    f"  broker CPU {per_request:6.0f} us/request (HTTP front {front:4.0f})",
                    flush=True,
                )
        median_off, median_on = statistics.median(rates["off"]), statistics.median(rates["on"])
        overhead = 1 - median_on / median_off
        cpu_off, cpu_on = statistics.median(cpu_us["off"]), statistics.median(cpu_us["on"])
        front_off, front_on = statistics.median(front_us["off"]), statistics.median(front_us["on"])
        figures = {
            "db": args.db,
            "duration_s": args.duration,
            "rounds": args.rounds,
            "connections": args.connections,
            "rates_off": rates["off"],
            "rates_on": rates["on"],
            "median_off": median_off,
            "median_on": median_on,
            "p50_ms_off": statistics.median(p50["off"]),
            "p50_ms_on": statistics.median(p50["on"]),
            "overhead": overhead,
            "cpu_us_per_request_off": cpu_off,
            "cpu_us_per_request_on": cpu_on,
            "cpu_overhead": cpu_on / cpu_off - 1,
            "front_cpu_us_per_request_off": front_off,
            "front_cpu_us_per_request_on": front_on,
        }
        print(
            f"single-message produce on {args.db}: auth off {median_off:.1f} req/s, token auth {median_on:.1f} req/s,"
            f" overhead {overhead * 100:.1f}% (goal <= 5%); broker CPU {cpu_off:.0f} -> {cpu_on:.0f} us/request"
            f" ({(cpu_on / cpu_off - 1) * 100:+.1f}%), of which the HTTP front {front_off:.0f} -> {front_on:.0f}"
        )
        dependency = dependency_cost(directory)
        figures["dependency_us_off"], figures["dependency_us_on"] = dependency["none"], dependency["token"]
        print(
            f"the authorizing dependency alone (in-process): {dependency['none']:.1f} us/request with auth off,"
            f" {dependency['token']:.1f} us with a token"
        )
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2) + "\n")
        return 0
    finally:
        off.stop()
        on.stop()


if __name__ == "__main__":
    raise SystemExit(main())
