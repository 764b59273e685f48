"""The group-commit writer: shared transactions, isolated failures, durable answers."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from sqlalchemy import Connection, event, text

from half_store.domain.errors import InvalidRequest
from half_store.metrics import CORE_REGISTRY
from half_store.storage.database import open_database
from half_store.storage.writer import GroupCommitWriter


def test_concurrent_units_share_commits_and_a_failing_unit_undoes_only_itself(tmp_path: Path) -> None:
    database = open_database(f"sqlite:///{tmp_path / 'w.db'}")
    with database.writer.begin() as conn:
        conn.execute(text("CREATE TABLE t (v INTEGER)"))
    writer = GroupCommitWriter(database.writer)
    writer.start()

    def insert(value: int) -> object:
        def unit(conn: Connection) -> int:
            conn.execute(text("INSERT INTO t VALUES (:v)"), {"v": value})
            if value % 10 == 3:
                raise InvalidRequest(f"no {value}")
            return value

        return unit

    async def run() -> list[object]:
        return await asyncio.gather(*(writer.submit(insert(i)) for i in range(200)), return_exceptions=True)

    try:
        results = asyncio.run(run())
    finally:
        writer.close()
    failed = [r for r in results if isinstance(r, InvalidRequest)]
    assert len(failed) == 20
    with database.reader.connect() as conn:
        stored = sorted(v for (v,) in conn.execute(text("SELECT v FROM t")))
    database.dispose()
    assert stored == [i for i in range(200) if i % 10 != 3]
    assert writer.batches_committed < 200  # units were grouped
    assert writer.units_committed == 180


def test_batches_without_failures_take_no_savepoints_and_a_failure_reruns_its_batch(tmp_path: Path) -> None:
    database = open_database(f"sqlite:///{tmp_path / 'w.db'}")
    with database.writer.begin() as conn:
        conn.execute(text("CREATE TABLE t (v INTEGER)"))
    savepoints: list[str] = []
    event.listen(database.writer, "savepoint", lambda conn, name: savepoints.append(name))
    writer = GroupCommitWriter(database.writer)
    writer.start()

    def insert(value: int, *, fail: bool = False) -> object:
        def unit(conn: Connection) -> int:
            conn.execute(text("INSERT INTO t VALUES (:v)"), {"v": value})
            if fail:
                raise InvalidRequest(f"no {value}")
            return value

        return unit

    async def run(values: range, failing: int | None = None) -> list[object]:
        """All of ``values`` in one group commit: the writer is held until they are queued."""
        holding, release = threading.Event(), threading.Event()
        held = asyncio.ensure_future(writer.submit(lambda conn: holding.set() or release.wait(10)))
        while not holding.is_set():
            await asyncio.sleep(0.001)
        writes = asyncio.gather(*(writer.submit(insert(v, fail=v == failing)) for v in values), return_exceptions=True)
        while writer.queued < len(values):
            await asyncio.sleep(0.001)
        release.set()
        await held
        return await writes

    def reruns() -> float:
        return CORE_REGISTRY.get_sample_value("halfmq_group_commit_careful_reruns_total") or 0.0

    reruns_before = reruns()
    try:
        assert asyncio.run(run(range(100))) == list(range(100))
        batches_before = writer.batches_committed
        assert savepoints == []
        results = asyncio.run(run(range(100, 200), failing=150))
    finally:
        writer.close()
    assert isinstance(results[50], InvalidRequest)
    assert results[:50] + results[51:] == [v for v in range(100, 200) if v != 150]
    assert reruns() - reruns_before == 1
    assert savepoints  # the rerun gave each unit of the failed batch a savepoint
    assert writer.batches_committed == batches_before + 2  # the holding unit's and the rerun batch
    with database.reader.connect() as conn:
        stored = sorted(v for (v,) in conn.execute(text("SELECT v FROM t")))
    database.dispose()
    assert stored == [v for v in range(200) if v != 150]  # the first, rolled-back run left nothing behind


def test_run_sync_propagates_errors(tmp_path: Path) -> None:
    database = open_database(f"sqlite:///{tmp_path / 'w.db'}")
    writer = GroupCommitWriter(database.writer)
    with pytest.raises(InvalidRequest):
        writer.run_sync(lambda conn: (_ for _ in ()).throw(InvalidRequest("x")))
    database.dispose()


def test_merged_units_run_as_one_and_a_bad_one_fails_alone(tmp_path: Path) -> None:
    from half_store.storage.writer import MergeKind

    database = open_database(f"sqlite:///{tmp_path / 'm.db'}")
    with database.writer.begin() as conn:
        conn.execute(text("CREATE TABLE t (v INTEGER)"))
    calls: list[int] = []

    def insert_all(conn: Connection, values: list[int]) -> list[int]:
        calls.append(len(values))
        if any(v < 0 for v in values):
            raise InvalidRequest("negative")
        conn.execute(text("INSERT INTO t VALUES (:v)"), [{"v": v} for v in values])
        return [v * 10 for v in values]

    kind: MergeKind[int, int] = MergeKind("insert", insert_all)
    writer = GroupCommitWriter(database.writer)
    writer.start()

    async def run() -> list[object]:
        return await asyncio.gather(*(writer.submit_merged(kind, v) for v in [*range(50), -1]), return_exceptions=True)

    try:
        results = asyncio.run(run())
    finally:
        writer.close()
    assert results[:50] == [v * 10 for v in range(50)] and isinstance(results[50], InvalidRequest)
    with database.reader.connect() as conn:
        assert sorted(v for (v,) in conn.execute(text("SELECT v FROM t"))) == list(range(50))
    database.dispose()
    assert max(calls) > 1  # some units ran merged


def test_only_a_batch_of_one_kind_that_locks_in_order_begins_with_nothing_locked(tmp_path: Path) -> None:
    from half_store.storage.writer import MergeKind

    database = open_database(f"sqlite:///{tmp_path / 'p.db'}")
    begun: list[list[tuple[int, int]]] = []
    writer = GroupCommitWriter(database.writer, begin_locked=lambda conn, keys: begun.append(keys))

    def locked_first() -> list[list[tuple[int, int]]]:
        """The rows each batch locked as it began, for the batches that locked any."""
        return [keys for keys in begun if keys]
    writer.start()

    def append_all(conn: Connection, partitions: list[int]) -> list[int]:
        if any(p < 0 for p in partitions):
            raise InvalidRequest("no such partition")
        return partitions

    in_order: MergeKind[int, int] = MergeKind("append", append_all, locks_in_order=True)

    async def one_batch(partitions: list[int], *, with_unit: bool = False) -> list[object]:
        holding, release = threading.Event(), threading.Event()
        held = asyncio.ensure_future(writer.submit(lambda conn: holding.set() or release.wait(10)))
        while not holding.is_set():
            await asyncio.sleep(0.001)
        writes = [writer.submit_merged(in_order, p, locks=[(1, p)]) for p in partitions]
        if with_unit:
            writes.append(writer.submit(lambda conn: "unit", locks=[(2, 0)]))
        gathered = asyncio.gather(*writes, return_exceptions=True)
        while writer.queued < len(writes):
            await asyncio.sleep(0.001)
        release.set()
        await held
        return await gathered

    try:
        assert asyncio.run(one_batch([3, 1, 2])) == [3, 1, 2]
        assert locked_first() == []  # the merged run locks partitions 1, 2, 3 in that order by itself
        assert len(begun) == 2  # every batch began through the hook: the holder's, then the merged run's
        assert asyncio.run(one_batch([3, 1], with_unit=True)) == [3, 1, "unit"]
        assert locked_first() == [[(1, 1), (1, 3), (2, 0)]]
        results = asyncio.run(one_batch([2, -1]))
        assert results[0] == 2 and isinstance(results[1], InvalidRequest)
        assert locked_first()[-1] == [(1, -1), (1, 2)]  # the careful rerun runs the units one by one: locks first
    finally:
        writer.close()
        database.dispose()
