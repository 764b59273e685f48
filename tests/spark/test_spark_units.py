"""Pure tests of spark_ingest's offset logic, options and row conversion (no Spark, no broker)."""

from __future__ import annotations

import base64
import itertools

import orjson
import pyarrow as pa
import pyarrow.ipc
import pytest

from half_store.domain.constants import VALUE_BINARY, VALUE_JSON
from half_store.domain.records import FetchResult, StoredMessage
from half_store.domain.records import PartitionState as StoredPartitionState
from spark_ingest.client import PartitionState, TopicMetadata
from spark_ingest.job import concise_error, parse_args
from spark_ingest.offsets import (
    OffsetRange,
    OffsetSpec,
    OptionError,
    limit_end,
    offsets_from_json,
    offsets_to_json,
    parse_offset_spec,
    parse_topics,
    plan_ranges,
    resolve_end,
    resolve_start,
)
from spark_ingest.options import SourceOptions
from spark_ingest.progress import IngestStats
from spark_ingest.rows import ARROW_SCHEMA, from_arrow_fetch, to_record_batch, value_text

META = [
    TopicMetadata("a", (PartitionState(0, 0, 10, 8), PartitionState(1, 5, 20, 20))),
    TopicMetadata("b", (PartitionState(0, 0, 0, 0),)),
]


def test_topics_are_a_comma_list_without_duplicates() -> None:
    assert parse_topics(" a, b ,a,,") == ("a", "b")
    with pytest.raises(OptionError, match="'topic' is required"):
        parse_topics(" , ")


def test_offset_specs() -> None:
    assert parse_offset_spec(None, option="s", default="earliest", topics=["a"]).kind == "earliest"
    assert parse_offset_spec("LATEST", option="s", default="earliest", topics=["a"]).kind == "latest"
    spec = parse_offset_spec('{"a": {"0": 3, "1": -1}}', option="s", default="earliest", topics=["a"])
    assert spec.specific == {("a", 0): 3, ("a", 1): -1}
    with pytest.raises(OptionError, match="not in option 'topic'"):
        parse_offset_spec('{"zz": {"0": 1}}', option="s", default="earliest", topics=["a"])
    with pytest.raises(OptionError, match="earliest"):
        parse_offset_spec("soonest", option="s", default="earliest", topics=["a"])
    with pytest.raises(OptionError, match=">= -2"):
        parse_offset_spec('{"a": {"0": -3}}', option="s", default="earliest", topics=["a"])


def test_resolve_start_and_end() -> None:
    assert resolve_start(OffsetSpec.earliest(), META) == {("a", 0): 0, ("a", 1): 5, ("b", 0): 0}
    # latest is the last stable offset, never the high watermark
    assert resolve_start(OffsetSpec.latest(), META) == {("a", 0): 8, ("a", 1): 20, ("b", 0): 0}
    specific = OffsetSpec("specific", {("a", 0): 9, ("a", 1): -2})
    start = resolve_start(specific, META)
    assert start == {("a", 0): 9, ("a", 1): 5, ("b", 0): 0}
    with pytest.raises(OptionError, match="before startingOffsets"):
        resolve_end(OffsetSpec.latest(), META, start)  # a/0 LSO 8 < start 9
    end = resolve_end(OffsetSpec("specific", {("a", 1): 12}), META, resolve_start(OffsetSpec.earliest(), META))
    assert end == {("a", 0): 8, ("a", 1): 12, ("b", 0): 0}


def test_resolve_start_detects_data_loss_and_offsets_past_the_end() -> None:
    with pytest.raises(OptionError, match="failOnDataLoss"):
        resolve_start(OffsetSpec("specific", {("a", 1): 2}), META)
    assert resolve_start(OffsetSpec("specific", {("a", 1): 2}), META, fail_on_data_loss=False)[("a", 1)] == 5
    with pytest.raises(OptionError, match="past the end"):
        resolve_start(OffsetSpec("specific", {("a", 0): 11}), META)
    with pytest.raises(OptionError, match="do not exist"):
        resolve_start(OffsetSpec("specific", {("a", 7): 0}), META)


def test_offsets_json_round_trip_is_sorted() -> None:
    offsets = {("b", 0): 1, ("a", 10): 2, ("a", 2): 3}
    assert list(offsets_to_json(offsets)) == ["a", "b"]
    assert offsets_from_json(offsets_to_json(offsets)) == offsets


