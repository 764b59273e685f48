"""Answering a caller's future, on its event loop, with what a storage thread produced."""

from __future__ import annotations

import asyncio
from typing import Any


def settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """Run on the future's own loop (``call_soon_threadsafe``).

    A future already done was cancelled by its caller (the client went away): the work
    stands, and its answer is dropped.
    """
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
