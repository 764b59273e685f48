"""Share-group records (KIP-932's in-flight records): their states, moves and delivery plan.

A share group keeps, per (group, topic, partition), an *end offset* (everything below
it has been looked at) and a small table of in-flight records below it. A record's
life, as in KIP-932::

    AVAILABLE --receive--> ACQUIRED --ACCEPT / transaction commits--> ACCEPTED
        ^                     |  --REJECT / last delivery ended-->  ARCHIVED (dead letter)
        +--RELEASE / lock expiry / transaction aborts--+

ACCEPTED and ARCHIVED records leave the table (storage deletes them): the lowest
in-flight offset, or the end offset when there is none, is KIP-932's share-partition
start offset, so accepted records at the start collapse into it without a write.

Everything here is pure: the service reads records under the share partition's row
lock, asks these functions what to do, and writes the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum


class RecordState(StrEnum):
    AVAILABLE = "AVAILABLE"  # may be handed out once its visible_at has passed
    ACQUIRED = "ACQUIRED"  # locked by one delivery's receipt (or a transaction) until visible_at
    ACCEPTED = "ACCEPTED"  # done; never delivered to the group again
    ARCHIVED = "ARCHIVED"  # given up: appended to the group's dead-letter topic

    @property
    def is_terminal(self) -> bool:
        return self in (RecordState.ACCEPTED, RecordState.ARCHIVED)


TRANSITIONS: dict[RecordState, frozenset[RecordState]] = {
    RecordState.AVAILABLE: frozenset({RecordState.ACQUIRED, RecordState.ARCHIVED}),
    RecordState.ACQUIRED: frozenset({RecordState.AVAILABLE, RecordState.ACCEPTED, RecordState.ARCHIVED}),
    RecordState.ACCEPTED: frozenset(),
    RecordState.ARCHIVED: frozenset(),
}


class IllegalRecordTransition(RuntimeError):
    """A move the table does not allow: a bug in the caller, never a client's mistake."""


def is_transition_valid(source: RecordState, target: RecordState) -> bool:
    return target in TRANSITIONS[source]


def transition(source: RecordState, target: RecordState) -> RecordState:
    """``target``, if the table allows the move from ``source``; raises otherwise."""
    if not is_transition_valid(source, target):
        raise IllegalRecordTransition(f"a share record cannot move from {source} to {target}")
    return target


class AckType(StrEnum):
    ACCEPT = "ACCEPT"
    RELEASE = "RELEASE"
    REJECT = "REJECT"


class DeadLetterReason(StrEnum):
    REJECTED = "REJECTED"  # a consumer said REJECT
    MAX_DELIVERIES = "MAX_DELIVERIES"  # its last allowed delivery ended without ACCEPT


# Why one receipt of a batch was not applied (the per-ack answer; never an HTTP error).
RECEIPT_EXPIRED = "RECEIPT_EXPIRED"  # the lock it names expired, was released, or the record was delivered again
UNKNOWN_RECEIPT = "UNKNOWN_RECEIPT"  # not a receipt this broker signed for this group

SharePartitionKey = tuple[str, int, int]  # (group, topic_id, partition)


