"""SQL for the half-message index, its resolutions (the op-log index) and its check history (listeners: listener_store)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, TextClause, bindparam, delete, func, literal, select, text, update
from sqlalchemy.exc import IntegrityError

from half_store.domain.constants import CHECK_HISTORY_KEPT, POLLER_PREFIX
from half_store.domain.half_records import CheckAnswer, CheckRecord, CheckSent, HalfMessage, Resolution
from half_store.domain.half_state import HalfState, HalfTransition
from half_store.domain.records import Topic, now_ms
from half_store.storage.schema import (
    half_checks,
    half_messages,
    half_resolutions,
    topics,
)
from half_store.storage.upsert import arrays_of, insert_from_arrays, insert_many, upsert


class ResolutionConflict(Exception):
    """Another request got there first (a unique constraint said so): it resolved the half message,
    or prepared the same transaction id."""


_resolved_topic = topics.alias("resolved_topic")
_SELECT = (
    select(
        half_messages.c.message_id,
        half_messages.c.half_offset,
        half_messages.c.producer_group,
        half_messages.c.transaction_id,
        topics.c.name,
        half_messages.c.partition,
        half_messages.c.born_timestamp,
        half_messages.c.check_immunity_ms,
        half_messages.c.check_times,
        half_messages.c.next_check_at,
        half_resolutions.c.outcome,
        _resolved_topic.c.name,
        half_resolutions.c.partition,
        half_resolutions.c.offset,
        half_resolutions.c.resolved_by,
        half_resolutions.c.resolved_at,
    )
    .join(topics, topics.c.topic_id == half_messages.c.topic_id)
    .outerjoin(half_resolutions, half_resolutions.c.message_id == half_messages.c.message_id)
    .outerjoin(_resolved_topic, _resolved_topic.c.topic_id == half_resolutions.c.topic_id)
)


def _half(row: Sequence[object]) -> HalfMessage:
    (mid, half_offset, group, txn, topic, part, born, immunity, times, next_at, outcome, r_topic, r_part, r_off, by, at) = row
    resolution = None
    if outcome is not None:
        resolution = Resolution(HalfState(outcome), r_topic, r_part, r_off, str(by), int(at))  # type: ignore[arg-type, call-overload]
    return HalfMessage(
        str(mid),
        int(half_offset),  # type: ignore[call-overload]
        str(group),
        str(txn),
        str(topic),
        int(part),  # type: ignore[call-overload]
        int(born),  # type: ignore[call-overload]
        int(immunity),  # type: ignore[call-overload]
        int(times),  # type: ignore[call-overload]
        None if next_at is None else int(next_at),  # type: ignore[call-overload]
        resolution,
    )


def insert_halves(conn: Connection, halves: list[tuple[HalfMessage, int]]) -> None:
    """Index new half messages (each with its real topic's id); ResolutionConflict if a group
    already prepared one of their transaction ids.

    No savepoint of its own: a conflict ends the unit, and the writer rolls the unit back.
    """
    try:
        insert_many(
            conn,
            half_messages,
            [
                {
                    "message_id": half.message_id,
                    "half_offset": half.half_offset,
                    "producer_group": half.producer_group,
                    "transaction_id": half.transaction_id,
                    "topic_id": topic_id,
                    "partition": half.partition,
                    "born_timestamp": half.born_timestamp,
                    "check_immunity_ms": half.check_immunity_ms,
                    "check_times": 0,
                    "next_check_at": half.next_check_at,
                }
                for half, topic_id in halves
            ],
        )
    except IntegrityError as error:
        raise ResolutionConflict(", ".join(half.transaction_id for half, _ in halves)) from error


# Built once: statement construction per call was a large share of a prepare+commit pair's CPU.
_BY_ID = _SELECT.where(half_messages.c.message_id == bindparam("message_id"))
_BY_IDS = _SELECT.where(half_messages.c.message_id.in_(bindparam("ids", expanding=True)))
_BY_TRANSACTION = _SELECT.where(
    half_messages.c.producer_group == bindparam("group"), half_messages.c.transaction_id == bindparam("txn")
)
_MARK_RESOLVED = (
    update(half_messages)
    .where(half_messages.c.message_id.in_(bindparam("ids", expanding=True)))
    .values(next_check_at=None)
)


def get_many(conn: Connection, message_ids: Sequence[str]) -> dict[str, HalfMessage]:
    """The half messages among ``message_ids`` that exist, by id."""
    return {half.message_id: half for half in map(_half, conn.execute(_BY_IDS, {"ids": list(message_ids)}))}


def get(conn: Connection, message_id: str) -> HalfMessage | None:
    row = conn.execute(_BY_ID, {"message_id": message_id}).first()
    return _half(row) if row else None


def get_by_transaction(conn: Connection, producer_group: str, transaction_id: str) -> HalfMessage | None:
    row = conn.execute(_BY_TRANSACTION, {"group": producer_group, "txn": transaction_id}).first()
    return _half(row) if row else None


def list_halves(conn: Connection, producer_group: str | None, state: HalfState | None, limit: int) -> list[HalfMessage]:
    query = _SELECT
    if producer_group is not None:
        query = query.where(half_messages.c.producer_group == producer_group)
    if state is HalfState.PREPARED:
        query = query.where(half_resolutions.c.message_id.is_(None))
    elif state is not None:
        query = query.where(half_resolutions.c.outcome == state.value)
    rows = conn.execute(query.order_by(half_messages.c.half_offset).limit(limit))
    return [_half(r) for r in rows]


def due(conn: Connection, now: int, limit: int, producer_group: str | None = None) -> list[HalfMessage]:
    """Unresolved half messages whose next check time has come, oldest first."""
    query = _SELECT.where(half_messages.c.next_check_at <= now, half_resolutions.c.message_id.is_(None))
    if producer_group is not None:
        query = query.where(half_messages.c.producer_group == producer_group)
    rows = conn.execute(query.order_by(half_messages.c.next_check_at).limit(limit))
    return [_half(r) for r in rows]


def claim_check(conn: Connection, message_id: str, seen_check_times: int, next_check_at: int) -> bool:
    """Count one check and push the next one out; False if someone else claimed it first."""
    return bool(
        conn.execute(
            update(half_messages)
            .where(
                half_messages.c.message_id == message_id,
                half_messages.c.check_times == seen_check_times,
                half_messages.c.next_check_at.isnot(None),
            )
            .values(check_times=seen_check_times + 1, next_check_at=next_check_at)
        ).rowcount
    )


@dataclass(frozen=True, slots=True)
class NewResolution:
    half: HalfMessage
    move: HalfTransition  # out of PREPARED: the resolution row's primary key is the compare-and-set
    destination: tuple[Topic, int, int] | None  # where the body went: topic, partition, offset
    op_offset: int
    resolved_by: str


def insert_resolutions(conn: Connection, resolutions: Sequence[NewResolution]) -> list[Resolution]:
    """Record the one resolution of each half message; ResolutionConflict if one already has one.

    No savepoint of its own: a conflict ends the unit, and the writer rolls the unit back.
    """
    resolved_at = now_ms()
    rows = []
    recorded = []
    for new in resolutions:
        if new.move.source is not HalfState.PREPARED:
            raise ValueError(f"a resolution row records a move out of PREPARED, not {new.move}")
        topic, partition, offset = new.destination or (None, None, None)
        topic_id, topic_name = (None, None) if topic is None else (topic.topic_id, topic.name)
        rows.append(
            {
                "message_id": new.half.message_id,
                "outcome": new.move.target.value,
                "topic_id": topic_id,
                "partition": partition,
                "offset": offset,
                "op_offset": new.op_offset,
                "resolved_by": new.resolved_by,
                "resolved_at": resolved_at,
            }
        )
        recorded.append(Resolution(new.move.target, topic_name, partition, offset, new.resolved_by, resolved_at))
    ids = [new.half.message_id for new in resolutions]
    try:
        if conn.dialect.name == "postgresql":
            conn.execute(_resolve_from_arrays(tuple(rows[0])), {**arrays_of(rows), "ids": ids})
        else:
            insert_many(conn, half_resolutions, rows)
            conn.execute(_MARK_RESOLVED, {"ids": ids})
    except IntegrityError as error:
        raise ResolutionConflict(", ".join(ids)) from error
    return recorded


@functools.cache
def _resolve_from_arrays(columns: tuple[str, ...]) -> TextClause:
    """PostgreSQL: the resolutions' insert and _MARK_RESOLVED as one statement.

    Under load each is a round trip of about a millisecond in a group commit of
    half-message commits, which is a chain of such round trips (docs/benchmarks.md).
    """
    # The UPDATE lists the ids itself, as _MARK_RESOLVED does, for the primary key index.
    # Joined to the insert's RETURNING, or matched to an array, it scanned the whole table
    # under a plan made while the table was small. A failed insert fails the statement.
    inserted = insert_from_arrays(half_resolutions, columns).text
    return text(
        f"WITH inserted AS ({inserted}) UPDATE half_messages SET next_check_at = NULL WHERE message_id IN :ids"
    ).bindparams(bindparam("ids", expanding=True))


# -- retention -----------------------------------------------------------------------------


def purge_resolved(conn: Connection, resolved_before: int, limit: int) -> int:
    """Forget resolutions older than the retention (their log entries go with truncation).

    Each delete states its condition again, so a recheck that reopens one of these
    messages meanwhile (another broker process, on PostgreSQL) keeps it: a reopened
    message has a next check time and no resolution row.
    """
    expired = select(half_resolutions.c.message_id).where(half_resolutions.c.resolved_at < resolved_before).limit(limit)
    ids = [row[0] for row in conn.execute(expired)]
    if ids:
        conn.execute(
            delete(half_messages).where(half_messages.c.message_id.in_(ids), half_messages.c.next_check_at.is_(None))
        )
        conn.execute(
            delete(half_resolutions).where(
                half_resolutions.c.message_id.in_(ids), half_resolutions.c.resolved_at < resolved_before
            )
        )
        still_indexed = select(half_messages.c.message_id).where(half_messages.c.message_id.in_(ids))
        conn.execute(
            delete(half_checks).where(half_checks.c.message_id.in_(ids), half_checks.c.message_id.not_in(still_indexed))
        )
    return len(ids)


# -- recheck -----------------------------------------------------------------------------------


def reopen_discarded(conn: Connection, message_id: str, next_check_at: int) -> bool:
    """DISCARDED → PREPARED: drop the DISCARDED resolution and count checks from 0 again.

    The delete is the compare-and-set: it matches only a DISCARDED resolution, so of two
    racing rechecks one reopens the message, and a committed or rolled-back message is
    never reopened. False if this call did not reopen it.
    """
    dropped = conn.execute(
        delete(half_resolutions).where(
            half_resolutions.c.message_id == message_id, half_resolutions.c.outcome == HalfState.DISCARDED.value
        )
    ).rowcount
    if not dropped:
        return False
    reopened = conn.execute(
        update(half_messages)
        .where(half_messages.c.message_id == message_id, half_messages.c.next_check_at.is_(None))
        .values(check_times=0, next_check_at=next_check_at)
    ).rowcount
    return bool(reopened)


# -- check history -------------------------------------------------------------------------------


def record_checks_sent(conn: Connection, sent: Sequence[CheckSent], at: int, answer: CheckAnswer | None) -> None:
    """Add claimed checks to their messages' history (awaiting an answer, unless ``answer`` is known).

    A message's earlier check still awaiting an answer got none in time: it becomes TIMEOUT.
    """
    if not sent:
        return
    ids = [check.message_id for check in sent]
    conn.execute(
        update(half_checks)
        .where(half_checks.c.message_id.in_(ids), half_checks.c.answer.is_(None))
        .values(answer=CheckAnswer.TIMEOUT.value, latency_ms=literal(at) - half_checks.c.at_ms)
    )
    upsert(
        conn,
        half_checks,
        [
            {
                "message_id": check.message_id,
                "slot": check.number % CHECK_HISTORY_KEPT,
                "at_ms": at,
                "instance_id": check.instance_id,
                "answer": None if answer is None else answer.value,
                "latency_ms": None if answer is None else 0,
            }
            for check in sent
        ],
        keys=("message_id", "slot"),
    )


def record_check_answer(conn: Connection, message_id: str, number: int, answer: CheckAnswer, latency_ms: int) -> None:
    """The answer to a check still awaiting one (a later check may have timed it out already)."""
    conn.execute(
        update(half_checks)
        .where(
            half_checks.c.message_id == message_id,
            half_checks.c.slot == number % CHECK_HISTORY_KEPT,
            half_checks.c.answer.is_(None),
        )
        .values(answer=answer.value, latency_ms=latency_ms)
    )


def settle_awaited_checks(
    conn: Connection, message_ids: Sequence[str], answer: CheckAnswer, now: int, *, polled_only: bool
) -> None:
    """Give the checks of ``message_ids`` still awaiting an answer this one.

    ``polled_only``: only checks handed to polling producers, whose answer is their commit or
    rollback (a callback's answer comes back from the call itself).
    """
    query = update(half_checks).where(half_checks.c.message_id.in_(list(message_ids)), half_checks.c.answer.is_(None))
    if polled_only:
        query = query.where(half_checks.c.instance_id.like(POLLER_PREFIX + "%"))
    conn.execute(query.values(answer=answer.value, latency_ms=literal(now) - half_checks.c.at_ms))


def _answer(stored: str | None) -> CheckAnswer | None:
    return None if stored is None else CheckAnswer(stored)


def checks_of(conn: Connection, message_id: str) -> list[CheckRecord]:
    rows = conn.execute(
        select(half_checks.c.at_ms, half_checks.c.instance_id, half_checks.c.answer, half_checks.c.latency_ms)
        .where(half_checks.c.message_id == message_id)
        .order_by(half_checks.c.at_ms, half_checks.c.slot)
    )
    return [
        CheckRecord(int(at), instance, _answer(answer), None if latency is None else int(latency))
        for at, instance, answer, latency in rows
    ]


def oldest_retained_offsets(conn: Connection) -> tuple[int | None, int | None]:
    """Lowest half offset and op offset still indexed (everything below may be truncated)."""
    half = conn.execute(select(func.min(half_messages.c.half_offset))).scalar()
    op = conn.execute(select(func.min(half_resolutions.c.op_offset))).scalar()
    return (None if half is None else int(half)), (None if op is None else int(op))


def count_indexed(conn: Connection) -> tuple[int, int]:
    halves = conn.execute(select(func.count()).select_from(half_messages)).scalar_one()
    resolutions = conn.execute(select(func.count()).select_from(half_resolutions)).scalar_one()
    return int(halves), int(resolutions)


# -- checker status --------------------------------------------------------------------------------


def prepared_by_group(conn: Connection) -> dict[str, tuple[int, int]]:
    """Per producer group: how many half messages are prepared and the oldest one's born timestamp.

    A half message is prepared exactly while it has a next check time (the check index).
    """
    rows = conn.execute(
        select(half_messages.c.producer_group, func.count(), func.min(half_messages.c.born_timestamp))
        .where(half_messages.c.next_check_at.isnot(None))
        .group_by(half_messages.c.producer_group)
    )
    return {str(group): (int(count), int(oldest)) for group, count, oldest in rows}
