"""Group commit: concurrent writes share one database transaction and one fsync.

RocketMQ's GroupCommitService idea on SQL. Every write in the broker is a *unit*:
a function that takes a connection inside an open transaction and returns a
result. Requests hand units to :meth:`GroupCommitWriter.submit`. The writer thread
takes every unit that is waiting (up to ``max_batch``), runs them all in one
transaction and commits once. A unit's caller is answered only after that commit,
so an acknowledged write is a durable one.

Three things keep batches cheap and safe:

- **Merging.** Units of one :class:`MergeKind` (plain appends) are run together by
  one call of the kind's ``run_many``: one offset allocation per partition and one
  multi-row insert for the whole batch.
- **Optimism.** A batch first runs with no savepoint at all: on PostgreSQL each
  savepoint is two more round trips. If any unit (or merged run) fails, the whole
  transaction is rolled back and the batch runs again carefully: each merged run and
  each other unit in a savepoint of its own, and a merged run that fails there is run
  one unit at a time, so only the bad unit fails and its neighbours still commit.
- **Lock order.** A unit may declare the rows it will lock (the partitions it appends
  to). On PostgreSQL the batch takes all declared locks up front, in sorted order,
  through the ``begin_locked`` hook, which opens the transaction in the same round
  trip; two batches, in this process or in another broker process, then queue behind
  each other instead of deadlocking. A batch that is one merged run of a kind that
  locks in sorted order by itself (plain appends) declares no keys to it. A unit that
  still loses a deadlock or serialization race (on rows it did not declare) is retried
  on its own.

There is one writer thread: SQLite has one writer anyway, and on PostgreSQL one
thread per process with group commit beat several threads contending for the same
partition rows (see docs/benchmarks.md). Scale out with broker processes instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DataError, DBAPIError, OperationalError

from half_store.domain.errors import BrokerError, StorageUnavailable, ValidationFailed
from half_store.metrics import (
    CAREFUL_RERUNS,
    GROUP_COMMIT_UNITS,
    GROUP_COMMITS,
    MERGE_FALLBACKS,
)
from half_store.storage.answers import settle

T = TypeVar("T")
P = TypeVar("P")
Unit = Callable[[Connection], T]
LockKey = tuple[int, int]
BeginLocked = Callable[[Connection, list[LockKey]], None]

log = logging.getLogger(__name__)

# PostgreSQL SQLSTATEs worth retrying a unit for: serialization failure, deadlock.
_RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})
_MAX_RETRIES = 5


class _RunCarefully(Exception):
    """A unit of an optimistic batch failed: roll the batch back and run it with savepoints."""


class NotMergeable(Exception):
    """Raised by a ``run_many`` for a batch whose units must run one by one (they depend on each other)."""


@dataclass(frozen=True)
class MergeKind(Generic[P, T]):
    """Units that the writer may run together: ``run_many(conn, payloads)`` returns one result each.

    ``locks_in_order``: ``run_many`` locks no rows but its units' declared ones, and those
    in sorted order, so a batch of this kind alone needs none locked before it runs.
    """

    name: str
    run_many: Callable[[Connection, list[P]], list[T]]
    locks_in_order: bool = False


@dataclass(eq=False)
class _Pending:
    unit: Unit[Any] | None
    future: asyncio.Future[Any]  # its caller's, on the caller's event loop
    locks: Sequence[LockKey] = ()
    kind: MergeKind[Any, Any] | None = None
    payload: Any = None
    attempts: int = 0
    outcome: tuple[Any, BaseException | None] | None = field(default=None)

    def run(self, connection: Connection) -> Any:
        if self.kind is not None:
            return self.kind.run_many(connection, [self.payload])[0]
        assert self.unit is not None
        return self.unit(connection)


class GroupCommitWriter:
    """Runs write units in shared transactions on a dedicated thread.

    ``begin_locked(conn, keys)``, where the database locks rows: opens a group commit's
    transaction itself on a connection in autocommit mode, and locks the rows of ``keys``
    (sorted; none for a batch that locks in order by itself) in the same round trip.
    Without it the transaction opens as the engine opens it (SQLite locks the database).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        begin_locked: BeginLocked | None = None,
        on_commit: Callable[[], None] | None = None,
        max_batch: int = 256,
    ) -> None:
        self._engine = engine
        self._begin_locked = begin_locked
        self._on_commit = on_commit
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="halfmq-writer", daemon=True)
        self._started = False
        self.batches_committed = 0
        self.units_committed = 0

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._thread.start()

    def close(self) -> None:
        if self._started:
            self._queue.put(None)
            self._thread.join(timeout=10)
            self._started = False

    async def submit(self, unit: Unit[T], *, locks: Sequence[LockKey] = ()) -> T:
        """Run ``unit`` in the next group commit and return its result once durable."""
        return await self._enqueue(lambda future: _Pending(unit, future, locks))  # type: ignore[no-any-return]

    async def submit_merged(self, kind: MergeKind[P, T], payload: P, *, locks: Sequence[LockKey] = ()) -> T:
        """Like :meth:`submit`, for a unit of ``kind`` that may run merged with others of its kind."""
        return await self._enqueue(lambda future: _Pending(None, future, locks, kind, payload))  # type: ignore[no-any-return]

    async def _enqueue(self, make: Callable[[asyncio.Future[Any]], _Pending]) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put(make(future))
        return await future

    @property
    def queued(self) -> int:
        """Units waiting for the next group commit."""
        return self._queue.qsize()

    def run_sync(self, unit: Unit[T]) -> T:
        """Run ``unit`` in a transaction of its own on the calling thread (start-up, tools)."""
        with self._engine.begin() as connection:
            return unit(connection)

    # -- the writer thread -----------------------------------------------------------

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self._max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(item)
            self._commit_batch(batch)

    def _commit_batch(self, batch: list[_Pending], *, careful: bool = False) -> None:
        retry: list[_Pending] = []
        try:
            with self._engine.connect() as connection, self._begin(connection, batch, careful):
                if len(batch) == 1:
                    # Alone in the transaction: no savepoint needed, a failure rolls it all back.
                    batch[0].outcome = (batch[0].run(connection), None)
                elif careful:
                    self._run_batch(connection, batch, retry)
                else:
                    self._run_optimistically(connection, batch)
        except _RunCarefully:
            CAREFUL_RERUNS.inc()
            for pending in batch:
                pending.outcome = None
            self._commit_batch(batch, careful=True)
            return
        except BaseException as error:  # noqa: BLE001 - every caller must hear back
            if len(batch) == 1 and self._retryable(batch[0], error):
                retry.append(batch[0])
            else:
                failure = error if isinstance(error, BrokerError) else _storage_failure(error)
                _answer([(pending, None, failure) for pending in batch if pending not in retry])
                self._retry_alone(retry)
                return
        else:
            succeeded = sum(1 for p in batch if p.outcome is not None and p.outcome[1] is None)
            self.batches_committed += 1
            self.units_committed += succeeded
            GROUP_COMMITS.inc()
            GROUP_COMMIT_UNITS.inc(succeeded)
            if self._on_commit is not None:
                self._on_commit()
            _answer([(pending, *pending.outcome) for pending in batch if pending.outcome is not None])
        self._retry_alone(retry)

    @contextlib.contextmanager
    def _begin(self, connection: Connection, batch: list[_Pending], careful: bool) -> Iterator[None]:
        """The batch's transaction, with its declared rows locked first where the database locks rows."""
        if self._begin_locked is None:
            with connection.begin():
                yield
            return
        # SQLAlchemy then neither begins nor ends the transaction on the server: begin_locked
        # opens it, and psycopg's commit and rollback end it, as they act on what the server says.
        connection.execution_options(isolation_level="AUTOCOMMIT")
        with connection.begin():
            # A careful rerun may run a merged kind's units one by one, each in its own order.
            keys = sorted({key for pending in batch for key in pending.locks}) if careful or not _locks_in_order(batch) else []
            self._begin_locked(connection, keys)
            yield

    def _run_optimistically(self, connection: Connection, batch: list[_Pending]) -> None:
        try:
            for group in _by_kind(batch):
                kind = group[0].kind
                if kind is None:
                    group[0].outcome = (group[0].run(connection), None)
                    continue
                results = kind.run_many(connection, [p.payload for p in group])
                for pending, result in zip(group, results, strict=True):
                    pending.outcome = (result, None)
        except Exception as error:
            log.debug("optimistic run of %d units failed (%r); running them with savepoints", len(batch), error)
            raise _RunCarefully from error

    def _run_batch(self, connection: Connection, batch: list[_Pending], retry: list[_Pending]) -> None:
        for group in _by_kind(batch):
            if group[0].kind is None or len(group) == 1 or not self._run_merged(connection, group):
                for pending in group:
                    self._run_in_savepoint(connection, pending, retry)

    def _run_merged(self, connection: Connection, group: list[_Pending]) -> bool:
        kind = group[0].kind
        assert kind is not None
        savepoint = connection.begin_nested()
        try:
            results = kind.run_many(connection, [p.payload for p in group])
        except Exception as error:  # noqa: BLE001 - fall back to one savepoint each, so only the bad unit fails
            savepoint.rollback()
            MERGE_FALLBACKS.labels(kind.name).inc()
            log.debug("merged %s run of %d units failed (%r); running them one by one", kind.name, len(group), error)
            return False
        savepoint.commit()
        for pending, result in zip(group, results, strict=True):
            pending.outcome = (result, None)
        return True

    def _run_in_savepoint(self, connection: Connection, pending: _Pending, retry: list[_Pending]) -> None:
        savepoint = connection.begin_nested()
        try:
            result = pending.run(connection)
        except BaseException as error:  # noqa: BLE001
            savepoint.rollback()
            if self._retryable(pending, error):
                retry.append(pending)
            else:
                pending.outcome = (None, error if isinstance(error, BrokerError) else _storage_failure(error))
        else:
            savepoint.commit()
            pending.outcome = (result, None)

    def _retry_alone(self, retry: list[_Pending]) -> None:
        for pending in retry:
            pending.attempts += 1
            pending.outcome = None
            self._commit_batch([pending])

    @staticmethod
    def _retryable(pending: _Pending, error: BaseException) -> bool:
        if pending.attempts >= _MAX_RETRIES or not isinstance(error, DBAPIError):
            return False
        sqlstate = getattr(error.orig, "sqlstate", None)
        return sqlstate in _RETRYABLE_SQLSTATES


