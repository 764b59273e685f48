"""The task-side reading loop against a real broker, without Spark: gaps, range ends, page limits."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_ingest.offsets import OffsetRange
from spark_ingest.options import SourceOptions
from spark_ingest.reading import read_range
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


def test_a_broker_without_pyarrow_is_read_through_its_json_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shadow = tmp_path / "without-pyarrow"
    shadow.mkdir()
    (shadow / "pyarrow.py").write_text("raise ImportError('pyarrow is not installed here')\n")
    monkeypatch.setenv("PYTHONPATH", f"{shadow}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    with BrokerProcess(f"sqlite:///{tmp_path}/broker.db", max_fetch_messages=7) as broker:
        api = BrokerApi(broker.url)
        topic = api.create_topic("json-only")
        values = api.produce_values(topic, 12)
        arrow_only = api.http.get(
            f"/v1/topics/{topic}/partitions/0/messages", headers={"Accept": "application/vnd.apache.arrow.stream"}
        )
        assert (arrow_only.status_code, arrow_only.json()["error"]["code"]) == (406, "ARROW_UNAVAILABLE")

        options = SourceOptions.parse({"url": api.url, "topic": topic})
        rows = [row for batch in read_range(options, OffsetRange(topic, 0, 2, 12)) for row in batch.to_pylist()]
        assert [(r["offset"], r["value"]) for r in rows] == list(enumerate(values))[2:]
        api.http.close()
