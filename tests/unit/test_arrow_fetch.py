"""The Arrow fetch answer without a database: big pages, odd Accept headers."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import orjson
import pyarrow as pa
import pyarrow.ipc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.api import arrow_fetch
from half_store.domain.constants import VALUE_BINARY, VALUE_JSON
from half_store.domain.records import FetchResult, PartitionState, StoredMessage


def page(count: int, value_bytes: int) -> FetchResult:
    messages = [
        StoredMessage(
            "t", 3, 100 + i, 1_700_000_000_000 + i, f"k{i}" if i % 2 else None,
            b'"' + b"x" * (value_bytes - 2) + b'"' if i % 3 else b"\x00\xff" * (value_bytes // 2),
            VALUE_JSON if i % 3 else VALUE_BINARY,
            f'{{"n":"{i}"}}' if i % 4 == 0 else None,
        )
        for i in range(count)
    ]
    return FetchResult(messages, 100 + count, PartitionState(3, 0, 200, 150))


def test_a_page_over_the_batch_size_arrives_whole_in_several_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arrow_fetch, "BATCH_VALUE_BYTES", 2500)
    result = page(10, 1000)
    reader = pa.ipc.open_stream(bytes(arrow_fetch.encode_page(result)))
    batches = list(reader)
    assert len(batches) == 5  # two 1,000-byte values fit in 2,500 bytes, a third does not
    table = pa.Table.from_batches(batches)
    assert table["offset"].to_pylist() == list(range(100, 110))
    assert table["key"].to_pylist() == [f"k{i}" if i % 2 else None for i in range(10)]
    assert table["headers"].to_pylist() == [[("n", str(i))] if i % 4 == 0 else [] for i in range(10)]
    assert [v is None for v in table["value"].to_pylist()] == [i % 3 == 0 for i in range(10)]
    assert reader.schema.metadata[b"halfmq.last_stable_offset"] == b"150"


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("APPLICATION/VND.APACHE.ARROW.STREAM", "arrow"),
        ("application/vnd.apache.arrow.stream;q=abc", "arrow"),  # an unreadable q counts as 1
        ("application/vnd.apache.arrow.stream;q=0.4, */*;q=0.5", "json"),
        ("application/vnd.apache.arrow.stream;q=0.5, */*;q=0.5", "arrow"),
        (" , ;;, application/vnd.apache.arrow.stream", "arrow"),
        ("application/vnd.apache.arrow.file", "json"),
    ],
)
def test_accept_headers(accept: str, expected: str) -> None:
    assert arrow_fetch.negotiate(accept) == expected


def test_an_arrow_answer_loads_no_arrow_library() -> None:
    """pyarrow and numpy were 44 MB of the front once it had made one answer."""
    program = textwrap.dedent(
        """
        import sys
        from app.api import arrow_fetch
        from half_store.domain.records import FetchResult, PartitionState, StoredMessage

        messages = [
            StoredMessage("t", 0, 0, 0, "k", b"1", 0, '{"h": "v"}'),
            StoredMessage("t", 0, 1, 0, None, b"x", 1, None),
        ]
        arrow_fetch.encode_page(FetchResult(messages, 2, PartitionState(0, 0, 2, 2)))
        print(sorted(name for name in ("pyarrow", "numpy") if name in sys.modules))
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
stored_messages = st.lists(
    st.builds(
        lambda offset, timestamp, key, value, binary, headers: StoredMessage(
            "topic-ü", 7, offset, timestamp, key, value if binary else orjson.dumps(value.decode("latin-1")),
            VALUE_BINARY if binary else VALUE_JSON, orjson.dumps(headers).decode() if headers else None,
        ),
        st.integers(0, 2**63 - 1),
        st.integers(-(2**62), 2**62),
        st.none() | text,
        st.binary(max_size=20),
        st.booleans(),
        st.dictionaries(text, text, max_size=3),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(messages=stored_messages, batch_value_bytes=st.sampled_from([10, 64 * 1024 * 1024]))
def test_any_page_reads_back_in_pyarrow_as_its_messages(messages: list[StoredMessage], batch_value_bytes: int) -> None:
    """Whatever the keys, values and headers, pyarrow's full validation passes and every row is its message."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(arrow_fetch, "BATCH_VALUE_BYTES", batch_value_bytes)
        stream = arrow_fetch.encode_page(FetchResult(messages, 99, PartitionState(7, 0, 120, 110)))
    reader = pa.ipc.open_stream(stream)
    table = reader.read_all()
    table.validate(full=True)
    assert reader.schema.metadata == {
        b"halfmq.next_offset": b"99", b"halfmq.high_watermark": b"120", b"halfmq.last_stable_offset": b"110"
    }
    rows = table.set_column(3, "timestamp", table["timestamp"].cast(pa.int64())).to_pylist()
    assert rows == [
        {
            "topic": m.topic, "partition": m.partition, "offset": m.offset, "timestamp": m.timestamp, "key": m.key,
            "value": m.value.decode() if m.value_kind == VALUE_JSON else None,
            "value_base64": m.value if m.value_kind == VALUE_BINARY else None,
            "headers": list(orjson.loads(m.headers).items()) if m.headers else [],
        }
        for m in messages
    ]
