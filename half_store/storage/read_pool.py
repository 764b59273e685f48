"""Threads that run the broker's database reads for its event loop.

A read is handed over through a queue and its answer comes back with one
``call_soon_threadsafe``. ``anyio.to_thread.run_sync``, which this replaces, cost
about 117 µs of CPU per call with 16 calls in flight (its capacity limiter, cancel
scopes and worker bookkeeping); this costs about 16 µs (bench/results/history.md, round 4).
A read whose caller is cancelled still runs to its end; its answer is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from half_store.storage.answers import settle

T = TypeVar("T")

_Job = tuple[Callable[[], Any], asyncio.Future[Any]]


class ReadPool:
    """``threads`` reader threads, started at the first read."""

    def __init__(self, threads: int) -> None:
        self._size = threads
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._starting = threading.Lock()

    async def run(self, read: Callable[[], T]) -> T:
        """``read()`` on one of the pool's threads."""
        if not self._threads:
            self._start()
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._jobs.put((read, future))
        return await future

    def _start(self) -> None:
        with self._starting:
            while len(self._threads) < self._size:
                thread = threading.Thread(target=self._serve, name=f"halfmq-reader-{len(self._threads)}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def close(self) -> None:
        """Let the reads already queued finish, then stop the threads."""
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads = []

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            read, future = job
            try:
                outcome: tuple[Any, BaseException | None] = (read(), None)
            except BaseException as error:  # noqa: BLE001 - the caller gets it
                outcome = (None, error)
            # RuntimeError: the caller's event loop has closed, nobody waits for this answer.
            with contextlib.suppress(RuntimeError):
                future.get_loop().call_soon_threadsafe(settle, future, *outcome)

