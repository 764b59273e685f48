"""The Arrow fetch answer without a database: big pages, odd Accept headers."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pyarrow.ipc
import pytest

from app.api import arrow_fetch
from half_store.domain.constants import VALUE_BINARY, VALUE_JSON
from half_store.domain.errors import ArrowUnavailable
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
    assert arrow_fetch.negotiate(accept, arrow_available=lambda: True) == expected


def test_pyarrow_is_not_imported_for_a_json_fetch() -> None:
    def unavailable() -> bool:
        raise AssertionError("asked for pyarrow although the client wants JSON")

    assert arrow_fetch.negotiate("application/json, */*", arrow_available=unavailable) == "json"
    with pytest.raises(ArrowUnavailable):
        arrow_fetch.negotiate("application/vnd.apache.arrow.stream", arrow_available=lambda: False)


def test_an_arrow_answer_does_not_load_pyarrow_compute() -> None:
    """Its kernels cost the front 13 MB (one cast) to 50 MB (one subtract): the answer is built without them."""
    program = (
        "import sys\n"
        "from app.api import arrow_fetch\n"
        "from tests.unit.test_arrow_fetch import page\n"
        "arrow_fetch.encode_page(page(20, 100))\n"
        "print('pyarrow.compute' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"
