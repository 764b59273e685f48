"""SQL for producer ids, epochs and per-partition sequence numbers (Kafka's producer state).

Sequence checks read the producer's sequence rows locked (``FOR UPDATE`` on
PostgreSQL; SQLite has one writer), decide every batch of a group commit in order,
and write the new states back in two statements. On PostgreSQL the usual case, each
batch the next one of its producer on its partition, is one conditional UPDATE
instead (see :func:`_advance_in_order`). The rows stay locked until the
append commits, so two copies of the same batch racing each other (a client retry,
another broker process) can never both be written. A writer only takes a sequence
row while it holds its partition's row lock, which every writer takes in one order.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, TextClause, bindparam, insert, select, text, tuple_, update
from sqlalchemy.exc import IntegrityError

from half_store.domain.errors import (
    OutOfOrderSequence,
    ProducerFenced,
    UnknownProducerId,
    ValidationFailed,
)
from half_store.domain.records import AppendResult, ProducerIdentity, Topic, now_ms
from half_store.domain.txn_state import UNFINISHED_STATES
from half_store.storage.bulk import quoted_columns
from half_store.storage.schema import (
    messages,
    producer_sequences,
    producers,
    transactions,
)
from half_store.storage.upsert import array_type, update_rows


def new_producer(
    conn: Connection, transaction_timeout_ms: int | None = None, principal: str | None = None
) -> tuple[int, int]:
    """A fresh idempotent producer of ``principal``: (producer id, epoch 0)."""
    now = now_ms()
    producer_id = conn.execute(
        insert(producers)
        .values(
            epoch=0, transaction_timeout_ms=transaction_timeout_ms, created_at=now, last_used_at=now, principal=principal
        )
        .returning(producers.c.producer_id)
    ).scalar_one()
    return int(producer_id), 0


def bump_transactional_producer(
    conn: Connection, transactional_id: str, transaction_timeout_ms: int, principal: str | None = None
) -> tuple[int, int, bool]:
    """InitProducerId for a transactional id: (producer id, new epoch, was it known before).

    The id passes to ``principal`` (who was allowed to write the transactional id), with the new epoch.
    """
    now = now_ms()
    row = conn.execute(
        update(producers)
        .where(producers.c.transactional_id == transactional_id)
        .values(
            epoch=producers.c.epoch + 1,
            transaction_timeout_ms=transaction_timeout_ms,
            last_used_at=now,
            principal=principal,
        )
        .returning(producers.c.producer_id, producers.c.epoch)
    ).first()
    if row is not None:
        return int(row[0]), int(row[1]), True
    try:
        with conn.begin_nested():
            producer_id = conn.execute(
                insert(producers)
                .values(
                    transactional_id=transactional_id,
                    epoch=0,
                    transaction_timeout_ms=transaction_timeout_ms,
                    created_at=now,
                    last_used_at=now,
                    principal=principal,
                )
                .returning(producers.c.producer_id)
            ).scalar_one()
    except IntegrityError:
        # Another process registered the id first: take the next epoch after theirs.
        return bump_transactional_producer(conn, transactional_id, transaction_timeout_ms, principal)
    return int(producer_id), 0, False


def owner(conn: Connection, producer_id: int) -> tuple[bool, str | None]:
    """(whether the producer id exists, the principal that obtained it)."""
    row = conn.execute(select(producers.c.principal).where(producers.c.producer_id == producer_id)).first()
    return (False, None) if row is None else (True, row[0])


def fence(conn: Connection, producer_id: int, epoch: int) -> None:
    """Bump a producer's epoch past ``epoch`` (a timed-out transaction's producer)."""
    conn.execute(
        update(producers)
        .where(producers.c.producer_id == producer_id, producers.c.epoch == epoch)
        .values(epoch=epoch + 1, last_used_at=now_ms())
    )


# Kafka's epochs are int16; a producer whose epoch would pass this gets a new producer id
# instead (as Kafka's coordinator does), since the epoch after it could not be written.
MAX_EPOCH = 32766


def bump_after_end(conn: Connection, producer_id: int, epoch: int) -> ProducerIdentity:
    """Transaction protocol v2: the producer's next epoch after a transaction ended at ``epoch``.

    A compare-and-set: if the epoch moved since (a new instance's InitProducerId), the caller
    is fenced. At the last epoch a transactional id moves to a new producer id, epoch 0, and
    the old id keeps its epoch, fenced for good.
    """
    if epoch >= MAX_EPOCH:
        return _new_producer_id_after(conn, producer_id, epoch)
    row = conn.execute(
        update(producers)
        .where(producers.c.producer_id == producer_id, producers.c.epoch == epoch)
        .values(epoch=epoch + 1, last_used_at=now_ms())
        .returning(producers.c.epoch)
    ).first()
    if row is None:
        raise ProducerFenced(f"producer {producer_id} epoch {epoch} is fenced by a newer epoch")
    return ProducerIdentity(producer_id, int(row[0]))


def _new_producer_id_after(conn: Connection, producer_id: int, epoch: int) -> ProducerIdentity:
    old = conn.execute(
        select(producers.c.transactional_id, producers.c.transaction_timeout_ms, producers.c.principal).where(
            producers.c.producer_id == producer_id, producers.c.epoch == epoch
        )
    ).first()
    if old is None:
        raise ProducerFenced(f"producer {producer_id} epoch {epoch} is fenced by a newer epoch")
    transactional_id, timeout_ms, principal = old
    now = now_ms()
    conn.execute(
        update(producers).where(producers.c.producer_id == producer_id).values(transactional_id=None, last_used_at=now)
    )
    new_id = conn.execute(
        insert(producers)
        .values(
            transactional_id=transactional_id, epoch=0, transaction_timeout_ms=timeout_ms, created_at=now,
            last_used_at=now, principal=principal,
        )
        .returning(producers.c.producer_id)
    ).scalar_one()
    return ProducerIdentity(int(new_id), 0, transactional_id)


def current_epoch(conn: Connection, producer_id: int) -> int | None:
    return current_epochs(conn, [producer_id]).get(producer_id)


# Built once: statements of every group commit of transactional writes.
_EPOCHS = select(producers.c.producer_id, producers.c.epoch).where(
    producers.c.producer_id.in_(bindparam("ids", expanding=True))
)
_TOUCH = (
    update(producers)
    .where(producers.c.producer_id.in_(bindparam("ids", expanding=True)))
    .values(last_used_at=bindparam("now"))
    .returning(producers.c.producer_id, producers.c.epoch, producers.c.transaction_timeout_ms)
)


def current_epochs(conn: Connection, producer_ids: Sequence[int]) -> dict[int, int]:
    """The producers' current epochs, by id (unknown ones left out)."""
    if not producer_ids:
        return {}
    rows = conn.execute(_EPOCHS, {"ids": sorted(set(producer_ids))})
    return {int(producer_id): int(epoch) for producer_id, epoch in rows}


@dataclass(frozen=True, slots=True)
class TouchedProducer:
    """A producer row locked by :func:`touch_many`: its epoch cannot change until this transaction ends."""

    epoch: int
    transaction_timeout_ms: int | None


def touch_many(conn: Connection, producer_ids: Sequence[int]) -> dict[int, TouchedProducer]:
    """Mark the producers used now, locking their rows; their epochs and transaction timeouts, by id
    (unknown ones left out).

    The epochs come back from the same statement that locks the rows, so they are the
    settled ones that a read after the lock would see, one round trip earlier.
    """
    rows = conn.execute(_TOUCH, {"ids": sorted(producer_ids), "now": now_ms()})
    return {
        int(producer_id): TouchedProducer(int(epoch), None if timeout is None else int(timeout))
        for producer_id, epoch, timeout in rows
    }


def check_epochs(conn: Connection, stamps: Sequence[tuple[int, int]]) -> None:
    """Refuse requests from unknown producers or fenced (older) epochs: ``(producer id, epoch)`` each, one query."""
    refuse_stale_epochs(current_epochs(conn, [producer_id for producer_id, _ in stamps]), stamps)


def refuse_stale_epochs(current: Mapping[int, int], stamps: Sequence[tuple[int, int]]) -> None:
    """:func:`check_epochs` against epochs already read: ``current``, producer id to epoch."""
    for producer_id, epoch in stamps:
        found = current.get(producer_id)
        if found is None:
            raise UnknownProducerId(f"unknown producer id {producer_id}; call POST /v1/producers first")
        if epoch < found:
            raise ProducerFenced(f"producer {producer_id} epoch {epoch} is fenced by epoch {found}")
        if epoch > found:
            raise ValidationFailed(f"producer {producer_id} has epoch {found}, not {epoch}")


@dataclass(frozen=True, slots=True)
class SequenceClaim:
    """A batch's place in its producer's sequence on one partition."""

    producer_id: int
    epoch: int
    topic: Topic
    partition: int
    base_sequence: int
    count: int

    @property
    def key(self) -> tuple[int, int, int]:
        return self.producer_id, self.topic.topic_id, self.partition

    @property
    def last_sequence(self) -> int:
        return self.base_sequence + self.count - 1


_SEQUENCE_STATES = select(
    producer_sequences.c.producer_id,
    producer_sequences.c.topic_id,
    producer_sequences.c.partition,
    producer_sequences.c.epoch,
    producer_sequences.c.last_sequence,
)


def claim_sequences(conn: Connection, claims: Sequence[SequenceClaim]) -> list[AppendResult | None]:
    """Advance each producer's sequence for its batch, in order, or recognise the batch as a retry.

    One answer per claim: None when the batch is new (its sequence row stays locked
    until the transaction ends), or the original offsets when it was written before.
    Raises OutOfOrderSequence for a gap or a partial overlap, ProducerFenced for an
    epoch older than the partition has seen. Claims on one partition are taken in
    order, so a batch and the next one may share a call.
    """
    if not claims:
        return []
    advanced = _advance_in_order(conn, claims) if conn.dialect.name == "postgresql" else set()
    if not advanced:
        return _claim_carefully(conn, claims)
    rest = iter(_claim_carefully(conn, [claim for claim in claims if claim.key not in advanced]))
    return [None if claim.key in advanced else next(rest) for claim in claims]


def _claim_carefully(conn: Connection, claims: Sequence[SequenceClaim]) -> list[AppendResult | None]:
    """:func:`claim_sequences` for any claims: read the sequences locked, decide each claim in order, write back."""
    if not claims:
        return []
    keys = sorted({claim.key for claim in claims})
    found = conn.execute(
        _SEQUENCE_STATES.where(
            tuple_(producer_sequences.c.producer_id, producer_sequences.c.topic_id, producer_sequences.c.partition).in_(keys)
        ).with_for_update()
    )
    stored = {(int(p), int(t), int(q)): (int(epoch), int(last)) for p, t, q, epoch, last in found}
    states = dict(stored)
    answers: list[AppendResult | None] = []
    for claim in claims:
        state = states.get(claim.key)
        if _follows(state, claim):
            states[claim.key] = (claim.epoch, claim.last_sequence)
            answers.append(None)
        else:
            answers.append(_retry_or_refuse(conn, claim, state))
    new_keys = [key for key in states if key not in stored]
    if new_keys:
        try:
            with conn.begin_nested():
                conn.execute(
                    insert(producer_sequences),
                    [{"producer_id": p, "topic_id": t, "partition": q, "epoch": states[(p, t, q)][0],
                      "last_sequence": states[(p, t, q)][1]} for p, t, q in new_keys],
                )
        except IntegrityError:
            # Another broker process wrote one of these producers' first batch on the same
            # partition just now: read the sequences again (nothing is written yet).
            return _claim_carefully(conn, claims)
    advanced = [key for key in stored if states[key] != stored[key]]
    if advanced:
        update_rows(
            conn, producer_sequences, ("producer_id", "topic_id", "partition"), ("epoch", "last_sequence"),
            [(*key, *states[key]) for key in advanced],
        )
    return answers


def _advance_in_order(conn: Connection, claims: Sequence[SequenceClaim]) -> set[tuple[int, int, int]]:
    """Advance, in one statement, every sequence whose claims are all next in line; their keys.

    The read under lock and the write back are two round trips of about 1.4 ms each
    under load on PostgreSQL (bench/results/history.md, round 10). A batch is almost always
    the next one, so the row is updated on that condition alone, as :func:`_follows`
    states it, and whatever the UPDATE does not return (a producer's first batch on a
    partition, a retry, a gap, a fenced epoch) goes the careful way. The UPDATE locks
    the rows it sets until the transaction ends, as the read ``FOR UPDATE`` does; a
    concurrent writer's change is waited for and the condition checked against it.
    """
    chains: dict[tuple[int, int, int], list[SequenceClaim]] = {}
    for claim in claims:
        chains.setdefault(claim.key, []).append(claim)
    rows = [
        (*key, chain[0].epoch, chain[0].base_sequence, chain[-1].last_sequence)
        for key, chain in chains.items()
        if all(
            later.epoch == earlier.epoch and later.base_sequence == earlier.last_sequence + 1
            for earlier, later in itertools.pairwise(chain)
        )
    ]
    if not rows:
        return set()
    arrays = {name: [row[i] for row in rows] for i, name in enumerate(_ADVANCE_COLUMNS)}
    return {(int(p), int(t), int(q)) for p, t, q in conn.execute(_ADVANCE_IN_ORDER, arrays)}


_ADVANCE_KEYS = ("producer_id", "topic_id", "partition")
# Per key: its columns, then the first claim's epoch and base sequence and the last claim's last sequence.
_ADVANCE_COLUMNS = (*_ADVANCE_KEYS, "epoch", "base_sequence", "last_sequence")


def _advance_statement() -> TextClause:
    # Each key column is also matched with ``= ANY`` for the primary key index, as
    # upsert.update_rows explains. A base sequence is an INTEGER like the last one.
    types = {name: array_type(producer_sequences, name.replace("base_", "last_")) for name in _ADVANCE_COLUMNS}
    arrays = ", ".join(f"CAST(:{name} AS {types[name]})" for name in _ADVANCE_COLUMNS)
    bounded = " AND ".join(f's."{key}" = ANY(CAST(:{key} AS {types[key]}))' for key in _ADVANCE_KEYS)
    matches = " AND ".join(f's."{key}" = given."{key}"' for key in _ADVANCE_KEYS)
    return text(
        "UPDATE producer_sequences AS s SET epoch = given.epoch, last_sequence = given.last_sequence"
        f" FROM unnest({arrays}) AS given ({quoted_columns(_ADVANCE_COLUMNS)})"
        f" WHERE {bounded} AND {matches}"
        " AND ((s.epoch = given.epoch AND s.last_sequence = given.base_sequence - 1)"
        " OR (s.epoch < given.epoch AND given.base_sequence = 0))"
        ' RETURNING s.producer_id, s.topic_id, s."partition"'
    )


_ADVANCE_IN_ORDER = _advance_statement()


def _follows(state: tuple[int, int] | None, claim: SequenceClaim) -> bool:
    """Whether the batch is the next one: right after the last, or the first of a new epoch."""
    if state is None:
        return claim.base_sequence == 0
    epoch, last = state
    return (epoch == claim.epoch and last == claim.base_sequence - 1) or (epoch < claim.epoch and claim.base_sequence == 0)


def _retry_or_refuse(conn: Connection, claim: SequenceClaim, state: tuple[int, int] | None) -> AppendResult:
    """A batch that is not the next one: the original offsets of a retry, or the error."""
    if state is None:
        raise OutOfOrderSequence(
            f"first batch of producer {claim.producer_id} on {claim.topic.name}/{claim.partition} must start at "
            f"sequence 0, got {claim.base_sequence}"
        )
    epoch, last = state
    if epoch > claim.epoch:
        raise ProducerFenced(f"producer {claim.producer_id} epoch {claim.epoch} is fenced by epoch {epoch}")
    if epoch == claim.epoch and claim.last_sequence <= last:
        original = _written_batch(conn, claim.producer_id, claim.topic, claim.partition, claim.base_sequence, claim.count)
        if original is not None:
            return original
    expected = 0 if epoch < claim.epoch else last + 1
    raise OutOfOrderSequence(
        f"producer {claim.producer_id} on {claim.topic.name}/{claim.partition}: expected sequence {expected}, "
        f"got {claim.base_sequence}"
    )


def _written_batch(
    conn: Connection, producer_id: int, topic: Topic, partition: int, base_sequence: int, count: int
) -> AppendResult | None:
    """The offsets a batch got when it was first written, if exactly that batch is in the log."""
    rows = conn.execute(
        select(messages.c.sequence, messages.c.offset, messages.c.record_count).where(
            messages.c.topic_id == topic.topic_id,
            messages.c.partition == partition,
            messages.c.producer_id == producer_id,
            messages.c.sequence.in_([base_sequence, base_sequence + count - 1]),
        )
    ).all()
    found = {int(seq): (int(off), int(n)) for seq, off, n in rows}
    first = found.get(base_sequence)
    if first is not None and first[1] == count:
        # Stored as one row: a record batch, or a lone record.
        return AppendResult(partition, first[0], count, duplicate=True)
    # Stored a row per record (written before record batches were).
    last = found.get(base_sequence + count - 1)
    if first is None or last is None or first[1] != 1 or last[0] - first[0] != count - 1:
        return None
    return AppendResult(partition, first[0], count, duplicate=True)


def expire_transactional_ids(conn: Connection, unused_since: int) -> int:
    """Forget transactional ids unused since ``unused_since`` (Kafka: transactional.id.expiration.ms)."""
    busy = select(transactions.c.producer_id).where(transactions.c.state.in_([s.value for s in UNFINISHED_STATES]))
    stale = select(producers.c.producer_id).where(
        producers.c.transactional_id.isnot(None),
        producers.c.last_used_at < unused_since,
        producers.c.producer_id.not_in(busy),
    )
    ids = [row[0] for row in conn.execute(stale)]
    if ids:
        conn.execute(producer_sequences.delete().where(producer_sequences.c.producer_id.in_(ids)))
        conn.execute(producers.delete().where(producers.c.producer_id.in_(ids)))
    return len(ids)
