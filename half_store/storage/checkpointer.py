"""SQLite WAL checkpoints on a thread of their own, off the writer's commit path.

By default the connection whose commit takes the WAL past 1,000 pages copies the WAL back
into the database file there and then, fsyncs included: the group-commit writer paid for
it every 4 MB, and every request in that batch waited. The writer's connection has
automatic checkpoints turned off; this thread runs a PASSIVE checkpoint (it never
blocks the writer or readers) when the writer has committed since the last one, at most
every ``CHECKPOINT_EVERY_SECONDS``. Each checkpoint ends with an fsync of the database
file that competes with the writer's own: every 50 ms cost prepare+commit pairs about a
sixth of their rate against every 0.5 s (docs/benchmarks.md).
Under a load that outruns passive checkpoints the WAL would keep growing: past
``RESTART_AFTER_FRAMES`` the checkpoint is a RESTART, which makes the writer wait for it
once so that the WAL starts over (``journal_size_limit`` then shrinks the file).
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)

CHECKPOINT_EVERY_SECONDS = 0.5
RESTART_AFTER_FRAMES = 16_384  # 64 MiB of 4 KiB pages


class Checkpointer:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._committed = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="halfmq-checkpointer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def committed(self) -> None:
        """Called by the writer after each commit."""
        self._committed.set()

    def close(self) -> None:
        if self._thread.is_alive():
            self._stopping.set()
            self._committed.set()
            self._thread.join(timeout=10)
            self._checkpoint()  # leave a short WAL behind

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._committed.wait()
            if self._stopping.is_set():
                return
            self._committed.clear()
            self._checkpoint()
            self._stopping.wait(CHECKPOINT_EVERY_SECONDS)

    def _checkpoint(self) -> None:
        try:
            connection = self._engine.raw_connection()  # outside any transaction, which a checkpoint needs
            try:
                cursor = connection.cursor()
                _, wal_frames, _ = cursor.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                if wal_frames > RESTART_AFTER_FRAMES:
                    cursor.execute("PRAGMA wal_checkpoint(RESTART)")
            finally:
                connection.close()
        except Exception:  # a missed checkpoint only leaves the WAL longer until the next
            log.warning("WAL checkpoint failed", exc_info=True)
