"""Property tests of the last stable offset and aborted-range filtering, against a Python model.

Random interleavings of plain appends, Kafka-mode transactions writing to several
partitions, commits and aborts are written through the storage functions the
coordinator uses (``log_store.append``, ``txn_store.add_partitions`` /
``mark_partitions_ended`` and control markers, as ``Coordinator._complete`` does)
into an in-memory SQLite database migrated by ``half_store.storage.migrate.upgrade``.
After every step ``half_store.services.log_service.read_partition`` must agree with a model that
is just a list per partition:

- the last stable offset is the first offset of the earliest open transaction on
  the partition, or the high watermark (and ``partition_states`` says the same, naming
  that transaction as the partition's ``blocking_txn_id``);
- paging ``read_committed`` from any start offset, with any page size, following
  ``next_offset``, returns exactly the non-transactional and committed messages
  below the LSO, in order, never an aborted one and never a control marker;
- ``read_uncommitted`` returns every data message up to the high watermark.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool

from half_store.domain.constants import CONTROL_ABORT, CONTROL_COMMIT, VALUE_JSON
from half_store.domain.records import ProducerStamp, Record, Topic, now_ms
from half_store.domain.txn_state import TxnState, final_state, prepare_state, transition
from half_store.services.log_service import read_partition
from half_store.storage import log_store, txn_store
from half_store.storage.migrate import upgrade
from half_store.storage.txn_store import TransactionRow

PARTITIONS = 2
_names = itertools.count()


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    """One migrated in-memory database per module; every example works in a fresh topic."""
    engine = create_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _no_pysqlite_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # let SQLAlchemy's BEGIN make savepoints work

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN")

    upgrade(engine)
    yield engine
    engine.dispose()


# -- the model ---------------------------------------------------------------------------------


@dataclass
class Model:
    log: dict[int, list[tuple[str, str | None, str]]] = field(default_factory=lambda: {p: [] for p in range(PARTITIONS)})
    status: dict[str, str] = field(default_factory=dict)  # txn -> open / committed / aborted
    first: dict[str, dict[int, int]] = field(default_factory=dict)  # txn -> partition -> first offset

    def lso(self, partition: int) -> int:
        held = [f[partition] for t, f in self.first.items() if self.status[t] == "open" and partition in f]
        return min(held, default=len(self.log[partition]))

    def blocker(self, partition: int) -> str | None:
        """The open transaction whose first write on the partition is the LSO."""
        held = [(f[partition], t) for t, f in self.first.items() if self.status[t] == "open" and partition in f]
        return min(held)[1] if held else None

    def committed_view(self, partition: int, start: int) -> list[tuple[int, str]]:
        return [
            (offset, value_id)
            for offset, (kind, txn, value_id) in enumerate(self.log[partition])
            if start <= offset < self.lso(partition)
            and kind == "data"
            and (txn is None or self.status[txn] != "aborted")
        ]

    def uncommitted_view(self, partition: int) -> list[tuple[int, str]]:
        return [(o, v) for o, (kind, _, v) in enumerate(self.log[partition]) if kind == "data"]


# -- writing like the broker ---------------------------------------------------------------------


def records(ids: list[str]) -> list[Record]:
    return [Record(None, orjson.dumps(i), VALUE_JSON, None, 0) for i in ids]


def open_transaction(conn: Connection, txn_id: str) -> None:
    now = now_ms()
    txn_store.insert_transactions(conn, [TransactionRow(txn_id, None, None, TxnState.OPEN, 60_000, False, now, now + 60_000)])


def end_transaction(conn: Connection, topic: Topic, txn_id: str, commit: bool) -> list[tuple[int, int]]:
    """What Coordinator.end + _complete write: PREPARE_*, a control marker per partition, the final state."""
    prepared = prepare_state(commit)
    assert txn_store.transition(conn, txn_id, transition(TxnState.OPEN, prepared))
    markers = []
    for part in txn_store.partitions_of(conn, txn_id):
        stamp = ProducerStamp(None, None, None, txn_id, CONTROL_COMMIT if commit else CONTROL_ABORT)
        offset = log_store.append(conn, topic, part.partition, [Record(None, b"null", 0, None, 0)], stamp)
        txn_store.mark_partitions_ended(conn, [(txn_id, part.topic_id, part.partition, offset, not commit)])
        markers.append((part.partition, offset))
    assert txn_store.transition(conn, txn_id, transition(prepared, final_state(prepared, timed_out=False)))
    return markers


# -- operations ------------------------------------------------------------------------------------

partitions = st.integers(0, PARTITIONS - 1)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("plain"), partitions, st.integers(1, 3)),
        st.tuples(st.just("begin")),
        st.tuples(st.just("produce"), st.integers(0, 4), partitions, st.integers(1, 3)),
        st.tuples(st.just("end"), st.integers(0, 4), st.booleans()),
    ),
    min_size=1,
    max_size=24,
)


def read_chain(
    conn: Connection, topic: Topic, partition: int, start: int, isolation: str, page_sizes: Iterator[int]
) -> tuple[list[tuple[int, str]], int]:
    """Follow next_offset from ``start`` to the end readable in ``isolation``; (messages, end)."""
    found: list[tuple[int, str]] = []
    offset = start
    for _ in range(1000):
        result = read_partition(conn, topic, partition, offset, next(page_sizes), isolation)
        state = result.state
        end = state.last_stable_offset if isolation == "read_committed" else state.high_watermark
        for message in result.messages:
            assert offset <= message.offset < result.next_offset <= end
            found.append((message.offset, orjson.loads(message.value)))
        assert result.next_offset >= offset
        if result.next_offset >= end:
            return found, end
        assert result.next_offset > offset, f"no progress at offset {offset}"
        offset = result.next_offset
    raise AssertionError("read did not reach the end")


def check_against_model(conn: Connection, topic: Topic, model: Model, data: st.DataObject) -> None:
    sizes = iter(lambda: data.draw(st.integers(1, 4), label="max_messages"), None)
    described = {s.partition: s for s in log_store.partition_states(conn, topic)}
    for partition in range(PARTITIONS):
        state = log_store.partition_state(conn, topic, partition)
        assert state == replace(described[partition], blocking_txn_id=None)
        assert described[partition].blocking_txn_id == model.blocker(partition)
        assert state.high_watermark == len(model.log[partition])
        assert state.last_stable_offset == model.lso(partition), (partition, model)
        start = data.draw(st.integers(0, state.last_stable_offset), label=f"start p{partition}")
        committed, _ = read_chain(conn, topic, partition, start, "read_committed", sizes)
        assert committed == model.committed_view(partition, start), (partition, start, model)
        uncommitted, _ = read_chain(conn, topic, partition, 0, "read_uncommitted", sizes)
        assert uncommitted == model.uncommitted_view(partition)


@settings(
    max_examples=int(os.environ.get("HALFMQ_PROPERTY_EXAMPLES", "80")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations, data=st.data())
def test_read_committed_matches_the_model(engine: Engine, ops: list[tuple[Any, ...]], data: st.DataObject) -> None:
    with engine.connect() as conn, conn.begin() as outer:
        topic = log_store.create_topic(conn, f"lso-{next(_names)}", PARTITIONS)
        model = Model()
        txns: list[str] = []
        counter = itertools.count()
        for op in ops:
            if op[0] == "plain":
                _, partition, n = op
                ids = [f"m{next(counter)}" for _ in range(n)]
                base = log_store.append(conn, topic, partition, records(ids))
                assert base == len(model.log[partition])
                model.log[partition] += [("data", None, i) for i in ids]
            elif op[0] == "begin":
                txn_id = f"{topic.name}-t{len(txns)}"
                open_transaction(conn, txn_id)
                txns.append(txn_id)
                model.status[txn_id] = "open"
                model.first[txn_id] = {}
            elif op[0] == "produce":
                _, index, partition, n = op
                if index >= len(txns) or model.status[txns[index]] != "open":
                    continue
                txn_id = txns[index]
                ids = [f"m{next(counter)}" for _ in range(n)]
                base = log_store.append(conn, topic, partition, records(ids), ProducerStamp(txn_id=txn_id))
                txn_store.add_partitions(conn, [(txn_id, topic.topic_id, partition, base)])
                model.log[partition] += [("data", txn_id, i) for i in ids]
                model.first[txn_id].setdefault(partition, base)
            else:
                _, index, commit = op
                if index >= len(txns) or model.status[txns[index]] != "open":
                    continue
                txn_id = txns[index]
                for partition, offset in end_transaction(conn, topic, txn_id, commit):
                    assert offset == len(model.log[partition])
                    model.log[partition].append(("marker", txn_id, ""))
                model.status[txn_id] = "committed" if commit else "aborted"
            check_against_model(conn, topic, model, data)
        outer.rollback()


def test_an_aborted_transaction_between_committed_ones_is_skipped_across_pages(engine: Engine) -> None:
    """A fixed example of the property, readable on its own: pages of one message over an aborted range."""
    with engine.connect() as conn, conn.begin() as outer:
        topic = log_store.create_topic(conn, f"lso-fixed-{next(_names)}", 1)
        log_store.append(conn, topic, 0, records(["a"]))
        for txn_id, ids, commit in (("fx-1", ["b", "c"], False), ("fx-2", ["d"], True)):
            open_transaction(conn, txn_id)
            base = log_store.append(conn, topic, 0, records(ids), ProducerStamp(txn_id=txn_id))
            txn_store.add_partitions(conn, [(txn_id, topic.topic_id, 0, base)])
            end_transaction(conn, topic, txn_id, commit)
        found, end = read_chain(conn, topic, 0, 0, "read_committed", itertools.repeat(1))
        assert [v for _, v in found] == ["a", "d"]
        assert end == 6  # a, b, c, abort marker, d, commit marker
        outer.rollback()
