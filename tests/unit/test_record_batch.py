"""The stored form of a record batch: every record comes back as it went in, and a damaged one is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from half_store.domain.constants import VALUE_BINARY, VALUE_JSON
from half_store.domain.errors import InternalError
from half_store.domain.records import Record
from half_store.storage import record_batch

texts = st.text()
records = st.builds(
    Record,
    key=st.none() | texts,
    value=st.binary(),
    value_kind=st.sampled_from([VALUE_JSON, VALUE_BINARY]),
    headers=st.none() | texts,
    timestamp=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    properties=st.none() | texts,
)


@given(st.lists(records, min_size=2, max_size=40))
def test_a_batch_decodes_to_the_records_it_was_made_of(batch: list[Record]) -> None:
    stored = record_batch.encode(batch)
    assert record_batch.decode(stored) == batch
    columns = record_batch.decode_columns(stored)
    assert columns.value_list() == [r.value for r in batch]
    assert list(columns.timestamps) == [r.timestamp for r in batch]


def test_the_stored_form_is_little_endian_and_versioned() -> None:
    stored = record_batch.encode([Record("k", b"1", VALUE_JSON, None, 1), Record(None, b"22", VALUE_BINARY, "{}", 2)])
    assert stored[:5] == bytes([1, 2, 0, 0, 0])  # version 1, two records
    assert stored[5:21] == (1).to_bytes(8, "little") + (2).to_bytes(8, "little")
    layout = record_batch.HEADER_BYTES + 2 * record_batch.BYTES_PER_RECORD
    assert stored[layout:] == b"k" + b"1" + b"22" + b"{}"  # keys, values, headers


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda b: b[:3], "shorter than its header"),
        (lambda b: bytes([9]) + b[1:], "layout version 9"),
        (lambda b: b[:20], "shorter than its record count"),
        (lambda b: b + b"x", "does not match its lengths"),
        (lambda b: b[:-1], "does not match its lengths"),
    ],
)
def test_a_damaged_batch_is_an_internal_error_not_wrong_records(damage, says) -> None:  # type: ignore[no-untyped-def]
    stored = record_batch.encode([Record("k", b"1", VALUE_JSON, None, 1), Record("l", b"2", VALUE_JSON, None, 2)])
    with pytest.raises(InternalError, match=says):
        record_batch.decode(damage(stored))


@given(st.lists(records, min_size=2, max_size=20), st.integers(0, 20), st.integers(0, 20))
def test_a_window_of_a_batch_is_those_records(batch: list[Record], first: int, stop: int) -> None:
    first = min(first, len(batch))
    window = record_batch.decode_columns(record_batch.encode(batch), first, max(first, stop))
    expected = batch[first : max(first, stop)]
    assert window.value_list() == [r.value for r in expected]
    assert window.values == b"".join(r.value for r in expected)
    assert list(window.keys) == [r.key for r in expected]
    assert list(window.headers) == [r.headers for r in expected]
    assert list(window.timestamps) == [r.timestamp for r in expected]
    assert list(window.kinds) == [r.value_kind for r in expected]
