"""A fetched page kept as columns reads, pickles and turns into Arrow as the messages it stands for."""

from __future__ import annotations

import pickle

import orjson
import pyarrow as pa
import pyarrow.ipc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.api import arrow_fetch
from half_store.domain.constants import VALUE_BINARY, VALUE_JSON
from half_store.domain.message_page import MessagePage, PageBuilder
from half_store.domain.records import FetchResult, PartitionState, Record, StoredMessage
from half_store.storage import record_batch

texts = st.text(max_size=8)
values = st.text(max_size=20).map(str.encode)  # JSON values are UTF-8 text; binary ones may be too
# One stored row: a lone message, or a record batch read from its ``first`` record on.
lone = st.tuples(st.just("row"), st.none() | texts, values, st.sampled_from([VALUE_JSON, VALUE_BINARY]),
                 st.none() | st.just('{"h":"v"}'), st.none() | st.just("txn-1"))
batch = st.tuples(
    st.just("batch"),
    st.lists(st.tuples(st.none() | texts, values, st.sampled_from([VALUE_JSON, VALUE_BINARY]),
                       st.none() | st.just('{"a":"b"}')), min_size=2, max_size=6),
    st.integers(0, 3),
    st.none() | st.just("txn-2"),
)


def build(rows: list[tuple[object, ...]]) -> tuple[MessagePage, list[StoredMessage]]:
    builder = PageBuilder("orders", 3)
    expected: list[StoredMessage] = []
    offset = 10
    for row in rows:
        if row[0] == "row":
            _, key, value, kind, headers, txn_id = row
            builder.add(offset, 1000 + offset, key, value, kind, headers, txn_id)
            expected.append(StoredMessage("orders", 3, offset, 1000 + offset, key, value, kind, headers, txn_id))
            offset += 1
            continue
        _, records, first, txn_id = row
        stored = [Record(k, v, kind, h, 1000 + offset + i) for i, (k, v, kind, h) in enumerate(records)]
        first = min(first, len(stored) - 1)
        c = record_batch.decode_columns(record_batch.encode(stored), first)
        builder.add_columns(offset + first, c.timestamps, c.keys, c.values, c.value_lengths, c.kinds, c.headers, txn_id)
        expected.extend(
            StoredMessage("orders", 3, offset + i, r.timestamp, r.key, r.value, r.value_kind, r.headers, txn_id)
            for i, r in enumerate(stored) if i >= first
        )
        offset += len(stored)
    return builder.page(), expected


@given(st.lists(lone | batch, max_size=8))
def test_a_page_reads_pickles_and_filters_as_its_messages(rows: list[tuple[object, ...]]) -> None:
    page, expected = build(rows)
    assert len(page) == len(expected)
    assert list(page) == expected
    assert [page[i] for i in range(-len(page), len(page))] == expected + expected
    assert list(page[1:-1]) == expected[1:-1]
    assert list(pickle.loads(pickle.dumps(page))) == expected
    assert list(page.without({"txn-1"})) == [m for m in expected if m.txn_id != "txn-1"]
    with pytest.raises(IndexError):
        page[len(page)]


@settings(max_examples=60, deadline=None)  # the first example imports Arrow compute kernels
@given(st.lists(lone | batch, min_size=1, max_size=8), st.integers(1, 120))
def test_the_arrow_answer_of_a_page_is_its_messages_in_every_cut(rows: list[tuple[object, ...]], batch_bytes: int) -> None:
    page, expected = build(rows)
    original = arrow_fetch.BATCH_VALUE_BYTES
    arrow_fetch.BATCH_VALUE_BYTES = batch_bytes  # small: pages are cut into several record batches
    try:
        stream = arrow_fetch.encode_page(FetchResult(page, 99, PartitionState(3, 0, 99, 99)))
    finally:
        arrow_fetch.BATCH_VALUE_BYTES = original
    table = pa.ipc.open_stream(stream).read_all()
    assert table["offset"].to_pylist() == [m.offset for m in expected]
    assert table["partition"].to_pylist() == [3] * len(expected)
    assert table["topic"].to_pylist() == ["orders"] * len(expected)
    assert table["timestamp"].cast(pa.int64()).to_pylist() == [m.timestamp for m in expected]
    assert table["key"].to_pylist() == [m.key for m in expected]
    json_values = [m.value.decode() if m.value_kind == VALUE_JSON else None for m in expected]
    binary_values = [m.value if m.value_kind == VALUE_BINARY else None for m in expected]
    assert table["value"].to_pylist() == json_values
    assert table["value_base64"].to_pylist() == binary_values
    headers = [list(orjson.loads(m.headers).items()) if m.headers else [] for m in expected]
    assert table["headers"].to_pylist() == headers


def test_a_plain_list_of_messages_encodes_as_its_page_would() -> None:
    messages = [StoredMessage("t", 0, 5, 1, "k", b'"\xc3\xa9"', VALUE_JSON, None)]
    as_list = arrow_fetch.encode_page(FetchResult(messages, 6, PartitionState(0, 0, 6, 6)))
    as_page = arrow_fetch.encode_page(FetchResult(MessagePage.of("t", 0, messages), 6, PartitionState(0, 0, 6, 6)))
    assert as_list == as_page
    assert pa.ipc.open_stream(as_list).read_all()["value"].to_pylist() == ['"é"']
