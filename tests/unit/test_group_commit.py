"""The group-commit writer: shared transactions, isolated failures, durable answers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import Connection, text

from app.errors import InvalidRequest
from app.storage.database import open_database
from app.storage.writer import GroupCommitWriter


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


def test_run_sync_propagates_errors(tmp_path: Path) -> None:
    database = open_database(f"sqlite:///{tmp_path / 'w.db'}")
    writer = GroupCommitWriter(database.writer)
    with pytest.raises(InvalidRequest):
        writer.run_sync(lambda conn: (_ for _ in ()).throw(InvalidRequest("x")))
    database.dispose()


def test_merged_units_run_as_one_and_a_bad_one_fails_alone(tmp_path: Path) -> None:
    from app.storage.writer import MergeKind

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
