"""Retention of user topics: whole messages from the head, never at or past the last stable offset."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import orjson
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

import half_store.services.retention as retention_service
from app.broker import Broker
from app.main import create_app
from half_store.domain.constants import VALUE_JSON
from half_store.domain.records import PackedList, ProducerStamp, Record, now_ms
from half_store.services.retention import Retention, TopicRetentionReport
from half_store.settings import Settings
from half_store.storage.retention_store import MESSAGE_SIZE
from half_store.storage.schema import deleted_topics, messages
from tests.integration.conftest import create_topic, error_code, make_settings

MESSAGE_BYTES = 10  # orjson.dumps(f"{n:08d}")


def records(first: int, count: int, timestamp: int | None = None) -> PackedList[Record]:
    at = timestamp or now_ms()
    return PackedList(
        Record, (Record(None, orjson.dumps(f"{n:08d}"), VALUE_JSON, None, at) for n in range(first, first + count))
    )


def topic_id(client: TestClient, broker: Broker, topic: str) -> int:
    return client.portal.call(broker.store.topic, topic).topic_id  # type: ignore[union-attr, no-any-return]


def partition_bytes(client: TestClient, broker: Broker, topic: str, partition: int) -> int:
    """What the partition holds now, measured as retention measures it."""
    found = topic_id(client, broker, topic)
    size = select(func.coalesce(func.sum(MESSAGE_SIZE), 0)).where(
        messages.c.topic_id == found, messages.c.partition == partition
    )
    return int(broker.store.read_sync(lambda conn: conn.execute(size).scalar_one()))


def partitions_of(client: TestClient, topic: str) -> list[dict[str, int]]:
    return client.get(f"/v1/topics/{topic}").json()["partitions"]  # type: ignore[no-any-return]


def run_rounds(client: TestClient, retention: Retention) -> TopicRetentionReport:
    return client.portal.call(retention.apply_to_topics)  # type: ignore[union-attr, no-any-return]


@pytest.fixture
def retention(client: TestClient, broker: Broker, settings: Settings) -> Retention:
    return Retention(broker.store, settings)


def test_retention_holds_a_topic_at_its_size_under_load_and_never_passes_the_lso(
    client: TestClient, broker: Broker, retention: Retention
) -> None:
    """100,000 messages in requests of 100 while retention runs; an open transaction holds partition 0.

    Each request stores a record batch of 50 per partition, which retention removes whole.
    """
    limit = 20_000  # bytes per partition: 2,000 of these messages, 40 batches
    create_topic(client, "load", partitions=2)
    client.patch("/v1/topics/load", json={"retention_bytes": limit})
    batch, total = 100, 100_000
    held_at: list[int] = []  # the open transaction's first offset in partition 0
    seen_starts: list[int] = []  # partition 0's log start after every retention round
    rounds: list[TopicRetentionReport] = []

    async def produce() -> None:
        for first in range(0, total, batch):
            await broker.log.produce("load", records(first, batch), [n % 2 for n in range(batch)])
            if first == 2 * batch:
                txn = await broker.coordinator.begin(None, None, 600_000)
                written = await broker.coordinator.produce("load", 0, records(-1, 1), ProducerStamp(txn_id=txn.txn_id))
                held_at.append(written.base_offset)

    async def retain_while(producing: asyncio.Task[None]) -> None:
        while not producing.done():
            rounds.append(await retention.apply_to_topics())
            details = await broker.admin.describe_topic("load")
            seen_starts.append(details.partitions[0].log_start_offset)
            await asyncio.sleep(0)
        rounds.append(await retention.apply_to_topics())

    async def load() -> None:
        producing = asyncio.create_task(produce())
        await asyncio.gather(producing, retain_while(producing))

    client.portal.call(load)  # type: ignore[union-attr]

    [txn_offset] = held_at
    hold, free = partitions_of(client, "load")
    assert free["high_watermark"] == total // 2
    assert (
        limit - batch // 2 * MESSAGE_BYTES < partition_bytes(client, broker, "load", 1) <= limit
    )  # at its size: whole batches, no more
    assert free["log_start_offset"] == free["high_watermark"] - limit // MESSAGE_BYTES
    # Partition 0 is held at the open transaction's first offset: nothing at or past it went.
    assert hold["last_stable_offset"] == txn_offset and hold["blocking_txn_id"] is not None
    assert max(seen_starts) <= hold["log_start_offset"] <= txn_offset
    assert hold["log_start_offset"] == txn_offset  # everything older than the transaction did go
    assert sum(r.log_start_moves for r in rounds[:-1]) > 2  # retention worked during the load, not only after
    assert sum(r.deleted_messages for r in rounds) == (total + 1) - (
        hold["high_watermark"] - hold["log_start_offset"]
    ) - (free["high_watermark"] - free["log_start_offset"])

    # Reading from the log start works; below it is out of range.
    first = client.get(
        "/v1/topics/load/partitions/1/messages", params={"offset": free["log_start_offset"], "max_messages": 1}
    )
    assert first.json()["messages"][0]["offset"] == free["log_start_offset"]
    below = client.get("/v1/topics/load/partitions/1/messages", params={"offset": free["log_start_offset"] - 1})
    assert (below.status_code, error_code(below)) == (416, "OFFSET_OUT_OF_RANGE")

    # Once the transaction ends, partition 0 comes down to size too.
    txn_id = hold["blocking_txn_id"]
    assert client.post(f"/v1/transactions/{txn_id}/abort").status_code == 200
    while run_rounds(client, retention).deleted_messages:
        pass
    assert limit - batch // 2 * MESSAGE_BYTES < partition_bytes(client, broker, "load", 0) <= limit
    assert partitions_of(client, "load")[0]["log_start_offset"] > txn_offset


def test_time_retention_deletes_only_older_messages(client: TestClient, broker: Broker, retention: Retention) -> None:
    create_topic(client, "events")
    hour_ago = now_ms() - 3_600_000
    client.portal.call(broker.log.produce, "events", records(0, 30, timestamp=hour_ago), [0] * 30)  # type: ignore[union-attr]
    client.portal.call(broker.log.produce, "events", records(30, 20), [0] * 20)  # type: ignore[union-attr]
    assert run_rounds(client, retention).deleted_messages == 0  # no limit: kept forever

    client.patch("/v1/topics/events", json={"retention_ms": 600_000})
    report = run_rounds(client, retention)
    assert (report.deleted_messages, report.deleted_bytes) == (30, 30 * MESSAGE_BYTES)
    assert partitions_of(client, "events")[0]["log_start_offset"] == 30
    assert run_rounds(client, retention).deleted_messages == 0  # the rest is younger


def test_broker_defaults_apply_unless_the_topic_keeps_forever(database_url: str) -> None:
    settings = make_settings(database_url, retention_ms=600_000)
    with TestClient(create_app(settings)) as client:
        broker: Broker = client.app.state.broker  # type: ignore[attr-defined]
        create_topic(client, "defaulted")
        create_topic(client, "kept")
        client.patch("/v1/topics/kept", json={"retention_ms": -1})
        old = now_ms() - 3_600_000
        for topic in ("defaulted", "kept"):
            client.portal.call(broker.log.produce, topic, records(0, 5, timestamp=old), [0] * 5)  # type: ignore[union-attr]
        run_rounds(client, Retention(broker.store, settings))
        assert partitions_of(client, "defaulted")[0]["log_start_offset"] == 5
        assert partitions_of(client, "kept")[0]["log_start_offset"] == 0


def test_a_group_left_behind_by_retention_is_told(client: TestClient, broker: Broker, retention: Retention) -> None:
    create_topic(client, "orders")
    for first in range(0, 100, 10):  # ten produce requests: retention removes whole ones
        client.portal.call(broker.log.produce, "orders", records(first, 10), [0] * 10)  # type: ignore[union-attr]
    client.post("/v1/groups/slow/offsets", json={"offsets": [{"topic": "orders", "partition": 0, "offset": 10}]})
    client.post("/v1/groups/fast/offsets", json={"offsets": [{"topic": "orders", "partition": 0, "offset": 90}]})
    client.patch("/v1/topics/orders", json={"retention_bytes": 30 * MESSAGE_BYTES})
    run_rounds(client, retention)

    [slow] = client.get("/v1/groups/slow/offsets").json()["offsets"]
    assert (slow["offset"], slow["log_start_offset"], slow["below_log_start"], slow["lag"]) == (10, 70, True, 30)
    [fast] = client.get("/v1/groups/fast/offsets").json()["offsets"]
    assert (fast["below_log_start"], fast["lag"]) == (False, 10)
    resumed = client.get("/v1/topics/orders/partitions/0/messages", params={"offset": slow["offset"]})
    assert (resumed.status_code, error_code(resumed)) == (416, "OFFSET_OUT_OF_RANGE")


def test_a_deleted_topics_messages_are_purged_in_batches(
    client: TestClient, broker: Broker, retention: Retention, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention_service, "TOPIC_BATCH", 7)
    create_topic(client, "doomed", partitions=2)
    create_topic(client, "kept")
    client.portal.call(broker.log.produce, "doomed", records(0, 40), [n % 2 for n in range(40)])  # type: ignore[union-attr]
    client.portal.call(broker.log.produce, "kept", records(0, 3), [0] * 3)  # type: ignore[union-attr]
    doomed_id = topic_id(client, broker, "doomed")
    assert client.delete("/v1/topics/doomed").status_code == 204

    def stored_messages_of(topic_id: int) -> int:
        stored = select(func.coalesce(func.sum(messages.c.record_count), 0)).where(messages.c.topic_id == topic_id)
        return int(broker.store.read_sync(lambda conn: conn.execute(stored).scalar_one()))

    assert stored_messages_of(doomed_id) == 40  # unreachable already, removed by the job
    assert run_rounds(client, retention).purged_deleted_topic_messages == 40
    assert stored_messages_of(doomed_id) == 0
    purged = broker.store.read_sync(lambda conn: conn.execute(select(deleted_topics.c.purged)).scalar_one())
    assert purged is True
    assert run_rounds(client, retention).purged_deleted_topic_messages == 0
    assert [m["value"] for m in client.get("/v1/topics/kept/partitions/0/messages").json()["messages"]] == [
        "00000000",
        "00000001",
        "00000002",
    ]


@pytest.fixture
def running_jobs(database_url: str) -> Iterator[TestClient]:
    settings = make_settings(database_url, run_checker=True, retention_interval_seconds=0.1, lease_seconds=2)
    with TestClient(create_app(settings)) as client:
        yield client


def test_the_lease_holder_runs_retention_on_its_own(running_jobs: TestClient) -> None:
    client = running_jobs
    create_topic(client, "orders")
    client.patch("/v1/topics/orders", json={"retention_bytes": 5 * MESSAGE_BYTES})
    client.post("/v1/topics/orders/messages", json={"messages": [{"value": f"{n:08d}"} for n in range(20)]})
    deadline = time.monotonic() + 20
    while partitions_of(client, "orders")[0]["log_start_offset"] < 15:
        assert time.monotonic() < deadline, "the retention job did not run"
        time.sleep(0.05)
    status = client.get("/v1/checker").json()
    assert status["leader"] is not None and status["lease_expires_ms"] > now_ms() - 1000
    while client.get("/v1/checker").json()["last_retention_ms"] is None:
        assert time.monotonic() < deadline, "the retention round was not recorded"
        time.sleep(0.05)