def _locks_in_order(batch: list[_Pending]) -> bool:
    """Whether the batch is one merged run that takes its locks in sorted order by itself."""
    kind = batch[0].kind
    return kind is not None and kind.locks_in_order and all(pending.kind is kind for pending in batch)


def _by_kind(batch: list[_Pending]) -> list[list[_Pending]]:
    """Units that are not merged, one per group, then the merged ones grouped by kind."""
    merged: dict[str, list[_Pending]] = defaultdict(list)
    alone: list[list[_Pending]] = []
    for pending in batch:
        if pending.kind is None:
            alone.append([pending])
        else:
            merged[pending.kind.name].append(pending)
    return alone + list(merged.values())


def _storage_failure(error: BaseException) -> BaseException:
    """What a unit's caller hears when the database, not the domain, failed."""
    if isinstance(error, OperationalError):
        log.warning("database unavailable: %s", error)
        return StorageUnavailable("the database is unavailable, retry later")
    if isinstance(error, DataError):
        return unstorable(error)
    if isinstance(error, DBAPIError):
        log.error("write failed", exc_info=error)
    return error


def unstorable(error: DataError) -> ValidationFailed:
    """A value the database refuses (a NUL in PostgreSQL text, an out-of-range number)."""
    reason = str(error.orig).splitlines()[0] if error.orig else "invalid value"
    return ValidationFailed(f"a value in the request cannot be stored: {reason}")


Answer = tuple[_Pending, Any, BaseException | None]


def _answer(answers: list[Answer]) -> None:
    """Wake the callers of a committed (or failed) batch: one wake-up per event loop, not one per caller."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Answer]] = defaultdict(list)
    for answer in answers:
        by_loop[answer[0].future.get_loop()].append(answer)
    for loop, settled in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, settled)
        except RuntimeError:  # that loop has closed: nobody waits for these answers any more
            log.debug("%d answers for a closed event loop dropped", len(settled))


def _settle(answers: list[Answer]) -> None:
    for pending, result, error in answers:
        settle(pending.future, result, error)

