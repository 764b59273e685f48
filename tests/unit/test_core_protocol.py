"""What crosses between the HTTP front and the core comes out as it went in."""

from __future__ import annotations

import asyncio
from typing import Any

from app.core.protocol import CALL, encode, read_frame
from app.domain import FetchResult, PartitionState, Record, StoredMessage
from app.errors import AlreadyResolved
from app.log_service import RoutedRecord
from half_store.records import HalfMessage, Resolution
from half_store.service import Prepared
from half_store.states import HalfState


def _through_the_socket(message: tuple[Any, ...]) -> tuple[Any, ...] | None:
    async def run() -> tuple[Any, ...] | None:
        reader = asyncio.StreamReader()
        reader.feed_data(encode(message))
        reader.feed_eof()
        return await read_frame(reader)

    return asyncio.run(run())


def test_a_produce_call_arrives_whole() -> None:
    records = [RoutedRecord(Record(f"k{n}", b'{"n": %d}' % n, 1, '{"h": "v"}', 1_700_000_000_000 + n), n % 3) for n in range(100)]
    call = (CALL, 7, "log", "produce", ("orders", records), {}, False)
    assert _through_the_socket(call) == call


def test_results_and_errors_arrive_whole() -> None:
    resolution = Resolution(HalfState.COMMITTED, "orders", 2, 41, "checker", 1_700_000_000_123)
    half = HalfMessage("m-1", 5, "shop", "tx-1", "orders", 2, 1_700_000_000_000, 0, 1, None, resolution)
    fetched = FetchResult([StoredMessage("orders", 0, 3, 1, None, b'"v"', 1, None, "txn-9")], 4, PartitionState(0, 0, 4, 4))
    for reply in ((1, True, Prepared(half, created=False)), (2, True, fetched)):
        assert _through_the_socket(reply) == reply
    arrived = _through_the_socket((3, False, AlreadyResolved("half message m-1 is already COMMITTED")))
    assert arrived is not None
    error = arrived[2]
    assert isinstance(error, AlreadyResolved)
    assert (error.status, error.code, error.message) == (409, "ALREADY_RESOLVED", "half message m-1 is already COMMITTED")


def test_a_closed_connection_reads_as_none() -> None:
    async def run() -> tuple[Any, ...] | None:
        reader = asyncio.StreamReader()
        reader.feed_data(encode((CALL, 1))[:5])  # cut off mid-frame
        reader.feed_eof()
        return await read_frame(reader)

    assert asyncio.run(run()) is None
