"""The HTTP front's side of the core: start it, call it, and a broker proxy for the routes."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

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
from app.handle import CORE_CALLS, SERVICES, BrokerHandle
from app.metrics import front_metrics, labelled_fronts
from half_store.domain.errors import StorageUnavailable
from half_store.settings import Settings

log = logging.getLogger(__name__)

# How often a call that waits (long poll) asks whether its HTTP client is still there.
CLIENT_RECHECK_SECONDS = 0.25
# How often each of several fronts hands the core its metrics (the others' in a scrape are this old at most).
FRONT_REPORT_SECONDS = 1.0
STOP_TIMEOUT_SECONDS = 30.0

Reply = tuple[bool, Any]


@dataclass(frozen=True)
class SharedCore:
    """Where one of several fronts finds the core they share (app/fronts.py), and which front it is."""

    socket: str
    index: int


@dataclass(frozen=True)
class SpawnedCore:
    """A front's own core process, started but not yet connected to."""

    process: subprocess.Popen[bytes]
    socket: socket.socket  # the front's end of the pair the core was given


def spawn_core(settings: Settings) -> SpawnedCore:
    """Start a front's own core process. ``python -m app`` calls this before it imports the app,
    so the core imports and opens the database while the front imports (0.4 s of a start)."""
    front_end, core_end = socket.socketpair()
    env = dict(os.environ)
    env.update({SETTINGS_ENV: settings.model_dump_json(), SOCKET_FD_ENV: str(core_end.fileno()), PARENT_ENV: str(os.getpid())})
    process = subprocess.Popen([sys.executable, "-m", "app.core"], env=env, pass_fds=(core_end.fileno(),))
    core_end.close()
    return SpawnedCore(process, front_end)


