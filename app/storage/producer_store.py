"""SQL for producer ids, epochs and per-partition sequence numbers (Kafka's producer state).

Sequence checks are compare-and-set updates, not read-then-write: the UPDATE that
advances a producer's sequence only matches when the batch is the next one, and it
locks the row until the append commits, so two copies of the same batch racing
each other (a client retry, another broker process) can never both be written.
"""

from __future__ import annotations

from sqlalchemy import Connection, and_, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from app.domain import AppendResult, Topic, now_ms
from app.errors import InvalidRequest, OutOfOrderSequence, ProducerFenced, UnknownProducerId
from app.storage.schema import messages, producer_sequences, producers, transactions
from app.txn_state import UNFINISHED_STATES


def new_producer(conn: Connection, transaction_timeout_ms: int | None = None) -> tuple[int, int]:
    """A fresh idempotent producer: (producer id, epoch 0)."""
    now = now_ms()
    producer_id = conn.execute(
        insert(producers)
        .values(epoch=0, transaction_timeout_ms=transaction_timeout_ms, created_at=now, last_used_at=now)
        .returning(producers.c.producer_id)
    ).scalar_one()
    return int(producer_id), 0


def bump_transactional_producer(
    conn: Connection, transactional_id: str, transaction_timeout_ms: int
) -> tuple[int, int, bool]:
    """InitProducerId for a transactional id: (producer id, new epoch, was it known before)."""
    now = now_ms()
    row = conn.execute(
        update(producers)
        .where(producers.c.transactional_id == transactional_id)
        .values(epoch=producers.c.epoch + 1, transaction_timeout_ms=transaction_timeout_ms, last_used_at=now)
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
                )
                .returning(producers.c.producer_id)
            ).scalar_one()
    except IntegrityError:
        # Another process registered the id first: take the next epoch after theirs.
        return bump_transactional_producer(conn, transactional_id, transaction_timeout_ms)
    return int(producer_id), 0, False


def fence(conn: Connection, producer_id: int, epoch: int) -> None:
    """Bump a producer's epoch past ``epoch`` (a timed-out transaction's producer)."""
    conn.execute(
        update(producers)
        .where(producers.c.producer_id == producer_id, producers.c.epoch == epoch)
        .values(epoch=epoch + 1, last_used_at=now_ms())
    )


def current_epoch(conn: Connection, producer_id: int) -> int | None:
    value = conn.execute(select(producers.c.epoch).where(producers.c.producer_id == producer_id)).scalar()
    return None if value is None else int(value)


def touch(conn: Connection, producer_id: int) -> int | None:
    """Mark the producer used now (locking its row); returns its transaction timeout."""
    return conn.execute(
        update(producers)
        .where(producers.c.producer_id == producer_id)
        .values(last_used_at=now_ms())
        .returning(producers.c.transaction_timeout_ms)
    ).scalar()


def check_epoch(conn: Connection, producer_id: int, epoch: int) -> None:
    """Refuse a request from an unknown producer or a fenced (older) epoch."""
    current = current_epoch(conn, producer_id)
    if current is None:
        raise UnknownProducerId(f"unknown producer id {producer_id}; call POST /v1/producers first")
    if epoch < current:
        raise ProducerFenced(f"producer {producer_id} epoch {epoch} is fenced by epoch {current}")
    if epoch > current:
        raise InvalidRequest(f"producer {producer_id} has epoch {current}, not {epoch}")


def claim_sequence(
    conn: Connection, producer_id: int, epoch: int, topic: Topic, partition: int, base_sequence: int, count: int
) -> AppendResult | None:
    """Advance the producer's sequence for a batch, or recognise the batch as a retry.

    Returns None when the batch is new (and the sequence row stays locked until the
    transaction ends), or the original offsets when it was written before. Raises
    OutOfOrderSequence for a gap or a partial overlap.
    """
    last = base_sequence + count - 1
    key = and_(
        producer_sequences.c.producer_id == producer_id,
        producer_sequences.c.topic_id == topic.topic_id,
        producer_sequences.c.partition == partition,
    )
    advanced = conn.execute(
        update(producer_sequences)
        .where(
            key,
            or_(
                and_(producer_sequences.c.epoch == epoch, producer_sequences.c.last_sequence == base_sequence - 1),
                and_(producer_sequences.c.epoch < epoch, base_sequence == 0),
            ),
        )
        .values(epoch=epoch, last_sequence=last)
    ).rowcount
    if advanced:
        return None
    state = conn.execute(select(producer_sequences.c.epoch, producer_sequences.c.last_sequence).where(key)).first()
    if state is None:
        if base_sequence != 0:
            raise OutOfOrderSequence(
                f"first batch of producer {producer_id} on {topic.name}/{partition} must start at sequence 0, "
                f"got {base_sequence}"
            )
        try:
            with conn.begin_nested():
                conn.execute(
                    insert(producer_sequences).values(
                        producer_id=producer_id,
                        topic_id=topic.topic_id,
                        partition=partition,
                        epoch=epoch,
                        last_sequence=last,
                    )
                )
        except IntegrityError:
            return claim_sequence(conn, producer_id, epoch, topic, partition, base_sequence, count)
        return None
    stored_epoch, last_sequence = int(state[0]), int(state[1])
    if stored_epoch > epoch:
        raise ProducerFenced(f"producer {producer_id} epoch {epoch} is fenced by epoch {stored_epoch}")
    if stored_epoch == epoch and last <= last_sequence:
        original = _written_batch(conn, producer_id, topic, partition, base_sequence, count)
        if original is not None:
            return original
    expected = 0 if stored_epoch < epoch else last_sequence + 1
    raise OutOfOrderSequence(
        f"producer {producer_id} on {topic.name}/{partition}: expected sequence {expected}, got {base_sequence}"
    )


def _written_batch(
    conn: Connection, producer_id: int, topic: Topic, partition: int, base_sequence: int, count: int
) -> AppendResult | None:
    """The offsets a batch got when it was first written, if exactly that batch is in the log."""
    rows = conn.execute(
        select(messages.c.sequence, messages.c.offset).where(
            messages.c.topic_id == topic.topic_id,
            messages.c.partition == partition,
            messages.c.producer_id == producer_id,
            messages.c.sequence.in_([base_sequence, base_sequence + count - 1]),
        )
    ).all()
    offsets = {int(seq): int(off) for seq, off in rows}
    first, last = offsets.get(base_sequence), offsets.get(base_sequence + count - 1)
    if first is None or last is None or last - first != count - 1:
        return None
    return AppendResult(partition, first, count, duplicate=True)


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
