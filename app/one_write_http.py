"""uvicorn's httptools protocol, with each answer sent to the socket in one write.

uvicorn writes an answer's status line and headers as soon as the app starts it, and its
body when the app sends it: two ``send`` system calls, and over loopback each one also
pays for delivering the segment to the reader. Here a connection's transport joins the
writes of one turn of the event loop (:mod:`app.joined_writes`), as the core link does
(bench/results/history.md, round 14). Nothing waits longer than that turn, and past
``FLUSH_BYTES`` the waiting bytes go at once, so a large answer is not held in memory.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.joined_writes import JoinedWrites

FLUSH_BYTES = 64 * 1024


class _JoinedTransport(JoinedWrites):
    """A connection's transport, its writes joined; everything else is the transport's own."""

    __slots__ = ("_transport",)

    def __init__(self, transport: asyncio.Transport) -> None:
        super().__init__(transport, FLUSH_BYTES)
        self._transport = transport

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """The protocol the broker gives uvicorn (``http=``): httptools, each connection's writes joined."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_JoinedTransport(transport))  # type: ignore[arg-type]
