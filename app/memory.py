"""Hands memory the process has freed back to the operating system, every few seconds.

glibc's ``malloc`` keeps what a process frees for its own later use, so a burst of
large requests leaves a broker process at its high-water mark long after the requests
are gone. After the 1,000-message produce benchmark (eight 1 MB requests at a time)
the front held 50 MB more than before it, of which ``malloc_trim(0)`` returned 43 MB,
and the core 10 MB of 15. A broker's resident memory should follow what it is doing,
not the largest thing it ever did: that is what a container's memory limit counts.

A thread per process calls ``malloc_trim(0)`` every ``HALFMQ_MEMORY_TRIM_SECONDS``; the
call takes about 2 ms and ctypes releases the GIL around it, so requests go on
meanwhile. Where the C library has no ``malloc_trim`` (musl, macOS) nothing runs.

Since the trimmer returns freed memory on its schedule, ``free`` need not return it at
once. glibc's defaults do: a block above the mmap threshold is mapped for itself and
unmapped when freed, and a free heap top beyond 128 KiB is given back. Either way the
next large buffer (a 5 MB fetch page, pickled in the core, read and encoded in the
front) starts on fresh pages, and on this project's machines a fresh page costs about
4 µs to fault in: 5 ms per 5 MB copy, more than the copy. With the trimmer on, each
process therefore raises both thresholds (``mallopt``), and memory freed between trims is
reused without faults: broker CPU for a 5,000-message Arrow page went from 34–38 to 23–25 ms.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import sys
import threading
from collections.abc import Callable

from prometheus_client import Counter

log = logging.getLogger(__name__)
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _c_library_function(name: str) -> Callable[..., int] | None:
    """A function of the C library this process runs on; None where it has none (musl, macOS)."""
    try:
        function: Callable[..., int] = getattr(ctypes.CDLL(None), name)
    except (AttributeError, OSError):
        return None
    return function


# mallopt's parameter numbers (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Blocks below this come from the heap and are reused; glibc refuses more than 32 MiB on 64-bit.
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
# A free heap top up to this stays for the next request until the trimmer's next call.
TRIM_THRESHOLD_BYTES = 16 * 1024 * 1024


def _hold_freed_memory_until_trimmed() -> bool:
    """Raise glibc's mmap and trim thresholds; False where there is no ``mallopt``."""
    mallopt = _c_library_function("mallopt")
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))


# Container objects allocated, net, between two young-generation collections (CPython's default: 700).
YOUNG_COLLECTION_THRESHOLD = 10_000


def tune_garbage_collector() -> int:
    """After start-up: freeze what start-up left alive and collect the young less often; the objects frozen.

    A full collection visits every tracked object of the process: the modules, FastAPI's
    routes, pydantic's validators, SQLAlchemy's tables. Requests that build many objects
    (a 100-message produce makes a model, a dict and a record per message, and 16 such
    requests are in flight) promote enough of them to trigger one every hundred-odd
    requests. Measured in the front under the 100-message produce: validating a request
    took 450 µs of CPU against 150 µs with the collector off, and 215 µs with the objects
    of start-up frozen (``gc.freeze``). A young collection every 10,000 allocations instead
    of 700 lowered the front's CPU per request further, from 0.93 to 0.80 ms: most of a
    request's objects are gone before a collection comes. Frozen objects are still freed by reference
    counting; only a cycle among them would stay. The first call in a process does this,
    later ones (more apps in one test process) nothing.
    """
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()
        _, middle, old = gc.get_threshold()
        gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, old)
    return gc.get_freeze_count()


def resident_bytes() -> int:
    """This process's resident set size, from /proc (0 where there is none)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * _PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return 0


class MemoryTrimmer:
    """Calls ``malloc_trim(0)`` every ``interval_seconds`` on a thread of its own, counting what it released."""

    def __init__(self, interval_seconds: float, released: Counter) -> None:
        self._interval = interval_seconds
        self._released = released
        self._trim = _c_library_function("malloc_trim")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="halfmq-memory-trim", daemon=True)

    @property
    def enabled(self) -> bool:
        return self._interval > 0 and self._trim is not None

    def start(self) -> MemoryTrimmer:
        if self.enabled:
            if not _hold_freed_memory_until_trimmed():
                log.info("mallopt refused the allocator's thresholds; freed memory goes back on every free")
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def trim_once(self) -> int:
        """Trim now; the bytes of resident memory that went back to the system."""
        if self._trim is None:
            return 0
        before = resident_bytes()
        self._trim(0)
        released = max(0, before - resident_bytes())
        self._released.inc(released)
        return released

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.trim_once()
            except Exception:
                log.exception("memory trim failed; not trying again in this process")
                return


def leave_out_test_tools() -> None:
    """Keep hypothesis out of a broker process.

    kio (the Kafka protocol's types) imports hypothesis's strategies whenever hypothesis is
    installed, as it is wherever our tests and benchmarks run (a dev dependency): 10 MB of
    a front's RSS that nothing in a broker uses. ``None`` in ``sys.modules`` makes that
    import fail as it does where hypothesis is not installed, which kio expects.
    """
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
