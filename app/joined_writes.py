"""Writes made in one turn of the event loop, sent to the socket together.

Both of the broker's own streams write this way: the frames between the front and the
core (:class:`app.core.protocol.FrameWriter`) and the HTTP answers
(:mod:`app.one_write_http`). One ``writelines`` per turn is one system call, and over
loopback one wake-up of the reader, where a write each would cost one of both per write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Protocol


class Writable(Protocol):
    """What both an asyncio transport and a StreamWriter offer."""

    def writelines(self, data: Iterable[bytes], /) -> None: ...

    def is_closing(self) -> bool: ...

    def close(self) -> None: ...


class JoinedWrites:
    """``stream`` with the writes of one turn of the event loop sent in one ``writelines``.

    ``flush_bytes``: once this much is waiting it goes at once, so a large answer is not held.
    """

    __slots__ = ("_flush_bytes", "_stream", "_waiting", "_waiting_bytes")

    def __init__(self, stream: Writable, flush_bytes: int | None = None) -> None:
        self._stream = stream
        self._flush_bytes = flush_bytes
        self._waiting: list[bytes] = []
        self._waiting_bytes = 0

    def write(self, *chunks: bytes) -> None:
        if not self._waiting:
            asyncio.get_running_loop().call_soon(self.flush)
        self._waiting.extend(chunks)
        if self._flush_bytes is not None:
            self._waiting_bytes += sum(map(len, chunks))
            if self._waiting_bytes >= self._flush_bytes:
                self.flush()

    def flush(self) -> None:
        chunks, self._waiting = self._waiting, []
        self._waiting_bytes = 0
        if chunks and not self._stream.is_closing():
            self._stream.writelines(chunks)

    def close(self) -> None:
        self.flush()
        self._stream.close()
