"""Loaded by every Python process started with this folder on PYTHONPATH (``python -m bench.writer_trace``).

In the broker's core process only, it times what the group-commit writer thread does:
each statement it sends (SQLAlchemy's cursor events, by statement text), each COMMIT
(``DefaultDialect.do_commit``) and each group commit (``GroupCommitWriter._commit_batch``,
outermost call only). SIGUSR1 writes the totals as JSON to ``HALFMQ_WRITER_TRACE``. No
broker code is changed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

_WRITER_THREAD = "halfmq-writer"


# An expanding IN list is one statement text per length: fold the list, so a statement is one row.
_NAMED_LIST = re.compile(r"%\((\w+?)_\d+\)s(::\w+)?(?:, %\(\1_\d+\)s(?:::\w+)?)+")
_QMARK_LIST = re.compile(r"\?(?:, \?)+")


def _shape(statement: str) -> str:
    folded = _QMARK_LIST.sub("?, ...", _NAMED_LIST.sub(r"%(\1_n)s\2, ...", statement))
    return re.sub(r"\s+", " ", folded)[:160]


def _install(output: str) -> None:
    from sqlalchemy import event
    from sqlalchemy.engine import Engine
    from sqlalchemy.engine.default import DefaultDialect

    from half_store.storage import writer

    statements: defaultdict[str, list[float]] = defaultdict(lambda: [0, 0.0])  # text -> [calls, seconds]
    batches = {"batches": 0, "units": 0, "busy_s": 0.0, "commit_s": 0.0}
    started: dict[int, float] = {}
    depth = threading.local()

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if threading.current_thread().name == _WRITER_THREAD:
            started[id(conn)] = time.perf_counter()

    def after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        begun = started.pop(id(conn), None)
        if begun is not None:
            totals = statements[_shape(statement)]
            totals[0] += 1
            totals[1] += time.perf_counter() - begun

    event.listen(Engine, "before_cursor_execute", before)
    event.listen(Engine, "after_cursor_execute", after)

    # Both dialects commit through DefaultDialect.do_commit: the COMMIT and, on SQLite, its fsync.
    do_commit: Callable[[Any, Any], None] = DefaultDialect.do_commit

    def timed_commit(self: Any, dbapi_connection: Any) -> None:
        begun = time.perf_counter()
        try:
            do_commit(self, dbapi_connection)
        finally:
            if threading.current_thread().name == _WRITER_THREAD:
                batches["commit_s"] += time.perf_counter() - begun

    DefaultDialect.do_commit = timed_commit  # type: ignore[method-assign]

    original = writer.GroupCommitWriter._commit_batch

    def timed(self: Any, batch: list[Any], *, careful: bool = False) -> None:
        level = getattr(depth, "level", 0)
        depth.level = level + 1
        begun = time.perf_counter()
        try:
            original(self, batch, careful=careful)
        finally:
            depth.level = level
            if level == 0:  # a careful rerun is part of the same group commit
                batches["batches"] += 1
                batches["units"] += len(batch)
                batches["busy_s"] += time.perf_counter() - begun

    writer.GroupCommitWriter._commit_batch = timed  # type: ignore[method-assign]

    def dump(*_: object) -> None:
        report = {**batches, "statements": [{"sql": sql, "calls": n, "seconds": s} for sql, (n, s) in statements.items()]}
        with open(output, "w") as file:
            json.dump(report, file)

    signal.signal(signal.SIGUSR1, dump)


if os.environ.get("HALFMQ_WRITER_TRACE") and sys.orig_argv[-2:] == ["-m", "app.core"]:
    _install(os.environ["HALFMQ_WRITER_TRACE"])
