"""The task-side reading loop against a real broker, without Spark: gaps, range ends, page limits."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc
import pytest

from spark_ingest.arrow_fetch import ACCEPT_ARROW_OR_JSON, ARROW_STREAM
from spark_ingest.offsets import OffsetRange
from spark_ingest.options import SourceOptions
from spark_ingest.reading import read_range
from spark_ingest.rows import ARROW_SCHEMA, from_arrow_fetch, to_record_batch
from tests.spark.helpers import BrokerApi
from tests.support.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def small_pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, BrokerApi]]:
    """A broker that serves at most 7 messages per fetch."""
    directory: Path = tmp_path_factory.mktemp("small-pages")
    with BrokerProcess(f"sqlite:///{directory}/broker.db", max_fetch_messages=7) as broker:
        client = BrokerApi(broker.url)
        yield broker, client
        client.http.close()


def offsets_read(api: BrokerApi, topic: str, start: int, end: int, fetch_max_messages: int = 5000) -> list[int]:
    options = SourceOptions.parse({"url": api.url, "topic": topic, "fetchMaxMessages": str(fetch_max_messages)})
    batches = read_range(options, OffsetRange(topic, 0, start, end))
    return [offset for batch in batches for offset in batch.column("offset").to_pylist()]


def test_reading_skips_gaps_and_stops_at_the_range_end(small_pages: tuple[BrokerProcess, BrokerApi]) -> None:
    _, api = small_pages
    topic = api.create_topic("gaps")
    api.produce_values(topic, 10)  # offsets 0..9
    aborted = api.begin()
    api.produce_in(aborted, topic, 0, [f"aborted-{i}" for i in range(20)])  # 10..29, then a marker at 30
    api.end(aborted, commit=False)
    api.produce_values(topic, 10, prefix="after")  # 31..40
    end = api.topic(topic)["partitions"][0]["last_stable_offset"]
    assert end == 41

    # The page size (5000) is above the broker's limit (7): the reader shrinks it and carries on.
    assert offsets_read(api, topic, 0, end) == list(range(10)) + list(range(31, 41))
    # A range ending inside the aborted run, or between two pages, is cut exactly.
    assert offsets_read(api, topic, 3, 15, fetch_max_messages=4) == list(range(3, 10))
    assert offsets_read(api, topic, 25, 35, fetch_max_messages=2) == list(range(31, 35))
    assert offsets_read(api, topic, 12, 30) == []


def test_reading_rides_out_a_broker_restart(small_pages: tuple[BrokerProcess, BrokerApi]) -> None:
    broker, api = small_pages
    topic = api.create_topic("restart")
    api.produce_values(topic, 40)
    options = SourceOptions.parse({"url": api.url, "topic": topic, "fetchMaxMessages": "7"})
    batches = read_range(options, OffsetRange(topic, 0, 0, 40))
    offsets = next(batches).column("offset").to_pylist()

    broker.kill()  # SIGKILL mid-read; it comes back on the same port a second later
    restart = threading.Timer(1.0, broker.start)
    restart.start()
    offsets += [offset for batch in batches for offset in batch.column("offset").to_pylist()]
    restart.join()
    assert offsets == list(range(40))


def test_a_json_answer_gives_the_rows_an_arrow_answer_gives(small_pages: tuple[BrokerProcess, BrokerApi]) -> None:
    """A broker older than the Arrow fetch answers JSON: the source turns that into the very same rows."""
    _, api = small_pages
    topic = api.create_topic("json-or-arrow")
    api.produce(
        topic,
        [
            {"value": "text", "key": "k", "headers": {"h": "v"}},
            {"value": {"nested": [1, 2.5, None]}},
            {"value_base64": base64.b64encode(b"\x00\xff raw").decode()},
            {"value": None, "headers": {"a": "1", "b": "2"}},
        ],
    )
    path = f"/v1/topics/{topic}/partitions/0/messages"
    as_json = api.http.get(path, headers={"Accept": "application/json"}).json()
    as_arrow = api.http.get(path, headers={"Accept": ACCEPT_ARROW_OR_JSON})
    assert as_arrow.headers["content-type"] == ARROW_STREAM
    arrow_batches = [from_arrow_fetch(batch) for batch in pa.ipc.open_stream(as_arrow.content)]
    from_json = to_record_batch(topic, 0, as_json["messages"])
    assert from_json.schema == ARROW_SCHEMA
    assert from_json.to_pylist() == pa.Table.from_batches(arrow_batches).to_pylist()
    assert [row["value"] for row in from_json.to_pylist()] == ["text", '{"nested":[1,2.5,null]}', "\x00\ufffd raw", "null"]
