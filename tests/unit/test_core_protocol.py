"""What crosses between the HTTP front and the core comes out as it went in."""

from __future__ import annotations

import asyncio
from typing import Any

from app.core.protocol import CALL, encode, read_frame
from half_store.domain.errors import AlreadyResolved, IllegalTransition
from half_store.domain.half_records import HalfMessage, Resolution
from half_store.domain.half_state import HalfState
from half_store.domain.records import (
    FetchResult,
    PackedList,
    PartitionState,
    Record,
    StoredMessage,
)
from half_store.services.half_messages import Prepared


def _through_the_socket(message: tuple[Any, ...]) -> tuple[Any, ...] | None:
    async def run() -> tuple[Any, ...] | None:
        reader = asyncio.StreamReader()
        reader.feed_data(b"".join(encode(message)))
        reader.feed_eof()
        return await read_frame(reader)

    return asyncio.run(run())


def test_a_produce_call_arrives_whole() -> None:
    records = PackedList(Record, (Record(f"k{n}", b'{"n": %d}' % n, 1, '{"h": "v"}', 1_700_000_000_000 + n) for n in range(100)))
    call = (CALL, 7, "log", "produce", ("orders", records, [n % 3 or None for n in range(100)]), {}, False)
    arrived = _through_the_socket(call)
    assert arrived == call
    assert arrived is not None
    first = arrived[4][1][0]
    assert isinstance(first, Record)
    assert (first.key, first.value, first.timestamp, first.properties) == ("k0", b'{"n": 0}', 1_700_000_000_000, None)


def test_results_and_errors_arrive_whole() -> None:
    resolution = Resolution(HalfState.COMMITTED, "orders", 2, 41, "checker", 1_700_000_000_123)
    half = HalfMessage("m-1", 5, "shop", "tx-1", "orders", 2, 1_700_000_000_000, 0, 1, None, resolution)
    stored = PackedList(StoredMessage, [StoredMessage("orders", 0, 3, 1, None, b'"v"', 1, None, "txn-9")])
    fetched = FetchResult(stored, 4, PartitionState(0, 0, 4, 4))
    for reply in ((1, True, Prepared(half, created=False)), (2, True, fetched)):
        assert _through_the_socket(reply) == reply
    arrived_fetch = _through_the_socket((2, True, fetched))
    assert arrived_fetch is not None
    assert arrived_fetch[2].messages[0].txn_id == "txn-9"
    arrived = _through_the_socket((3, False, AlreadyResolved("half message m-1 is already COMMITTED")))
    assert arrived is not None
    error = arrived[2]
    assert isinstance(error, AlreadyResolved)
    assert (error.status, error.code, error.message) == (409, "ALREADY_RESOLVED", "half message m-1 is already COMMITTED")


def test_a_closed_connection_reads_as_none() -> None:
    async def run() -> tuple[Any, ...] | None:
        reader = asyncio.StreamReader()
        reader.feed_data(b"".join(encode((CALL, 1)))[:5])  # cut off mid-frame
        reader.feed_eof()
        return await read_frame(reader)

    assert asyncio.run(run()) is None


def test_an_illegal_transition_arrives_as_what_it_is() -> None:
    refused = IllegalTransition("transaction txn-1 is ABORTED; it cannot become PREPARE_COMMIT")
    arrived = _through_the_socket((4, False, refused))
    assert arrived is not None
    error = arrived[2]
    assert isinstance(error, IllegalTransition)
    assert (error.status, error.code, error.message) == (409, "ALREADY_RESOLVED", refused.message)
