"""``spark.readStream.format("halfmq")`` into Parquet with a checkpoint, against a real broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.helpers import BrokerApi
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.spark


def ingest(spark: Any, url: str, topic: str, out: Path, **options: str) -> list[Any]:
    """One availableNow run into ``out``; returns the run's progress reports."""
    reader = spark.readStream.format("halfmq").option("url", url).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(out / "data"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive, "availableNow query did not finish"
    assert query.exception() is None
    return list(query.recentProgress)


def written(spark: Any, out: Path) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of every row in the output, read through Spark's sink log."""
    rows = spark.read.parquet(str(out / "data")).select("partition", "offset", "value").collect()
    return sorted((r["partition"], r["offset"], r["value"]) for r in rows)


def test_ingests_each_message_once_across_reruns_and_new_data(
    spark: Any, broker: BrokerProcess, api: BrokerApi, tmp_path: Path
) -> None:
    topic = api.create_topic("stream", partitions=2)
    first = api.produce_values(topic, 50, partitions=2, prefix="first")

    progress = ingest(spark, broker.url, topic, tmp_path, maxRecordsPerTrigger="12", group="ingest")
    batches = [p for p in progress if p["numInputRows"] > 0]
    assert len(batches) >= 5 and all(p["numInputRows"] <= 12 for p in batches)
    assert sorted(v for _, _, v in written(spark, tmp_path)) == sorted(first)
    assert api.group_offsets("ingest") == {(topic, 0): 25, (topic, 1): 25}

    # A rerun with nothing new writes nothing.
    before = written(spark, tmp_path)
    ingest(spark, broker.url, topic, tmp_path, maxRecordsPerTrigger="12")
    assert written(spark, tmp_path) == before

    # New data is picked up, once.
    second = api.produce_values(topic, 7, partitions=2, prefix="second")
    ingest(spark, broker.url, topic, tmp_path)
    rows = written(spark, tmp_path)
    assert sorted(v for _, _, v in rows) == sorted(first + second)
    assert len({(p, o) for p, o, _ in rows}) == len(rows)


def test_stops_at_an_open_transaction_and_reads_it_once_committed(
    spark: Any, broker: BrokerProcess, api: BrokerApi, tmp_path: Path
) -> None:
    topic = api.create_topic("stream-txn")
    api.produce(topic, [{"value": "before"}])
    txn = api.begin()
    api.produce_in(txn, topic, 0, ["in-txn-1", "in-txn-2"])
    api.produce(topic, [{"value": "after"}])
    aborted = api.begin()
    api.produce_in(aborted, topic, 0, ["aborted"])

    ingest(spark, broker.url, topic, tmp_path)
    # Reading up to the high watermark would have skipped the transaction for ever.
    assert [v for _, _, v in written(spark, tmp_path)] == ["before"]

    api.end(txn, commit=True)
    api.end(aborted, commit=False)
    ingest(spark, broker.url, topic, tmp_path, maxRecordsPerTrigger="1")
    assert [v for _, _, v in sorted(written(spark, tmp_path))] == ["before", "in-txn-1", "in-txn-2", "after"]


def test_half_messages_appear_only_when_committed(
    spark: Any, broker: BrokerProcess, api: BrokerApi, tmp_path: Path
) -> None:
    topic = api.create_topic("stream-half")
    pending = api.half(topic, "pending")
    doomed = api.half(topic, "doomed")
    api.half(topic, "never")
    api.produce(topic, [{"value": "plain"}])
    ingest(spark, broker.url, topic, tmp_path)
    assert [v for _, _, v in written(spark, tmp_path)] == ["plain"]

    api.resolve_half(pending, commit=True)
    api.resolve_half(doomed, commit=False)
    ingest(spark, broker.url, topic, tmp_path)
    assert sorted(v for _, _, v in written(spark, tmp_path)) == ["pending", "plain"]
