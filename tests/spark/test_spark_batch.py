"""``spark.read.format("halfmq")`` against a real broker: only committed messages, right shape."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.spark.helpers import BrokerApi
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.spark


def read(spark: Any, url: str, topic: str, **options: str) -> Any:
    reader = spark.read.format("halfmq").option("url", url).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def values(df: Any) -> list[str]:
    return sorted(row["value"] for row in df.select("value").collect())


def test_reads_only_committed_messages_of_both_transaction_modes(
    spark: Any, broker: BrokerProcess, api: BrokerApi
) -> None:
    topic = api.create_topic("modes", partitions=2)
    expected = api.produce_values(topic, 10, partitions=2, prefix="plain")

    committed_txn, aborted_txn = api.begin(), api.begin()
    api.produce_in(committed_txn, topic, 0, ["txn-ok-1", "txn-ok-2"])
    api.produce_in(aborted_txn, topic, 0, ["txn-aborted-1", "txn-aborted-2"])
    api.produce_in(committed_txn, topic, 1, ["txn-ok-3"])
    api.end(committed_txn, commit=True)
    api.end(aborted_txn, commit=False)
    expected += ["txn-ok-1", "txn-ok-2", "txn-ok-3"]

    committed_half = api.half(topic, "half-committed", partition=1)
    rolled_back_half = api.half(topic, "half-rolled-back", partition=1)
    api.half(topic, "half-never-resolved", partition=0)
    api.resolve_half(committed_half, commit=True)
    api.resolve_half(rolled_back_half, commit=False)
    expected.append("half-committed")
    expected += api.produce_values(topic, 4, partitions=2, prefix="after")

    df = read(spark, broker.url, topic)
    assert values(df) == sorted(expected)
    rows = df.collect()
    assert len({(r["partition"], r["offset"]) for r in rows}) == len(rows)
    assert {r["topic"] for r in rows} == {topic}


def test_an_open_transaction_holds_back_what_follows_it(spark: Any, broker: BrokerProcess, api: BrokerApi) -> None:
    topic = api.create_topic("open", partitions=2)
    api.produce(topic, [{"value": "before", "partition": 0}])
    txn = api.begin()
    api.produce_in(txn, topic, 0, ["in-open-txn"])
    api.produce(topic, [{"value": "after-open", "partition": 0}, {"value": "other-partition", "partition": 1}])

    # Partition 0 stops at the open transaction's first offset; partition 1 is not held back.
    assert values(read(spark, broker.url, topic)) == ["before", "other-partition"]
    api.end(txn, commit=True)
    assert values(read(spark, broker.url, topic)) == ["after-open", "before", "in-open-txn", "other-partition"]


def test_row_shape(spark: Any, broker: BrokerProcess, api: BrokerApi) -> None:
    topic = api.create_topic("shape")
    api.produce(
        topic,
        [
            {"key": "k1", "value": "a string", "headers": {"trace": "abc", "n": "1"}},
            {"key": None, "value": {"nested": [1, 2, {"x": "é"}]}},
            {"key": "k3", "value": 12.5},
            {"key": "k4", "value_base64": base64.b64encode("bytes ✓".encode()).decode()},
            {"key": "k5", "value_base64": base64.b64encode(b"\xffbin").decode()},
        ],
    )
    df = read(spark, broker.url, topic)
    assert df.columns == ["topic", "partition", "offset", "key", "value", "headers", "timestamp"]
    rows = df.orderBy("offset").collect()
    assert [r["offset"] for r in rows] == [0, 1, 2, 3, 4]
    assert [r["key"] for r in rows] == ["k1", None, "k3", "k4", "k5"]
    assert rows[0]["value"] == "a string" and rows[0]["headers"] == {"trace": "abc", "n": "1"}
    assert json.loads(rows[1]["value"]) == {"nested": [1, 2, {"x": "é"}]}
    assert rows[2]["value"] == "12.5"
    assert rows[3]["value"] == "bytes ✓"
    assert rows[4]["value"] == "\ufffdbin"
    assert rows[1]["headers"] == {}
    assert all(r["timestamp"] is not None and r["partition"] == 0 for r in rows)


def test_starting_and_ending_offsets_and_splitting(spark: Any, broker: BrokerProcess, api: BrokerApi) -> None:
    topic = api.create_topic("ranges", partitions=2)
    api.produce_values(topic, 40, partitions=2)  # 20 per partition: m-0, m-2, ... on p0
    assert read(spark, broker.url, topic, startingOffsets="latest").count() == 0
    df = read(
        spark,
        broker.url,
        topic,
        startingOffsets=json.dumps({topic: {"0": 5, "1": -2}}),
        endingOffsets=json.dumps({topic: {"0": 10, "1": 3}}),
    )
    expected = [(0, o) for o in range(5, 10)] + [(1, o) for o in range(3)]
    assert sorted((r["partition"], r["offset"]) for r in df.collect()) == expected
    assert len(read(spark, broker.url, topic, fetchMaxMessages="2").limit(3).collect()) == 3  # stops early
    split = read(spark, broker.url, topic, minPartitions="6", fetchMaxMessages="3")
    assert split.rdd.getNumPartitions() >= 6
    rows = split.collect()
    assert len(rows) == 40 and len({(r["partition"], r["offset"]) for r in rows}) == 40


def test_reads_several_topics_and_reports_group_progress(spark: Any, broker: BrokerProcess, api: BrokerApi) -> None:
    first, second = api.create_topic("multi"), api.create_topic("multi", partitions=2)
    api.produce_values(first, 3)
    api.produce_values(second, 4, partitions=2)
    df = read(spark, broker.url, f"{first},{second}", group="batch-readers")
    assert df.groupBy("topic").count().orderBy("topic").collect() == [(first, 3), (second, 4)]
    assert api.group_offsets("batch-readers") == {(first, 0): 3, (second, 0): 2, (second, 1): 2}


def test_clear_errors(spark: Any, broker: BrokerProcess, api: BrokerApi) -> None:
    with pytest.raises(Exception, match="TOPIC_NOT_FOUND") as missing:
        read(spark, broker.url, "no-such-topic").collect()
    assert "no-such-topic" in str(missing.value)
    with pytest.raises(Exception, match="cannot reach the halfmq broker"):
        read(spark, "http://127.0.0.1:9", "whatever", requestRetries="0").collect()
    with pytest.raises(Exception, match="startingOffsets"):
        read(spark, broker.url, api.create_topic("bad"), startingOffsets="{not json").collect()


def test_a_tag_option_keeps_only_matching_rows(spark: Any, broker: BrokerProcess, api: BrokerApi) -> None:
    topic = api.create_topic("tagged", partitions=1)
    api.produce(topic, [{"value": "a", "tag": "TagA"}, {"value": "b", "tag": "TagB"}, {"value": "none"}])
    assert values(read(spark, broker.url, topic, tag="TagA || TagB")) == ["a", "b"]
