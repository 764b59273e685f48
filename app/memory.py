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
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections.abc import Callable

from prometheus_client import Counter

log = logging.getLogger(__name__)
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    return trim


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
        self._trim = _malloc_trim()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="halfmq-memory-trim", daemon=True)

    @property
    def enabled(self) -> bool:
        return self._interval > 0 and self._trim is not None

    def start(self) -> MemoryTrimmer:
        if self.enabled:
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
