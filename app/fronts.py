"""Several HTTP front processes sharing one core process (``HALFMQ_WORKERS`` > 1).

The front is where a request's CPU goes (parsing, validation, JSON); the core holds
the one writer, the checker, the long-poll waiters and the metrics of what is stored.
So the fronts multiply and the core does not: every front sees the same state because
there is only one.

This process is their supervisor. It starts the core, which listens on a unix socket in
a directory of its own that only this user may enter (``mkdtemp``: mode 0700), binds
the HTTP port once and hands that socket to ``workers`` front processes, which accept
from it in turn (the kernel spreads connections over them). A front that dies is
replaced; one that dies within :data:`STEADY_SECONDS` of its start, or the core's
death, stops the broker (a supervisor then restarts the whole of it). SIGTERM or SIGINT
stops the fronts gracefully first (in-flight requests are answered), then the core
(queued writes commit). Only the first front serves the Kafka and RocketMQ listeners:
their ports are bound once.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from multiprocessing.process import BaseProcess
from typing import Any

from half_store.settings import Settings

log = logging.getLogger("app.fronts")

# A front that dies sooner than this after its start is not replaced: it would die again.
STEADY_SECONDS = 5.0
CORE_START_SECONDS = 120.0  # migrations on a large database may take a while
FRONT_STOP_SECONDS = 15.0
CORE_STOP_SECONDS = 30.0
WATCH_SECONDS = 0.2


def front_settings(settings: Settings, index: int) -> Settings:
    """The first front serves the Kafka and RocketMQ ports; the others only HTTP."""
    return settings if index == 0 else settings.model_copy(update={"kafka_port": 0, "grpc_port": 0})


def run_front(
    settings: Settings, index: int, core_socket: str, listener: socket.socket, options: dict[str, Any]
) -> None:
    """One front process: uvicorn on the shared listening socket, calling the shared core."""
    from app.memory import leave_out_test_tools

    leave_out_test_tools()  # a spawned process: the supervisor's sys.modules is not carried over
    import uvicorn

    from app.core.link import SharedCore
    from app.main import create_app

    # A group of its own: Ctrl-C reaches the supervisor alone, which stops the fronts with one
    # SIGTERM each (a second signal would make uvicorn drop the requests in flight).
    os.setpgrp()
    config = uvicorn.Config(create_app(front_settings(settings, index), SharedCore(core_socket, index)), **options)
    uvicorn.Server(config).run(sockets=[listener])


class Fronts:
    """The core and the front processes, started, watched and stopped together."""

    def __init__(self, settings: Settings, options: dict[str, Any]) -> None:
        self._settings = settings
        self._options = options  # uvicorn's, as app.serving gives them
        self._context = multiprocessing.get_context("spawn")
        self._directory = tempfile.mkdtemp(prefix="halfmq-core-")  # 0700
        self.core_socket = os.path.join(self._directory, "core.sock")
        self._core: Any = None
        self._listener: socket.socket | None = None
        self._fronts: list[tuple[BaseProcess, float]] = []
        self.stopping = threading.Event()

    def start(self) -> None:
        from app.core.link import start_shared_core

        self._core = start_shared_core(self._settings, self.core_socket)
        deadline = time.monotonic() + CORE_START_SECONDS
        while not os.path.exists(self.core_socket):
            if self._core.poll() is not None:
                raise RuntimeError(f"the broker's core process exited during start-up (exit code {self._core.returncode})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the broker's core process was not ready after {CORE_START_SECONDS:.0f} s")
            time.sleep(0.05)
        import uvicorn

        self._listener = uvicorn.Config("app.main:create_app", **self._options).bind_socket()  # as uvicorn binds it
        self._fronts = [self._spawn(index) for index in range(self._settings.workers)]

    def _spawn(self, index: int) -> tuple[BaseProcess, float]:
        process = self._context.Process(
            target=run_front,
            args=(self._settings, index, self.core_socket, self._listener, self._options),
            name=f"halfmq-front-{index}",
        )
        process.start()
        return process, time.monotonic()

    def watch(self) -> int:
        """Keep the fronts running until asked to stop or the broker cannot go on; the exit code."""
        while not self.stopping.wait(WATCH_SECONDS):
            if self._core.poll() is not None:
                log.critical("the broker's core process stopped (exit code %s); stopping", self._core.returncode)
                return 1
            for index, (process, started) in enumerate(self._fronts):
                if process.is_alive():
                    continue
                if time.monotonic() - started < STEADY_SECONDS:
                    log.critical("front %d exited (code %s) %.1f s after its start; stopping", index, process.exitcode,
                                 time.monotonic() - started)
                    return 1
                log.error("front %d exited (code %s); starting another", index, process.exitcode)
                self._fronts[index] = self._spawn(index)
        return 0

    def stop(self) -> None:
        """Fronts first (they answer what is in flight), then the core (it commits what is queued)."""
        for process, _ in self._fronts:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        for process, _ in self._fronts:
            process.join(FRONT_STOP_SECONDS)
            if process.is_alive():
                process.kill()
                process.join()
        if self._listener is not None:
            self._listener.close()
        if self._core is not None and self._core.poll() is None:
            self._core.terminate()
            try:
                self._core.wait(CORE_STOP_SECONDS)
            except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: it must go anyway
                log.error("the broker's core process did not stop in %.0f s; killing it", CORE_STOP_SECONDS)
                self._core.kill()
                self._core.wait()
        shutil.rmtree(self._directory, ignore_errors=True)


def serve_fronts(settings: Settings, options: dict[str, Any]) -> int:
    """Serve with ``settings.workers`` fronts and one core until SIGTERM or SIGINT; the exit code."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s [fronts] %(name)s: %(message)s")
    fronts = Fronts(settings, options)

    def stop(signum: int, frame: object) -> None:
        fronts.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        fronts.start()
        return fronts.watch()
    finally:
        fronts.stop()
