"""uvicorn's httptools protocol, with each answer sent to the socket in one write.

uvicorn writes an answer's status line and headers as soon as the app starts it, and its
body when the app sends it: two ``send`` system calls, and over loopback each one also
pays for delivering the segment to the reader. Here the writes a connection makes while
the event loop runs one step are joined and written once, when that step is done
(bench/results/history.md, round 14). Nothing waits longer than that step, and past
``FLUSH_BYTES`` the pending bytes go at once, so a large answer is not held in memory.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

FLUSH_BYTES = 64 * 1024


class _JoinedWrites:
    """A transport whose writes in one step of the event loop reach the socket as one write."""

    __slots__ = ("_loop", "_pending", "_pending_bytes", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []
        self._pending_bytes = 0

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:  # everything else is the transport's own
        return getattr(self._transport, name)


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """The protocol the broker gives uvicorn (``http=``): httptools, each connection's writes joined."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_JoinedWrites(transport, self.loop))  # type: ignore[arg-type]