@dataclass(frozen=True, slots=True)
class InFlightRecord:
    """One record between a share partition's start and end offsets.

    ``visible_at`` (ms) is when the record may be handed out: for ACQUIRED the end of
    its lock, for AVAILABLE the end of a release's delay (0: at once). ``generation``
    counts the locks taken and ended on it, so a receipt names exactly one lock.
    ``txn_id``: the transaction whose acknowledgement holds the lock (it ends with it).
    """

    group: str
    topic_id: int
    partition: int
    offset: int
    state: RecordState
    delivery_count: int
    generation: int
    visible_at: int
    key: str | None = None
    txn_id: str | None = None

    @classmethod
    def fresh(cls, group: str, topic_id: int, partition: int, offset: int, key: str | None) -> InFlightRecord:
        """A message read from the log for the first time: available, never delivered."""
        return cls(group, topic_id, partition, offset, RecordState.AVAILABLE, 0, 0, 0, key)

    @property
    def share_key(self) -> SharePartitionKey:
        return (self.group, self.topic_id, self.partition)

    def locked(self, now: int) -> bool:
        """Held by a live lock: a delivery's (until visible_at) or a transaction's (until it ends)."""
        return self.state is RecordState.ACQUIRED and (self.txn_id is not None or self.visible_at > now)

    def expired(self, now: int) -> InFlightRecord:
        """The record as it is at ``now``: a lock that ran out without an acknowledgement is released.

        A transaction's lock never runs out by time: only the transaction's end releases it.
        """
        if self.state is RecordState.ACQUIRED and self.txn_id is None and self.visible_at <= now:
            return self._moved(RecordState.AVAILABLE, generation=self.generation + 1)
        return self

    def deliverable(self, now: int) -> bool:
        return self.state is RecordState.AVAILABLE and self.visible_at <= now

    def acquire(self, now: int, lock_ms: int) -> InFlightRecord:
        """Handed out: a new lock until ``now + lock_ms``, one more delivery."""
        return self._moved(
            RecordState.ACQUIRED,
            delivery_count=self.delivery_count + 1,
            generation=self.generation + 1,
            visible_at=now + lock_ms,
        )

    def holds(self, generation: int, now: int) -> bool:
        """Whether a receipt for lock ``generation`` still holds this record's lock."""
        return (
            self.state is RecordState.ACQUIRED
            and self.generation == generation
            and self.txn_id is None
            and self.visible_at > now
        )

    def extend(self, now: int, lock_ms: int) -> InFlightRecord:
        """The same lock, renewed until ``now + lock_ms`` (no state change)."""
        assert self.state is RecordState.ACQUIRED
        return replace(self, visible_at=now + lock_ms)

    def enlist(self, txn_id: str, until: int) -> InFlightRecord:
        """The lock passes to a transaction: it lasts until the transaction ends (``until``: its deadline)."""
        assert self.state is RecordState.ACQUIRED
        return replace(self, txn_id=txn_id, visible_at=until)

    def accept(self) -> InFlightRecord:
        return self._moved(RecordState.ACCEPTED, txn_id=None)

    def archive(self) -> InFlightRecord:
        return self._moved(RecordState.ARCHIVED, txn_id=None)

    def release(self, now: int, delay_ms: int, max_deliveries: int) -> tuple[InFlightRecord, DeadLetterReason | None]:
        """The lock ends without ACCEPT (RELEASE, a transaction's abort): available again
        after ``delay_ms``, or archived if that was its last allowed delivery. The delivery
        count is kept: it counts deliveries, not acknowledgements."""
        if self.delivery_count >= max_deliveries:
            return self.archive(), DeadLetterReason.MAX_DELIVERIES
        later = now + delay_ms
        return self._moved(RecordState.AVAILABLE, generation=self.generation + 1, visible_at=later, txn_id=None), None

    def acknowledge(
        self, ack: AckType, now: int, delay_ms: int, max_deliveries: int
    ) -> tuple[InFlightRecord, DeadLetterReason | None]:
        """What a consumer's acknowledgement makes of a record whose lock it holds."""
        if ack is AckType.ACCEPT:
            return self.accept(), None
        if ack is AckType.REJECT:
            return self.archive(), DeadLetterReason.REJECTED
        return self.release(now, delay_ms, max_deliveries)

    def _moved(self, target: RecordState, **changes: object) -> InFlightRecord:
        return replace(self, state=transition(self.state, target), **changes)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class FreshMessage:
    """A committed message above a share partition's end offset: where it is and its key."""

    offset: int
    key: str | None


@dataclass
class DeliveryPlan:
    """What one receive does in one share partition (computed by :func:`plan_delivery`).

    ``acquired``: records to hand out, already moved to ACQUIRED (in offset order;
    ``new`` ones are inserted, the others updated). ``dead_letters``: records whose
    last allowed delivery has ended, to archive. ``parked``: fresh messages kept
    AVAILABLE because their key is locked (ordered receives). ``end_offset``: the
    first fresh message not taken into the table (None: all of them were).
    """

    acquired: list[InFlightRecord] = field(default_factory=list)
    new: set[int] = field(default_factory=set)  # offsets of acquired records that are not in the table yet
    dead_letters: list[InFlightRecord] = field(default_factory=list)
    parked: list[InFlightRecord] = field(default_factory=list)
    end_offset: int | None = None


def plan_delivery(
    group: str,
    topic_id: int,
    partition: int,
    in_flight: Sequence[InFlightRecord],
    fresh: Sequence[FreshMessage],
    *,
    budget: int,
    now: int,
    lock_ms: int,
    max_deliveries: int,
    ordered: bool,
) -> DeliveryPlan:
    """Choose up to ``budget`` records to hand out: in-flight ones first, then fresh ones, in offset order.

    An available record whose deliveries are used up is archived instead of handed out.
    With ``ordered``, a record whose key has an earlier record still in flight (locked,
    waiting out a release delay, or handed out in this same plan) is not handed out, so
    one key's messages are processed one at a time in offset order. ``in_flight`` must
    then hold every in-flight record of the partition; without it, only deliverable ones
    are needed. Records without a key are never held back.
    """
    plan = DeliveryPlan()
    busy_keys: set[str] = set()

    def take(record: InFlightRecord) -> bool:
        if ordered and record.key is not None and record.key in busy_keys:
            return False
        if len(plan.acquired) >= budget:
            return False
        plan.acquired.append(record.acquire(now, lock_ms))
        return True

    for record in sorted(in_flight, key=lambda r: r.offset):
        current = record.expired(now)
        if current.deliverable(now) and current.delivery_count >= max_deliveries:
            plan.dead_letters.append(current.archive())
            continue  # gone from the table: it holds no key back
        if current.deliverable(now):
            take(current)
        if current.key is not None:  # handed out now, or still waiting: either way later ones of its key wait
            busy_keys.add(current.key)
    for message in fresh:
        record = InFlightRecord.fresh(group, topic_id, partition, message.offset, message.key)
        if take(record):
            plan.new.add(message.offset)
            if message.key is not None:
                busy_keys.add(message.key)
        elif ordered and message.key in busy_keys:
            plan.parked.append(record)
        else:
            plan.end_offset = message.offset  # the budget is spent: the rest stays in the log for later
            break
    return plan
