"""The storage ceiling: raw inserts and reads of the broker's own rows.

Inserts go through the broker's own fastest path (``log_store.insert_message_rows``:
the driver's executemany on SQLite, COPY on PostgreSQL), so the ceiling is what the
database takes, not what one way of calling it takes.

Same database engine set-up as the broker (``half_store.storage.database.open_database``:
WAL + ``synchronous=FULL`` + ``BEGIN IMMEDIATE`` on SQLite, psycopg 3 ``READ
COMMITTED`` on PostgreSQL), the same schema (the broker's Alembic migrations),
the same 1 KiB ``messages`` rows, but no HTTP, no validation, no offset
allocation, no bookkeeping: one connection, one thread, back to back.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from sqlalchemy import Connection

from bench.payloads import PARTITIONS, RAW_VALUE, TOPIC
from half_store.domain.constants import VALUE_JSON
from half_store.domain.records import ProducerStamp, Record, Topic, now_ms
from half_store.storage import log_reads, log_store
from half_store.storage.database import open_database
from half_store.storage.migrate import upgrade


@dataclass
class RawResult:
    name: str
    rows: int
    transactions: int
    seconds: float
    cpu_seconds: float = 0.0  # this process's CPU meanwhile: on a busy machine, rows per CPU-second vary less

    @property
    def rows_per_cpu_second(self) -> float:
        return self.rows / self.cpu_seconds if self.cpu_seconds else 0.0

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0

    @property
    def transactions_per_second(self) -> float:
        return self.transactions / self.seconds if self.seconds else 0.0


def _row(topic_id: int, partition: int, offset: int) -> log_store.MessageRow:
    record = Record(None, RAW_VALUE, VALUE_JSON, None, now_ms())
    return log_store.message_row(topic_id, partition, offset, record, ProducerStamp(), None)


def measure(database_url: str, duration: float) -> list[RawResult]:
    """Rows/s inserted 1, 100 and 1000 per transaction, and rows/s read 100 per range query."""
    database = open_database(database_url)
    try:
        upgrade(database.writer)
        with database.writer.begin() as conn:
            topic = log_store.create_topic(conn, TOPIC + "-raw", PARTITIONS)
        next_offset = [0] * PARTITIONS
        results: list[RawResult] = []
        share = duration / 4

        for batch in (1, 100, 1000):
            rows = transactions = 0
            began = time.monotonic()
            deadline = began + share
            while time.monotonic() < deadline:
                partition = transactions % PARTITIONS
                base = next_offset[partition]
                with database.writer.begin() as conn:
                    log_store.insert_message_rows(conn, [_row(topic.topic_id, partition, base + i) for i in range(batch)])
                next_offset[partition] = base + batch
                rows += batch
                transactions += 1
            results.append(RawResult(f"insert {batch}/txn", rows, transactions, time.monotonic() - began))

        reads = rows = 0
        rng = random.Random(7)
        cpu_began = time.process_time()
        began = time.monotonic()
        deadline = began + share
        while time.monotonic() < deadline:
            partition = reads % PARTITIONS
            start = rng.randrange(0, max(1, next_offset[partition] - 100))
            with database.reader.connect() as conn:
                found = _read(conn, topic, partition, start)
            rows += len(found)
            reads += 1
        results.append(
            RawResult("read 100/query", rows, reads, time.monotonic() - began, time.process_time() - cpu_began)
        )
        return results
    finally:
        database.dispose()


def _read(conn: Connection, topic: Topic, partition: int, start: int) -> list[object]:
    return list(log_reads.read_range(conn, topic, partition, start, start + 100, 100))


