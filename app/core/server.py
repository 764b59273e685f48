"""The core process: the broker's services, writer and background jobs, called by the HTTP fronts.

With one front, started by it (:mod:`app.core.link`) with one end of a socket pair. It
stops when the front closes that socket (a graceful shutdown: jobs stop, queued writes
commit) or on SIGTERM. If the front is killed, the kernel kills the core too, so a
crashed broker stops writing at once, as a one-process broker would.

With several fronts (:mod:`app.fronts`), started by their supervisor; it listens on a
unix socket and answers every front that connects, each on a connection of its own, from
the one set of services: one writer, one checker, one set of long-poll waiters. A front
that goes away is only a closed connection; the core stops on SIGTERM from the
supervisor, or with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import socket
from typing import Any

from app.broker import Broker, running_broker
from app.core.protocol import (
    CALL,
    GONE,
    LISTEN_ENV,
    PARENT_ENV,
    READ_LIMIT,
    READY,
    SETTINGS_ENV,
    SOCKET_FD_ENV,
    FrameWriter,
    encode,
    read_frame,
)
from app.handle import CORE_CALLS, SERVICES
from app.memory import MemoryTrimmer, tune_garbage_collector
from half_store.domain.errors import BrokerError, InternalError, bad_unicode
from half_store.metrics import MEMORY_RELEASED, count_core_process
from half_store.settings import Settings

_PR_SET_PDEATHSIG = 1

log = logging.getLogger("app.core")


class FrontReports:
    """The latest metrics of each front sharing this core, so that any front answers /metrics for all."""

    def __init__(self) -> None:
        self._snapshots: dict[int, bytes] = {}

    async def report(self, index: int, snapshot: bytes) -> None:
        self._snapshots[index] = snapshot

    async def reports(self) -> dict[int, bytes]:
        return dict(self._snapshots)

    def forget(self, index: int | None) -> None:
        if index is not None:
            self._snapshots.pop(index, None)


FRONT_CALLS = frozenset({"report", "reports"})


class CoreServer:
    """Answers the front's calls on one connection, each call in a task of its own."""

    def __init__(
        self,
        broker: Broker,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        fronts: FrontReports | None = None,
    ) -> None:
        self._targets: dict[str, Any] = {name: getattr(broker, name) for name in SERVICES} | {"broker": broker}
        self._fronts = fronts
        self.front_index: int | None = None  # the front on this connection, once it has reported
        self._reader = reader
        self._frames = FrameWriter(writer)
        self._client_gone: dict[int, asyncio.Event] = {}
        self._calls: set[asyncio.Task[None]] = set()

    async def serve(self) -> None:
        """Answer calls until the front closes the connection."""
        self._frames.send(encode((READY,)))
        while (message := await read_frame(self._reader)) is not None:
            if message[0] == CALL:
                task = asyncio.create_task(self._answer(*message[1:]))
                self._calls.add(task)
                task.add_done_callback(self._calls.discard)
            elif message[0] == GONE and (gone := self._client_gone.get(message[1])) is not None:
                gone.set()

    async def close(self) -> None:
        for task in list(self._calls):
            task.cancel()  # a cancelled caller does not undo its write: the writer thread still commits it
        await asyncio.gather(*self._calls, return_exceptions=True)
        self._frames.close()

    async def _answer(
        self, call_id: int, service: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], watches_client: bool
    ) -> None:
        if watches_client:
            gone = self._client_gone[call_id] = asyncio.Event()

            async def client_gone() -> bool:
                return gone.is_set()

            kwargs["client_gone"] = client_gone
        try:
            reply = (call_id, True, await self._call(service, method, args, kwargs))
        except BrokerError as error:
            reply = (call_id, False, error)
        except UnicodeError:
            reply = (call_id, False, bad_unicode())
        except Exception:  # the front must hear back; the details stay in this log
            log.exception("unhandled error in %s.%s", service, method)
            reply = (call_id, False, InternalError("internal error; the broker logged the details"))
        finally:
            self._client_gone.pop(call_id, None)
        try:
            frame = encode(reply)
        except Exception:
            log.exception("cannot send the result of %s.%s", service, method)
            frame = encode((call_id, False, InternalError("internal error; the broker logged the details")))
        self._frames.send(frame)
        with contextlib.suppress(ConnectionError):
            await self._frames.drain()

    async def _call(self, service: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if service == "fronts" and self._fronts is not None and method in FRONT_CALLS:
            if method == "report":
                self.front_index = int(args[0])
            return await getattr(self._fronts, method)(*args, **kwargs)
        if method not in CORE_CALLS.get(service, frozenset()):
            raise InternalError(f"{service}.{method} is not a core call")
        return await getattr(self._targets[service], method)(*args, **kwargs)


async def serve(settings: Settings, connection: socket.socket) -> None:
    """Answer the one front on ``connection`` until it closes it or SIGTERM."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    trimmer = MemoryTrimmer(settings.memory_trim_seconds, MEMORY_RELEASED).start()
    try:
        async with running_broker(settings) as broker:
            tune_garbage_collector()
            reader, writer = await asyncio.open_unix_connection(sock=connection, limit=READ_LIMIT)
            server = CoreServer(broker, reader, writer)
            serving = asyncio.create_task(server.serve())
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            serving.cancel()
            await server.close()
    finally:
        trimmer.stop()


async def serve_fronts(settings: Settings, path: str) -> None:
    """Answer every front that connects to the unix socket ``path`` until SIGTERM."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    trimmer = MemoryTrimmer(settings.memory_trim_seconds, MEMORY_RELEASED).start()
    servers: set[CoreServer] = set()
    fronts = FrontReports()
    try:
        async with running_broker(settings) as broker:
            tune_garbage_collector()

            async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                server = CoreServer(broker, reader, writer, fronts)
                servers.add(server)
                try:
                    await server.serve()
                finally:
                    servers.discard(server)
                    fronts.forget(server.front_index)  # a front that is gone counts no more
                    await server.close()

            # Bound under another name and renamed once listening: a front that finds the path
            # finds a core that has migrated, recovered and accepts connections.
            listening = await asyncio.start_unix_server(answer, path=f"{path}.new", limit=READ_LIMIT)
            os.rename(f"{path}.new", path)
            try:
                await stop.wait()
            finally:
                listening.close()
                await asyncio.gather(*(server.close() for server in list(servers)), return_exceptions=True)
    finally:
        trimmer.stop()


def _die_with_parent(parent: int) -> None:
    """Be killed when the front dies (Linux); elsewhere the closed socket stops the core."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the front died before prctl took effect
        os._exit(1)


def main() -> None:
    settings = Settings.model_validate_json(os.environ[SETTINGS_ENV])
    _die_with_parent(int(os.environ[PARENT_ENV]))
    # Ctrl-C reaches the whole process group; the front shuts down gracefully and then stops the core.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    level = logging.getLevelName(settings.log_level.upper())
    logging.basicConfig(
        level=level if isinstance(level, int) else logging.INFO,
        format="%(asctime)s %(levelname)s [core] %(name)s: %(message)s",
    )
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # a line per job run otherwise
    count_core_process()
    listen = os.environ.get(LISTEN_ENV)
    one_front = None if listen else socket.socket(fileno=int(os.environ[SOCKET_FD_ENV]))
    serving = serve(settings, one_front) if one_front is not None else serve_fronts(settings, str(listen))
    try:
        import uvloop
    except ImportError:
        asyncio.run(serving)
    else:
        uvloop.run(serving)