class CoreLink:
    """One core process and the connection to it; calls are multiplexed by id."""

    def __init__(
        self, process: subprocess.Popen[bytes] | None, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._process = process  # None: a core shared by several fronts, which their supervisor owns
        self._reader = reader
        self._frames = FrameWriter(writer)
        self._ids = itertools.count()
        self._pending: dict[int, asyncio.Future[Reply]] = {}
        self._closing = False
        self._lost = False
        self._reading = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, settings: Settings, spawned: SpawnedCore | None = None) -> CoreLink:
        """Start the core (unless it is ``spawned`` already) and wait until it has migrated, recovered and is answering."""
        core = spawned or spawn_core(settings)
        reader, writer = await asyncio.open_unix_connection(sock=core.socket, limit=READ_LIMIT)
        if await read_frame(reader) != (READY,):
            writer.close()
            code = await asyncio.to_thread(core.process.wait)
            raise RuntimeError(f"the broker's core process exited during start-up (exit code {code}); see its log above")
        return cls(core.process, reader, writer)

    @classmethod
    async def connect(cls, path: str) -> CoreLink:
        """Join the core that several fronts share (:mod:`app.fronts`), listening on the unix socket ``path``."""
        reader, writer = await asyncio.open_unix_connection(path, limit=READ_LIMIT)
        if await read_frame(reader) != (READY,):
            writer.close()
            raise RuntimeError(f"the broker's core process at {path} did not answer")
        return cls(None, reader, writer)

    async def call(self, service: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``service.method(*args, **kwargs)`` in the core; its errors are raised here."""
        if self._lost:
            raise StorageUnavailable("the broker's core process has stopped")
        client_gone: Callable[[], Awaitable[bool]] | None = kwargs.pop("client_gone", None)
        call_id = next(self._ids)
        reply: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = reply
        try:
            self._frames.send(encode((CALL, call_id, service, method, args, kwargs, client_gone is not None)))
            await self._frames.drain()
            ok, value = await (reply if client_gone is None else self._watching(call_id, reply, client_gone))
        except asyncio.CancelledError:
            self._send_gone(call_id)
            raise
        finally:
            self._pending.pop(call_id, None)
        if not ok:
            raise value
        return value

    async def _watching(self, call_id: int, reply: asyncio.Future[Reply], client_gone: Callable[[], Awaitable[bool]]) -> Reply:
        """Wait for the reply; tell the core if the HTTP client goes away meanwhile, so it stops waiting."""
        told = False
        while True:
            done, _ = await asyncio.wait({reply}, timeout=CLIENT_RECHECK_SECONDS)
            if done:
                return reply.result()
            if not told and await client_gone():
                self._send_gone(call_id)
                told = True

    def _send_gone(self, call_id: int) -> None:
        if not self._lost:
            self._frames.send(encode((GONE, call_id)))

    async def _read(self) -> None:
        try:
            while (message := await read_frame(self._reader)) is not None:
                call_id, ok, value = message
                reply = self._pending.get(call_id)
                if reply is not None and not reply.done():
                    reply.set_result((ok, value))
        finally:
            self._lost = True
            gone = StorageUnavailable("the broker's core process has stopped")
            for reply in self._pending.values():
                if not reply.done():
                    reply.set_result((False, gone))
            if not self._closing:
                # A broker without its core cannot serve; stop, so that a supervisor restarts both.
                code = None if self._process is None else self._process.poll()
                log.critical("the broker's core process stopped (exit code %s); shutting down", code)
                os.kill(os.getpid(), signal.SIGTERM)

    async def close(self) -> None:
        """Stop the core gracefully: it commits what is queued, stops its jobs and exits.

        A shared core is only left: its supervisor stops it once every front has stopped.
        """
        self._closing = True
        self._frames.close()
        if self._process is None:
            self._reading.cancel()
            return
        try:
            await asyncio.wait_for(asyncio.to_thread(self._process.wait), STOP_TIMEOUT_SECONDS)
        except TimeoutError:
            log.error("the broker's core process did not stop in %.0f s; killing it", STOP_TIMEOUT_SECONDS)
            self._process.kill()
            await asyncio.to_thread(self._process.wait)
        self._reading.cancel()


def start_shared_core(settings: Settings, path: str) -> subprocess.Popen[bytes]:
    """Start a core for several fronts; it listens on the unix socket ``path`` once it is ready.

    The caller (the fronts' supervisor) is its parent: the core dies with it.
    """
    env = dict(os.environ)
    env.update({SETTINGS_ENV: settings.model_dump_json(), LISTEN_ENV: path, PARENT_ENV: str(os.getpid())})
    return subprocess.Popen([sys.executable, "-m", "app.core"], env=env)


class _ServiceProxy:
    """Stands in for one of the core's services: each method of its Protocol becomes a call, and only those."""

    def __init__(self, link: CoreLink, service: str) -> None:
        self._link = link
        self._service = service
        self._calls = CORE_CALLS[service]

    def __getattr__(self, method: str) -> Callable[..., Awaitable[Any]]:
        if method not in self._calls:
            raise AttributeError(f"{self._service}.{method} is not a core call ({SERVICES[self._service].__name__})")

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._link.call(self._service, method, args, kwargs)

        call.__name__ = method
        setattr(self, method, call)  # found directly from now on, and seen by isinstance(proxy, Protocol)
        return call


def _proxies(link: CoreLink) -> dict[str, Any]:
    """One proxy per service; each has its Protocol's methods (``isinstance`` checks hold at once)."""
    proxies = {name: _ServiceProxy(link, name) for name in SERVICES}
    for name, proxy in proxies.items():
        for method in CORE_CALLS[name]:
            getattr(proxy, method)
    return proxies


class RemoteBroker(BrokerHandle):
    """What the fronts use when the services run in the core process (see :class:`app.handle.BrokerHandle`)."""

    def __init__(self, settings: Settings, link: CoreLink) -> None:
        super().__init__(settings=settings, **_proxies(link))
        self._link = link

    async def ready(self) -> bool:
        try:
            return bool(await self._link.call("broker", "ready", (), {}))
        except StorageUnavailable:
            return False

    async def metrics(self) -> bytes:
        return cast(bytes, await self._link.call("broker", "metrics", (), {}))


class FrontMetrics:
    """One of several fronts: reports its metrics to the core every second, and answers /metrics for all."""

    def __init__(self, link: CoreLink, index: int) -> None:
        self._link = link
        self._index = index
        self._reporting: asyncio.Task[None] | None = None

    def start(self) -> FrontMetrics:
        self._reporting = asyncio.create_task(self._report_often())
        return self

    async def _report_often(self) -> None:
        while True:
            try:
                await self._link.call("fronts", "report", (self._index, front_metrics()), {})
            except StorageUnavailable:
                return  # the core is gone; the link stops this front
            await asyncio.sleep(FRONT_REPORT_SECONDS)

    async def collect(self) -> bytes:
        """Every front's metrics, labelled by front: this one's as of now, the others' as of their last report."""
        await self._link.call("fronts", "report", (self._index, front_metrics()), {})
        return labelled_fronts(await self._link.call("fronts", "reports", (), {}))

    def stop(self) -> None:
        if self._reporting is not None:
            self._reporting.cancel()
