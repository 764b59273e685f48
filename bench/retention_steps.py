"""How long one retention step holds the group-commit writer, and how fast a round deletes.

Fills one partition with ``--messages`` messages of 100 bytes, sets ``retention_bytes``
to 1000, and times one retention round step by step (each step is one write of at most
``--batch`` deletions, ``half_store.services.retention.TOPIC_BATCH`` by default). Use an empty
database: the topic ``retention-bench`` is created in it.

    python -m bench.retention_steps --database-url sqlite:////tmp/retention.db
    python -m bench.retention_steps --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import orjson

import half_store.services.retention as retention_service
from app.broker import running_broker
from half_store.domain.admin_records import TopicAlteration
from half_store.domain.constants import VALUE_JSON
from half_store.domain.records import PackedList, Record, now_ms
from half_store.services.retention import Retention
from half_store.settings import Settings
from half_store.storage.retention_store import PartitionRetained

TOPIC = "retention-bench"
FILL_BATCH = 10_000


class TimedRetention(Retention):
    """A retention job that times each of its steps."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.steps: list[float] = []

    async def _retain(self, *args: object) -> PartitionRetained:
        started = time.perf_counter()
        done = await super()._retain(*args)  # type: ignore[arg-type]
        self.steps.append(time.perf_counter() - started)
        return done


async def run(database_url: str, messages: int) -> str:
    settings = Settings(database_url=database_url, run_checker=False, core_process=False)
    async with running_broker(settings) as broker:
        await broker.log.create_topic(TOPIC, 1)
        value = orjson.dumps("x" * 98)
        for first in range(0, messages, FILL_BATCH):
            count = min(FILL_BATCH, messages - first)
            records = PackedList(Record, (Record(None, value, VALUE_JSON, None, now_ms()) for _ in range(count)))
            await broker.log.produce(TOPIC, records, [0] * count)
        await broker.admin.alter_topic(TOPIC, TopicAlteration(config=(("retention_bytes", 1000),)))
        retention = TimedRetention(broker.store, settings)
        started = time.perf_counter()
        report = await retention.apply_to_topics()
        elapsed = time.perf_counter() - started
    steps = retention.steps
    return (
        f"{broker.store.database.dialect}: deleted {report.deleted_messages} messages ({report.deleted_bytes} B) "
        f"in {elapsed:.2f} s, {len(steps)} steps of at most {retention_service.TOPIC_BATCH}: "
        f"median {statistics.median(steps) * 1000:.1f} ms, longest {max(steps) * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.retention_steps", description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=retention_service.TOPIC_BATCH)
    arguments = parser.parse_args()
    retention_service.TOPIC_BATCH = arguments.batch
    print(asyncio.run(run(arguments.database_url, arguments.messages)))


if __name__ == "__main__":
    main()
