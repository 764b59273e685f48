"""The blocking :class:`Consumer`: a member of its consumer group, with a stated delivery guarantee.

The consumer joins its group on first use and heartbeats in a background thread. The
broker assigns partitions (KIP-848: server side, sticky, cooperative); the consumer
takes partitions up and gives them up inside :meth:`Consumer.poll`, between batches,
committing first where its guarantee needs it. ``delivery`` says what a crash costs:

- ``"at_most_once"``: offsets are committed before messages are handed out; a crash
  loses the batch in hand, never repeats it.
- ``"at_least_once"`` (default): committed after processing, i.e. by ``commit()`` or, with
  ``auto_commit``, by the next ``poll()`` (what the previous polls returned), and before a
  revoked partition is let go; a crash repeats what was not committed, never loses it.
- ``"exactly_once"``: :meth:`Consumer.process_exactly_once` sends the outputs and the input
  offsets in one transaction, as this member at its current epoch; the broker fences a
  member that lost its partitions, so a crash neither loses nor repeats.

With ``partitions=[...]`` the consumer reads exactly those, without joining the group
(and while the group has live members, the broker refuses its commits).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Unpack

from sdk import calls
from sdk._base import SyncBase
from sdk._connection import ConnectionOptions
from sdk._consumer_core import MAX_BROKER_WAIT_MS, ConsumerCore
from sdk._membership import Membership, exactly_once_committer
from sdk._txn_state import TransactionState
from sdk.calls import TopicPartition
from sdk.errors import (
    BrokerUnavailableError,
    FencedMemberEpochError,
    HalfmqError,
    IllegalStateError,
    OffsetOutOfRangeError,
    UnknownMemberError,
)
from sdk.message import Message
from sdk.models import ConsumerPositions, GroupMetadata, TopicMetadata

if TYPE_CHECKING:
    from sdk.transactional import TransactionalProducer

logger = logging.getLogger("halfmq.sdk")

DEFAULT_LONG_POLL_SLICE = 0.5
"""With several partitions, the longest wait on one of them before looking at the others."""

PartitionsCallback = Callable[[list[TopicPartition]], object]
Outputs = Iterable[Message] | Message | None
COMMIT_ATTEMPTS = 5
"""``process_exactly_once`` sends a commit whose outcome is unknown this many times before it gives up."""


def batch_start(batch: Iterable[Message]) -> dict[TopicPartition, int]:
    """Where each partition of a batch starts: the positions that read it all again."""
    start: dict[TopicPartition, int] = {}
    for message in batch:
        assert message.partition is not None and message.offset is not None
        tp = (message.topic, message.partition)
        start[tp] = min(start.get(tp, message.offset), message.offset)
    return start


def outputs_of(produced: Outputs) -> list[Message]:
    """What a handler returned, as a list of messages to send."""
    if produced is None:
        return []
    if isinstance(produced, Message):
        return [produced]
    return list(produced)


class Consumer(SyncBase):
    """``Consumer(url, group, topics, isolation_level="read_committed", delivery="at_least_once")``.

    ``poll(timeout)`` returns the next messages (possibly none), long-polling the
    broker up to ``timeout`` seconds; iterating yields messages one at a time until
    :meth:`close`. A partition starts from the group's committed offset, else from the
    beginning (``auto_offset_reset="latest"``: from the end). :meth:`commit` commits
    everything returned so far. ``on_assigned`` / ``on_revoked`` are called from
    ``poll()`` with the partitions taken up / given up. Not thread-safe: use one per
    thread (the heartbeat thread is the consumer's own).

    The broker long-polls one partition per request, so with several partitions and
    nothing to read the consumer parks on them in turn for ``long_poll_slice``
    seconds each: a new message is seen within about that long.
    """

    def __init__(
        self,
        url: str,
        group: str,
        topics: str | Iterable[str],
        isolation_level: str = "read_committed",
        *,
        delivery: str = "at_least_once",
        auto_commit: bool = True,
        on_assigned: PartitionsCallback | None = None,
        on_revoked: PartitionsCallback | None = None,
        session_timeout_ms: int | None = None,
        partitions: Iterable[TopicPartition] | None = None,
        auto_offset_reset: str = "earliest",
        tag: str | None = None,
        max_poll_messages: int = 500,
        long_poll_slice: float = DEFAULT_LONG_POLL_SLICE,
        **connection: Unpack[ConnectionOptions],
    ) -> None:
        super().__init__(url, **connection)
        self._core = ConsumerCore(
            group, topics, partitions=partitions, isolation_level=isolation_level, auto_offset_reset=auto_offset_reset,
            delivery=delivery, auto_commit=auto_commit, tag=tag,
        )
        self._membership = None if partitions is not None else Membership(group, self._core.topics, session_timeout_ms)
        self.on_assigned = on_assigned
        self.on_revoked = on_revoked
        self.max_poll_messages = max_poll_messages
        self.long_poll_slice = long_poll_slice
        # Held for every membership request and every commit, so a commit always carries
        # the epoch of the latest heartbeat answer and never races one.
        self._lock = threading.RLock()
        self._assignment_changed = threading.Event()
        self._wake_heartbeat = threading.Event()
        self._stopping = threading.Event()
        self._heartbeats: threading.Thread | None = None

    # -- what the consumer is ---------------------------------------------------------------

    @property
    def group(self) -> str:
        """The consumer group whose offsets this consumer resumes from and commits."""
        return self._core.group

    @property
    def isolation_level(self) -> str:
        """``read_committed`` (only committed transactional data) or ``read_uncommitted``."""
        return self._core.isolation_level

    @property
    def delivery(self) -> str:
        """``at_most_once``, ``at_least_once`` or ``exactly_once``: see the module docstring."""
        return self._core.delivery

    def group_metadata(self) -> GroupMetadata | None:
        """This member's id and current epoch (``None`` without a membership): what its commits carry."""
        with self._lock:
            return self._membership.metadata() if self._membership is not None else None

    def assignment(self) -> list[TopicPartition]:
        """The ``(topic, partition)`` pairs this consumer reads now (joining the group on first use)."""
        self._ensure_ready()
        self._reconcile()
        return sorted(self._core.positions)

    def positions(self) -> ConsumerPositions:
        """Next offset to read per partition: what ``commit()`` would commit.

        Pass it to :meth:`TransactionalProducer.send_offsets_to_transaction` in a
        consume-transform-produce loop; it carries this member's id and epoch, so the
        broker accepts it while the group has members (or use :meth:`process_exactly_once`).
        """
        self._ensure_ready()
        return ConsumerPositions(self._core.positions, self.group_metadata(), self.group_metadata)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Read ``(topic, partition)`` from ``offset`` next."""
        self._ensure_ready()
        self._core.seek((topic, partition), offset)

    def seek_to_time(self, timestamp_ms: int) -> None:
        """Read every assigned partition from the first message written at or after ``timestamp_ms``
        (ms since the epoch; a partition with none yet from its end): Kafka's ``offsetsForTimes`` + ``seek``."""
        assigned = self.assignment()
        for topic in sorted({t for t, _ in assigned}):
            found = self._transport.call(calls.offsets_for_time(topic, timestamp_ms, isolation=self.isolation_level))
            for t, partition in assigned:
                if t == topic and partition in found:
                    self.seek(t, partition, found[partition])

    def committed(self) -> dict[TopicPartition, int]:
        """The group's committed offsets as last committed or read by this consumer."""
        return dict(self._core.committed)

    # -- reading -----------------------------------------------------------------------------

    def poll(self, timeout: float = 1.0, max_messages: int | None = None) -> list[Message]:
        """The next messages of any assigned partition, waiting up to ``timeout`` seconds."""
        self._ensure_ready()
        budget = max_messages or self.max_poll_messages
        deadline = time.monotonic() + max(0.0, timeout)
        if self._core.commits_at_poll:
            self._commit_quietly(self._core.uncommitted())  # what the previous polls returned is processed
        self._reconcile()
        while True:
            before = dict(self._core.positions)
            batch: list[Message] = []
            rotation = self._core.rotation()
            for tp in rotation:
                if len(batch) >= budget:
                    break
                batch += self._fetch(tp, budget - len(batch), 0)
            remaining = deadline - time.monotonic()
            if batch:
                return self._hand_out(batch, before)
            if remaining <= 0:
                return []
            if not rotation:  # nothing assigned (yet): wait for the heartbeat to bring something
                if self._assignment_changed.wait(min(remaining, self.long_poll_slice)):
                    self._assignment_changed.clear()
                self._reconcile()
                continue
            wait = remaining if len(rotation) == 1 else min(remaining, self.long_poll_slice)
            batch = self._fetch(rotation[0], budget, int(wait * 1000))
            if batch:
                return self._hand_out(batch, before)
            self._reconcile()

    def _hand_out(self, batch: list[Message], before: Mapping[TopicPartition, int]) -> list[Message]:
        if not self._core.commits_before_handing_out:
            return batch
        try:
            self._commit(self._core.uncommitted())
        except HalfmqError as error:
            # Not committed (or not known to be): handing the batch out could repeat it.
            logger.warning("at-most-once commit failed (%s); the batch is not handed out", error)
            self._core.restore(before)
            return []
        return batch

    def _fetch(self, tp: TopicPartition, max_messages: int, wait_ms: int) -> list[Message]:
        call = calls.fetch(
            tp[0], tp[1], self._core.positions[tp], max_messages=max_messages,
            max_wait_ms=min(wait_ms, MAX_BROKER_WAIT_MS), isolation=self._core.isolation_level,
            tag=self._core.tag,
        )
        try:
            result = self._transport.call(call)
        except OffsetOutOfRangeError:
            # Committed offset no longer (or not yet) in the log: start over per
            # auto_offset_reset, as Kafka consumers do.
            metadata = self._transport.call(calls.get_topic(tp[0]))
            self._core.seek(tp, self._core.reset_offset(tp, metadata))
            return []
        return self._core.record(tp, result)

    # -- committing --------------------------------------------------------------------------

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit the group's offsets: by default everything returned by ``poll`` so far.

        Raises :class:`~sdk.FencedMemberEpochError` if the broker refused it (this consumer
        no longer owns a partition in it): nothing was committed.
        """
        self._ensure_ready()
        if self._core.delivery == "exactly_once":
            raise IllegalStateError(
                "an exactly_once consumer commits with its transactions: use process_exactly_once()"
            )
        self._commit(dict(offsets) if offsets is not None else self._core.uncommitted())

    def _commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        with self._lock:
            try:
                self._transport.call(calls.commit_group_offsets(self._core.group, offsets, self.group_metadata()))
            except FencedMemberEpochError:
                self._wake_heartbeat.set()  # find out at once whether the membership is gone
                raise
        self._core.mark_committed(offsets)

    def _commit_quietly(self, offsets: Mapping[TopicPartition, int]) -> None:
        try:
            self._commit(offsets)
        except HalfmqError as error:  # the messages will be read again (at least once)
            logger.warning("auto-commit of %s failed: %s", sorted(offsets), error)

    # -- exactly once ------------------------------------------------------------------------

    def process_exactly_once(
        self,
        producer: TransactionalProducer,
        handler: Callable[[Message], Outputs],
        *,
        timeout: float = 1.0,
        max_messages: int | None = None,
    ) -> int:
        """Poll one batch, send what ``handler`` makes of each message, and commit the outputs
        and the input offsets in one transaction of ``producer``; the number of inputs done.

        ``handler(message)`` returns the output messages (a :class:`~sdk.Message`, an
        iterable of them, or ``None``). The offsets are committed as this member at its
        current epoch: if the broker has fenced it (it lost the partitions), the
        transaction is aborted, the batch is read again by whoever owns it now, and this
        returns 0. An exception from ``handler`` aborts the transaction, rewinds the batch
        and is raised. ``producer`` must have called ``init_transactions()``.
        """
        if self._core.delivery != "exactly_once":
            raise IllegalStateError('process_exactly_once() needs a consumer made with delivery="exactly_once"')
        self._ensure_ready()
        self._settle_previous_transaction(producer)
        batch = self.poll(timeout, max_messages)
        if not batch:
            return 0
        offsets = self._core.uncommitted()
        before = batch_start(batch)
        producer.begin_transaction()
        try:
            for message in batch:
                for output in outputs_of(handler(message)):
                    producer.send(output.topic, output.value, key=output.key, headers=dict(output.headers),
                                  partition=output.partition)
            with self._lock:  # no heartbeat may move the epoch between reading it and the broker checking it
                producer.send_offsets_to_transaction(offsets, exactly_once_committer(self.group, self._membership))
            self._commit_transaction(producer)
        except FencedMemberEpochError as error:
            self._abandon(producer, before)
            logger.warning("exactly-once batch fenced (%s): it will be read again by the partitions' owner", error)
            self._wake_heartbeat.set()
            return 0
        except BrokerUnavailableError:
            if producer.state is not TransactionState.COMMITTING:
                self._abandon(producer, before)
            raise  # a commit of unknown outcome is settled by the next call
        except BaseException:
            self._abandon(producer, before)
            raise
        self._core.mark_committed(offsets)
        return len(batch)

    @staticmethod
    def _commit_transaction(producer: TransactionalProducer) -> None:
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            try:
                producer.commit_transaction()
                return
            except BrokerUnavailableError:
                if attempt == COMMIT_ATTEMPTS:
                    raise

    def _abandon(self, producer: TransactionalProducer, before: Mapping[TopicPartition, int]) -> None:
        """Abort the batch's transaction and read the batch again."""
        if producer.state in (TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR):
            try:
                producer.abort_transaction()
            except HalfmqError:  # the broker aborts it at its timeout; its outputs never show
                logger.warning("abort of an exactly-once batch failed", exc_info=True)
        self._core.restore(before)

    def _settle_previous_transaction(self, producer: TransactionalProducer) -> None:
        """A commit left with an unknown outcome is sent again (it is idempotent): its answer says
        whether the last batch was committed; the positions are read back from the broker either way."""
        if producer.state is not TransactionState.COMMITTING:
            return
        try:
            self._commit_transaction(producer)
        except FencedMemberEpochError:
            self._abandon(producer, {})
        committed = {(c.topic, c.partition): c.offset for c in self._transport.call(calls.group_offsets(self.group))}
        for tp in list(self._core.positions):
            if tp in committed:
                self._core.positions[tp] = self._core.committed[tp] = committed[tp]

    # -- membership ------------------------------------------------------------------------------

    def _ensure_ready(self) -> None:
        core = self._core
        core.check_open()
        if core.assigned:
            return
        if self._membership is None:
            topics = sorted(set(core.topics) | {t for t, _ in core.requested_partitions or []})
            metadata = {t: self._topic(t) for t in topics}
            partitions = core.assignment_for(list(metadata.values()))
            committed = self._transport.call(calls.group_offsets(core.group))
            core.assign(partitions, metadata, committed)
            return
        with self._lock:
            self._membership.answered(self._transport.call(self._membership.join_call()))
        core.assigned = True
        self._heartbeats = threading.Thread(
            target=self._heartbeat_loop, name=f"halfmq-heartbeat-{core.group}", daemon=True
        )
        self._heartbeats.start()
        self._reconcile()

    def _reconcile(self) -> None:
        """Between batches: drop lost partitions, give up revoked ones (committing first), take up new ones."""
        membership = self._membership
        if membership is None:
            return
        with self._lock:
            lost, revoked, assigned = membership.pending_changes()
        try:
            if lost:
                self._give_up(lost, commit=False)
            if revoked:
                self._give_up(revoked, commit=self._core.commits_before_giving_up)
        finally:
            if lost or revoked:
                self._wake_heartbeat.set()  # tell the broker now, so the next owner need not wait
        if assigned:
            committed = self._transport.call(calls.group_offsets(self._core.group))
            metadata = {t: self._topic(t) for t in sorted({t for t, _ in assigned})}
            self._core.assign(assigned, metadata, committed)
            with self._lock:
                membership.taken_up(assigned)
            if self.on_assigned is not None:
                self.on_assigned(list(assigned))

    def _give_up(self, partitions: list[TopicPartition], *, commit: bool) -> None:
        assert self._membership is not None
        try:
            if commit:
                wanted = set(partitions)
                self._commit_quietly({tp: o for tp, o in self._core.uncommitted().items() if tp in wanted})
            if self.on_revoked is not None:
                self.on_revoked(list(partitions))
        finally:
            self._core.drop(partitions)
            with self._lock:
                self._membership.dropped(partitions)

    def _heartbeat_loop(self) -> None:
        membership = self._membership
        assert membership is not None
        while not self._stopping.is_set():
            self._wake_heartbeat.wait(membership.heartbeat_interval)
            self._wake_heartbeat.clear()
            if self._stopping.is_set():
                return
            try:
                again = self._heartbeat_once(membership)
            except Exception:  # the thread must go on; a lapsed session is rejoined later
                logger.warning("heartbeat of group %r failed", membership.group, exc_info=True)
                continue
            if again:
                self._wake_heartbeat.set()

    def _heartbeat_once(self, membership: Membership) -> bool:
        """One heartbeat (or a join again); True when the next one should go at once."""
        with self._lock:
            before = membership.assignment
            try:
                if membership.joined:
                    again = membership.answered(self._transport.call(membership.heartbeat_call()))
                else:
                    again = membership.answered(self._transport.call(membership.join_call()))
            except (UnknownMemberError, FencedMemberEpochError) as error:
                logger.warning("consumer of group %r lost its membership (%s); joining again", membership.group, error)
                old = membership.lose_membership()
                self._assignment_changed.set()  # poll() drops the lost partitions at once
                with contextlib.suppress(HalfmqError):  # already gone
                    self._transport.call(membership.leave_call(old))
                again = membership.answered(self._transport.call(membership.join_call()))
        if membership.assignment != before:
            self._assignment_changed.set()
        return again

    def _topic(self, topic: str) -> TopicMetadata:
        """Where ``topic``'s partitions start and end now (for where a partition taken up starts)."""
        return self._transport.call(calls.get_topic(topic))

    # -- lifecycle ---------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Message]:
        """Yield messages one by one until the consumer is closed."""
        while not self._core.closed:
            yield from self.poll(timeout=1.0)

    def close(self) -> None:
        """Leave the group (its partitions go to the others at once) and release connections.

        Does not commit: what the last poll returned is committed by the next owner's
        reading it again (at least once), unless you called ``commit()``.
        """
        if self._core.closed:
            return
        self._core.closed = True
        self._stopping.set()
        self._wake_heartbeat.set()
        if self._heartbeats is not None:
            self._heartbeats.join(timeout=30)
        membership = self._membership
        try:
            if membership is not None and membership.joined:
                given_up = sorted(self._core.positions)
                try:
                    self._transport.call(membership.leave_call())
                except HalfmqError as error:
                    logger.info("leaving group %r: %s", membership.group, error)
                if given_up and self.on_revoked is not None:
                    self.on_revoked(given_up)
        finally:
            super().close()
