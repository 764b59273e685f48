"""Frames between the HTTP front and the core: a 4-byte length, then a pickle.

Pickle, because the payloads are the services' own dataclasses and errors, and both
ends are the same code base on the same machine, joined by an unnamed socket pair that
no other process can reach, or (several fronts) by a unix socket in a 0700 directory
that only the broker's own user can enter.

front -> core: ``(CALL, call_id, service, method, args, kwargs, watches_client)``
and ``(GONE, call_id)`` once the HTTP client of a waiting call has gone away.
core -> front: ``(READY,)`` once started, then ``(call_id, ok, result_or_error)``.
"""

from __future__ import annotations

import asyncio
import pickle
import struct
from typing import Any

from app.joined_writes import JoinedWrites

# How the front hands the core its settings, its end of the socket pair and its own pid.
SETTINGS_ENV = "HALFMQ_CORE_SETTINGS"
SOCKET_FD_ENV = "HALFMQ_CORE_FD"
PARENT_ENV = "HALFMQ_CORE_PARENT"
# With several fronts (HALFMQ_WORKERS > 1): instead of a socket pair, the unix socket the core
# listens on for them, in a directory only the broker's user may enter (app/fronts.py).
LISTEN_ENV = "HALFMQ_CORE_LISTEN"

CALL = "call"
GONE = "gone"
READY = "ready"

_LENGTH = struct.Struct("!I")
# The stream reader's buffer limit on both ends of the link. At asyncio's default (64 KiB)
# a 5 MB fetch page paused and resumed the socket every 128 KiB on its way to the front.
READ_LIMIT = 16 * 1024 * 1024


Frame = tuple[bytes, bytes]  # the length, then the pickle: written one after the other, never joined


def encode(message: tuple[Any, ...]) -> Frame:
    """The frame of ``message``; the pickle is not copied behind its length (a produce call can be megabytes)."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)), body


class FrameWriter(JoinedWrites):
    """Sends frames; those written in one turn of the event loop leave in one write.

    With many calls in flight a turn produces many frames: one system call and one
    wake-up of the other end for all of them, instead of one each.
    """

    __slots__ = ("_writer",)

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        super().__init__(writer)
        self._writer = writer

    def send(self, frame: Frame) -> None:
        self.write(*frame)

    async def drain(self) -> None:
        """Wait while the other end is behind (the socket's buffer is full)."""
        await self._writer.drain()


async def read_frame(reader: asyncio.StreamReader) -> tuple[Any, ...] | None:
    """The next message, or None once the other end has closed."""
    try:
        (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
        body = await reader.readexactly(length)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    message: tuple[Any, ...] = pickle.loads(body)
    return message
