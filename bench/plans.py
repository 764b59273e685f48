"""EXPLAIN plans of the hot read queries, captured from the broker's own query functions.

The SQL is not retyped here: each query function of the broker runs once against
the benchmark database with a cursor hook that records the exact statement and
parameters it sent, and that statement is then explained (``EXPLAIN QUERY PLAN``
on SQLite, ``EXPLAIN (ANALYZE, BUFFERS)`` on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, event, select

from bench.payloads import TOPIC
from half_store.domain.records import now_ms
from half_store.storage import half_message_store as half_store
from half_store.storage import log_reads, log_store
from half_store.storage.database import open_database
from half_store.storage.schema import messages


def _capture(conn: Connection, call: Callable[[Connection], object], table: str) -> tuple[str, Any]:
    """The last statement ``call`` sent that reads ``table``, with its parameters."""
    seen: list[tuple[str, Any]] = []

    def hook(_c: Any, _cursor: Any, statement: str, parameters: Any, _ctx: Any, _many: bool) -> None:
        seen.append((statement, parameters))

    event.listen(conn, "before_cursor_execute", hook)
    try:
        call(conn)
    finally:
        event.remove(conn, "before_cursor_execute", hook)
    return [s for s in seen if table in s[0]][-1]


def explain(database_url: str) -> dict[str, dict[str, str]]:
    """``{query name: {"sql", "plan"}}`` for the fetch, last-stable-offset and checker-due queries."""
    database = open_database(database_url)
    try:
        with database.reader.connect() as conn:
            topic = log_store.find_topic(conn, TOPIC)
            assert topic is not None, "run the scenarios first"
            newest = select(messages.c.offset).where(messages.c.topic_id == topic.topic_id).order_by(messages.c.offset.desc())
            high = conn.execute(newest.limit(1)).scalar() or 0
            start = max(0, int(high) // 2)
            # (name, the broker function that sends it, a table only that statement reads)
            queries: list[tuple[str, Callable[[Connection], object], str]] = [
                ("fetch (messages by topic_id, partition, offset range)",
                 lambda c: log_reads.read_range(c, topic, 0, start, start + 500, 500), "FROM messages"),
                ("last stable offset (min first_offset of open transactions, via partition_state)",
                 lambda c: log_store.partition_state(c, topic, 0), "transaction_partitions"),
                ("checker due (half_messages by next_check_at)",
                 lambda c: half_store.due(c, now_ms(), 100), "half_messages"),
            ]
            plans: dict[str, dict[str, str]] = {}
            for name, call, table in queries:
                statement, parameters = _capture(conn, call, table)
                if database.is_sqlite:
                    rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).all()
                    plan = "\n".join(f"{'  ' * _depth(rows, r)}{r[-1]}" for r in rows)
                else:
                    rows = conn.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters).all()
                    plan = "\n".join(r[0] for r in rows)
                plans[name] = {"sql": " ".join(statement.split()), "parameters": repr(parameters), "plan": plan}
            conn.rollback()
            return plans
    finally:
        database.dispose()


def _depth(rows: Sequence[Any], row: Any) -> int:
    """Nesting depth of an EXPLAIN QUERY PLAN row (id, parent, notused, detail)."""
    parents = {r[0]: r[1] for r in rows}
    depth, parent = 0, row[1]
    while parent in parents:
        depth += 1
        parent = parents[parent]
    return depth


def populate(database_url: str, rows: int) -> None:
    """Fill a migrated scratch database with ``rows`` messages, half messages and transaction partitions.

    As on a broker that has been running for a while, everything but the newest 1 % is
    finished: those half messages are resolved (``next_check_at`` NULL plus a resolution
    row) and those transaction partitions are ended (``marker_offset`` set); then ANALYZE.
    """
    from sqlalchemy import insert

    from bench.payloads import PARTITIONS, RAW_VALUE
    from half_store.storage import log_store
    from half_store.storage.migrate import upgrade
    from half_store.storage.schema import (
        half_messages,
        half_resolutions,
        transaction_partitions,
    )

    database = open_database(database_url)
    try:
        upgrade(database.writer)
        with database.writer.begin() as conn:
            topic = log_store.create_topic(conn, TOPIC, PARTITIONS)
        now = now_ms()
        chunk = 5000
        recent = rows - max(1, rows // 100)  # rows from here on are still open
        for start in range(0, rows, chunk):
            span = range(start, min(rows, start + chunk))
            with database.writer.begin() as conn:
                conn.execute(insert(messages), [
                    {"topic_id": topic.topic_id, "partition": i % PARTITIONS, "offset": i // PARTITIONS, "key": None,
                     "value": RAW_VALUE, "value_kind": 0, "headers": None, "timestamp": now, "producer_id": None,
                     "producer_epoch": None, "sequence": None, "txn_id": None, "control": 0, "properties": None}
                    for i in span
                ])
                conn.execute(insert(half_messages), [
                    {"message_id": f"m{i:012d}", "half_offset": i, "producer_group": "g", "transaction_id": f"t{i}",
                     "topic_id": topic.topic_id, "partition": i % PARTITIONS, "born_timestamp": now - 60_000,
                     "check_immunity_ms": 0, "check_times": 0, "next_check_at": None if i < recent else now - 1_000}
                    for i in span
                ])
                conn.execute(insert(half_resolutions), [
                    {"message_id": f"m{i:012d}", "outcome": "COMMITTED", "topic_id": topic.topic_id, "partition": i % PARTITIONS,
                     "offset": i // PARTITIONS, "op_offset": i, "resolved_by": "producer", "resolved_at": now}
                    for i in span if i < recent
                ])
                conn.execute(insert(transaction_partitions), [
                    {"txn_id": f"txn-{i // PARTITIONS}", "topic_id": topic.topic_id, "partition": i % PARTITIONS,
                     "first_offset": i // PARTITIONS, "marker_offset": None if i >= recent else i // PARTITIONS + 1,
                     "aborted": False}
                    for i in span
                ])
        if database.is_sqlite:
            with database.writer.begin() as conn:
                conn.exec_driver_sql("ANALYZE")
        else:
            with database.writer.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("ANALYZE")
    finally:
        database.dispose()


def main() -> int:
    """``python -m bench.plans --rows 100000 [--db both] [--output bench/results/benchmarks.json]``: plans at a realistic size."""
    import argparse
    import json
    from pathlib import Path

    from bench import scenarios

    parser = argparse.ArgumentParser(prog="python -m bench.plans", description=main.__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--output", type=Path, default=None, help="add the plans to this JSON file under 'plans_at_scale'")
    args = parser.parse_args()
    found: dict[str, dict[str, dict[str, str]]] = {}
    for kind in (["sqlite", "postgresql"] if args.db == "both" else [args.db]):
        with scenarios.ScratchDatabase(kind, "plans") as url:
            populate(url, args.rows)
            found[kind] = explain(url)
        for name, plan in found[kind].items():
            print(f"== {kind}: {name}\n{plan['plan']}\n")
    if args.output is not None:
        previous = json.loads(args.output.read_text()) if args.output.exists() else {}
        command = f"python -m bench.plans --rows {args.rows}"
        previous["plans_at_scale"] = {"command": command, "rows": args.rows, "plans": found}
        args.output.write_text(json.dumps(previous, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