def test_limit_end_shares_the_limit_by_backlog() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    target = {("t", 0): 300, ("t", 1): 200, ("t", 2): 5}
    assert limit_end(start, target, None) == target
    end = limit_end(start, target, 40)
    assert sum(end[k] - start[k] for k in start) == 40
    assert end == {("t", 0): 30, ("t", 1): 110, ("t", 2): 5}  # 3:1 backlog, 3:1 share
    # a limit smaller than the number of partitions still makes progress
    assert sum(v - start[k] for k, v in limit_end(start, target, 1).items()) == 1
    # a target behind the start never moves the start backwards
    assert limit_end({("t", 0): 9}, {("t", 0): 4}, 10) == {("t", 0): 9}


def test_plan_ranges_splits_to_min_partitions() -> None:
    start = {("t", 0): 0, ("t", 1): 50, ("u", 0): 3}
    end = {("t", 0): 100, ("t", 1): 50, ("u", 0): 13}
    assert plan_ranges(start, end) == [OffsetRange("t", 0, 0, 100), OffsetRange("u", 0, 3, 13)]
    ranges = plan_ranges(start, end, min_partitions=4)
    assert len(ranges) >= 4
    for key in (("t", 0), ("u", 0)):
        pieces = sorted((r.start, r.end) for r in ranges if (r.topic, r.partition) == key)
        assert pieces[0][0] == start[key] and pieces[-1][1] == end[key]
        assert all(a[1] == b[0] for a, b in itertools.pairwise(pieces))  # contiguous, no overlap


def test_value_text_mapping() -> None:
    assert value_text({"value": "plain"}) == "plain"
    assert value_text({"value": {"a": [1, "é"]}}) == '{"a":[1,"é"]}'
    assert value_text({"value": 42}) == "42"
    assert value_text({"value": None}) == "null"
    assert value_text({"value_base64": base64.b64encode("héllo".encode()).decode()}) == "héllo"
    assert value_text({"value_base64": base64.b64encode(b"\xff\x00ok").decode()}) == "\ufffd\x00ok"


def test_record_batch_matches_the_declared_schema() -> None:
    batch = to_record_batch(
        "t",
        3,
        [
            {"offset": 7, "timestamp": 1_700_000_000_123, "key": "k", "value": {"x": 1}, "headers": {"h": "v"}},
            {"offset": 9, "timestamp": 1_700_000_000_124, "key": None, "value": "s", "headers": {}},
        ],
    )
    assert batch.schema.equals(ARROW_SCHEMA)
    rows = batch.to_pylist()
    assert [r["offset"] for r in rows] == [7, 9]
    assert rows[0]["headers"] == [("h", "v")] and rows[1]["headers"] == []
    assert rows[0]["timestamp"].timestamp() == pytest.approx(1_700_000_000.123)


def test_arrow_answer_and_json_answer_give_the_same_rows() -> None:
    # The broker's two encodings of the same stored messages, through the source's two conversions.
    from app.api.arrow_fetch import encode_page
    from app.api.encoding import message_json

    stored = [
        ("k", b'"plain"', VALUE_JSON, '{"h":"v","n":"1"}'),
        (None, b'"quote \\" back\\\\ new\\n line \xc3\xa9"', VALUE_JSON, None),  # a string with escapes
        ("", b'{"a":[1,"\xc3\xa9",null]}', VALUE_JSON, None),
        (None, b"42", VALUE_JSON, None),
        (None, b"null", VALUE_JSON, None),
        (None, b'""', VALUE_JSON, None),
        ("b", "h\u00e9llo \u2713".encode(), VALUE_BINARY, None),
        ("c", b"\xff\x00ok", VALUE_BINARY, None),
        ("d", b"", VALUE_BINARY, '{"e":""}'),
    ]
    messages = [StoredMessage("t", 3, 10 + i, 1_700_000_000_000 + i, *row) for i, row in enumerate(stored)]
    page = FetchResult(messages, 40, StoredPartitionState(3, 0, 40, 40))
    with pa.ipc.open_stream(bytes(encode_page(page))) as reader:
        from_arrow = pa.Table.from_batches([from_arrow_fetch(batch) for batch in reader])
    as_json = [orjson.loads(orjson.dumps(message_json(m))) for m in messages]
    from_json = pa.Table.from_batches([to_record_batch("t", 3, as_json)])
    assert from_arrow.schema.equals(ARROW_SCHEMA)
    assert from_arrow.to_pylist() == from_json.to_pylist()
    assert from_arrow["value"].to_pylist() == [
        "plain", 'quote " back\\ new\n line é', '{"a":[1,"é",null]}', "42", "null", "", "héllo ✓", "\ufffd\x00ok", ""
    ]


