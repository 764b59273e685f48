"""Producer sequences as the storage keeps them: each batch next in line, a retry recognised, a gap refused.

On PostgreSQL the in-order case is one conditional UPDATE and everything else goes the
careful way (a locked read); these tests mix both kinds of claim in one call, on both
databases, and check the answers and what the sequences say afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, select, update

from half_store.domain.constants import VALUE_JSON
from half_store.domain.errors import OutOfOrderSequence, ProducerFenced
from half_store.domain.records import AppendResult, ProducerIdentity, ProducerStamp, Record, Topic
from half_store.storage import log_store, producer_store
from half_store.storage.database import Database, open_database
from half_store.storage.producer_store import SequenceClaim
from half_store.storage.schema import producer_sequences, producers

Key = tuple[int, int, int]


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    opened = open_database(database_url)
    yield opened
    opened.dispose()


@pytest.fixture
def topic(database: Database) -> Topic:
    with database.writer.begin() as conn:
        return log_store.create_topic(conn, "t", 3)


def producer(database: Database) -> int:
    with database.writer.begin() as conn:
        producer_id, _ = producer_store.new_producer(conn)
    return producer_id


def written(database: Database, claim: SequenceClaim) -> int:
    """Claim and append ``claim``'s batch in a transaction of its own, as a stamped append does; its base offset."""
    records = [Record(None, b"1", VALUE_JSON, None, 0)] * claim.count
    stamp = ProducerStamp(claim.producer_id, claim.epoch, claim.base_sequence)
    with database.writer.begin() as conn:
        assert producer_store.claim_sequences(conn, [claim]) == [None]
        return log_store.append(conn, claim.topic, claim.partition, records, stamp, as_batch=True)


def sequences(conn: Connection) -> dict[Key, tuple[int, int]]:
    rows = conn.execute(
        select(
            producer_sequences.c.producer_id,
            producer_sequences.c.topic_id,
            producer_sequences.c.partition,
            producer_sequences.c.epoch,
            producer_sequences.c.last_sequence,
        )
    )
    return {(p, t, q): (epoch, last) for p, t, q, epoch, last in rows}


def test_batches_next_in_line_advance_together_with_first_batches_and_retries(database: Database, topic: Topic) -> None:
    first, second = producer(database), producer(database)
    earlier = written(database, SequenceClaim(first, 0, topic, 0, 0, 5))
    retried = SequenceClaim(first, 0, topic, 1, 0, 3)
    retried_offset = written(database, retried)
    written(database, SequenceClaim(second, 0, topic, 0, 0, 2))
    claims = [
        SequenceClaim(first, 0, topic, 0, 5, 5),  # next in line on partition 0 ...
        SequenceClaim(second, 0, topic, 0, 2, 4),  # ... and another producer's on the same partition
        retried,  # a client's retry of a written batch, among new ones
        SequenceClaim(first, 0, topic, 0, 10, 1),  # the one after, in the same call
        SequenceClaim(second, 0, topic, 2, 0, 7),  # a first batch on partition 2
    ]
    with database.writer.begin() as conn:
        answers = producer_store.claim_sequences(conn, claims)
        stored = sequences(conn)
    assert answers == [None, None, AppendResult(1, retried_offset, 3, duplicate=True), None, None]
    assert earlier == 0
    t = topic.topic_id
    assert stored == {
        (first, t, 0): (0, 10),
        (first, t, 1): (0, 2),
        (second, t, 0): (0, 5),
        (second, t, 2): (0, 6),
    }


@pytest.mark.parametrize(
    ("base_sequence", "epoch", "refusal"),
    [
        (7, 0, OutOfOrderSequence),  # a gap after sequence 4
        (3, 0, OutOfOrderSequence),  # overlaps the written batch without being it
        (5, 1, OutOfOrderSequence),  # a new epoch starts at sequence 0
    ],
    ids=["gap", "partial-overlap", "new-epoch-not-at-zero"],
)
def test_a_batch_out_of_line_is_refused_and_nothing_advances(
    database: Database, topic: Topic, base_sequence: int, epoch: int, refusal: type[Exception]
) -> None:
    first = producer(database)
    written(database, SequenceClaim(first, 0, topic, 0, 0, 5))
    written(database, SequenceClaim(first, 0, topic, 1, 0, 5))
    with database.writer.connect() as conn:
        before = sequences(conn)
    in_order = SequenceClaim(first, 0, topic, 1, 5, 5)
    with pytest.raises(refusal), database.writer.begin() as conn:
        producer_store.claim_sequences(conn, [in_order, SequenceClaim(first, epoch, topic, 0, base_sequence, 2)])
    with database.writer.connect() as conn:
        assert sequences(conn) == before


def test_a_chain_that_breaks_inside_one_call_is_refused(database: Database, topic: Topic) -> None:
    first = producer(database)
    written(database, SequenceClaim(first, 0, topic, 0, 0, 5))
    chain = [SequenceClaim(first, 0, topic, 0, 5, 5), SequenceClaim(first, 0, topic, 0, 11, 5)]
    with pytest.raises(OutOfOrderSequence, match="expected sequence 10, got 11"), database.writer.begin() as conn:
        producer_store.claim_sequences(conn, chain)


def test_a_new_epoch_starts_over_and_fences_the_old_one(database: Database, topic: Topic) -> None:
    first = producer(database)
    written(database, SequenceClaim(first, 0, topic, 0, 0, 5))
    with database.writer.begin() as conn:
        assert producer_store.claim_sequences(conn, [SequenceClaim(first, 1, topic, 0, 0, 3)]) == [None]
        assert sequences(conn)[(first, topic.topic_id, 0)] == (1, 2)
    with pytest.raises(ProducerFenced), database.writer.begin() as conn:
        producer_store.claim_sequences(conn, [SequenceClaim(first, 0, topic, 0, 5, 1)])


def test_an_epoch_bump_after_an_end_is_a_compare_and_set_and_moves_to_a_new_id_at_the_last_epoch(database: Database) -> None:
    """Transaction protocol v2: every end moves the producer on; the int16 epochs running out give a new id."""
    with database.writer.begin() as conn:
        producer_id, epoch, _ = producer_store.bump_transactional_producer(conn, "tx", 60_000)
        assert producer_store.bump_after_end(conn, producer_id, epoch) == ProducerIdentity(producer_id, epoch + 1)
        with pytest.raises(ProducerFenced):  # the old epoch again: someone moved it on already
            producer_store.bump_after_end(conn, producer_id, epoch)
        conn.execute(update(producers).where(producers.c.producer_id == producer_id).values(epoch=producer_store.MAX_EPOCH))
        moved = producer_store.bump_after_end(conn, producer_id, producer_store.MAX_EPOCH)
        assert moved.producer_id != producer_id and moved.producer_epoch == 0 and moved.transactional_id == "tx"
        # InitProducerId for the transactional id now finds the new id; the old one stays fenced at its last epoch.
        again_id, again_epoch, known = producer_store.bump_transactional_producer(conn, "tx", 60_000)
        assert (again_id, again_epoch, known) == (moved.producer_id, 1, True)
        assert producer_store.current_epoch(conn, producer_id) == producer_store.MAX_EPOCH