def test_source_options() -> None:
    options = SourceOptions.parse(
        {"URL": "http://b:1/", "topic": "a,b", "maxOffsetsPerTrigger": "10", "fetchMaxMessages": "50000"}
    )
    assert options.url == "http://b:1" and options.topics == ("a", "b")
    assert options.max_records_per_trigger == 10
    assert options.fetch_max_messages == 10_000  # the broker's cap
    with pytest.raises(OptionError, match="'url' is required"):
        SourceOptions.parse({"topic": "a"})
    with pytest.raises(OptionError, match="positive integer"):
        SourceOptions.parse({"url": "http://b", "topic": "a", "minPartitions": "0"})


def _report(batch: int, rows: int, start: str | None, end: str, latest: str) -> dict[str, object]:
    return {
        "runId": "run",
        "batchId": batch,
        "numInputRows": rows,
        "processedRowsPerSecond": 10.0,
        "sources": [{"startOffset": start, "endOffset": end, "latestOffset": latest}],
    }


def test_ingest_stats_follow_spark_progress_reports() -> None:
    stats = IngestStats(log_start={("t", 0): 0})
    assert stats.add(_report(0, 5, None, '{"t": {"0": 5}}', '{"t": {"0": 9}}'))
    assert not stats.add(_report(0, 5, None, '{"t": {"0": 5}}', '{"t": {"0": 9}}'))  # seen already
    assert stats.rows == 5 and stats.lag() == 4 and stats.first_start == {("t", 0): 0}
    assert stats.add(_report(1, 3, '{"t": {"0": 5}}', '{"t": {"0": 9}}', '{"t": {"0": 9}}'))
    assert (stats.rows, stats.batches, stats.lag()) == (8, 2, 0)
    # an idle trigger (nothing new) is not a batch
    assert not stats.add(_report(2, 0, '{"t": {"0": 9}}', '{"t": {"0": 9}}', '{"t": {"0": 9}}'))


def test_job_arguments_and_error_extraction() -> None:
    config = parse_args(["--url", "http://b:1/", "--topic", "a,b", "--output", "/data/out/", "--conf", "k=v"])
    assert config.checkpoint == "/data/out/_checkpoint" and config.trigger == "available-now"
    assert config.source_options() == {"url": "http://b:1", "topic": "a,b", "startingOffsets": "earliest"}
    assert config.spark_conf == {"k": "v"}
    wrapped = (
        "Traceback ...\n  File x\n"
        "spark_ingest.client.BrokerUnreachable: cannot reach the halfmq broker\n\tat org.apache..."
    )
    assert concise_error(wrapped) == "spark_ingest.client.BrokerUnreachable: cannot reach the halfmq broker"
    with pytest.raises(SystemExit):
        parse_args(["--url", "u", "--topic", "t", "--output", "o", "--starting-offsets", "{bad"])


def test_stream_planning_caps_at_stable_offsets_limits_and_picks_up_new_partitions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    from spark_ingest import datasource

    metadata = [TopicMetadata("a", (PartitionState(0, 0, 50, 40), PartitionState(1, 0, 10, 10)))]
    monkeypatch.setattr(datasource, "_metadata", lambda options: metadata)
    reader = datasource.HalfmqStreamReader(SourceOptions.parse({"url": "http://b", "topic": "a"}))

    assert reader.initialOffset() == {"a": {"0": 0, "1": 0}}
    # never past the last stable offset (40), even though the high watermark is 50
    assert reader.latestOffset({"a": {"0": 0, "1": 0}}, ReadAllAvailable()) == {"a": {"0": 40, "1": 10}}
    assert reader.latestOffset({"a": {"0": 0, "1": 0}}, ReadMaxRows(10)) == {"a": {"0": 8, "1": 2}}

    reader.prepareForTriggerAvailableNow()
    grown = (PartitionState(0, 0, 90, 90), PartitionState(1, 0, 10, 10), PartitionState(2, 3, 9, 9))
    metadata[0] = TopicMetadata("a", grown)
    # a new partition enters the offset log at its log start first, with no data
    with_new = {"a": {"0": 40, "1": 10, "2": 3}}
    assert reader.latestOffset({"a": {"0": 40, "1": 10}}, ReadAllAvailable()) == with_new
    # availableNow: the target stays where it was when the query started
    assert reader.latestOffset(with_new, ReadAllAvailable()) == with_new

    planned = reader.partitions({"a": {"0": 0, "1": 10}}, {"a": {"0": 40, "1": 10}})
    assert [p.offset_range for p in planned] == [OffsetRange("a", 0, 0, 40)]  # type: ignore[attr-defined]


def test_source_options_take_a_tag_filter() -> None:
    assert SourceOptions.parse({"url": "http://b", "topic": "a", "tag": " TagA || TagB "}).tag == "TagA || TagB"
    assert SourceOptions.parse({"url": "http://b", "topic": "a"}).tag is None
