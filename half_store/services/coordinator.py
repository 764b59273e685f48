"""The Kafka/Pulsar-mode transaction coordinator, writing through the same log.

Ending a transaction is two-phase, as in Kafka: the state moves to PREPARE_COMMIT
or PREPARE_ABORT (durably), then a control marker goes to every partition the
transaction wrote, staged group offsets are applied on commit, share-group records
acknowledged in it are accepted (commit) or released (abort), and the state
becomes final, in one database transaction. A crash between the phases leaves a
PREPARE_* row that :meth:`Coordinator.complete_prepared` finishes on start-up and
from the checker. Every state change is a compare-and-set on the row, so a
producer's commit racing the timeout job has exactly one winner.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from sqlalchemy import Connection

from half_store.domain.errors import (
    AlreadyResolved,
    ConcurrentTransactions,
    FencedMemberEpoch,
    InvalidTransactionTimeout,
    ProducerFenced,
    ValidationFailed,
)
from half_store.domain.group_records import MemberRef
from half_store.domain.records import (
    AppendResult,
    OffsetCommit,
    ProducerIdentity,
    ProducerStamp,
    Record,
    now_ms,
)
from half_store.domain.txn_state import (
    TxnState,
    transition,
)
from half_store.metrics import GROUP_FENCED_COMMITS, TRANSACTIONS
from half_store.services import group_fencing
from half_store.services.log_service import (
    LogService,
    check_offset_committable,
    check_partition,
)
from half_store.services.notifier import PartitionKey
from half_store.services.share_changes import finish_transaction_acks
from half_store.services.stamped_append import STAMPED_APPEND, StampedAppend, new_transaction
from half_store.services.transaction_lookups import lock_open, lock_producers, transaction
from half_store.services.txn_ending import (
    EndPlan,
    EndRequest,
    completion_moves,
    finished,
    markers_to_write,
    offsets_to_commit,
    plan_ends,
)
from half_store.settings import Settings
from half_store.storage import group_store, log_store, producer_store, txn_store
from half_store.storage.log_store import AppendRequest
from half_store.storage.txn_store import StagedCommit, TransactionRow
from half_store.storage.writer import MergeKind, NotMergeable

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TransactionView:
    row: TransactionRow
    partitions: list[tuple[str, int]]
    transactional_id: str | None = None
    # An open transaction's row is touched by every write; its state has not changed since it began.
    last_state_change_ms: int | None = None


@dataclass(frozen=True, slots=True)
class _BeginRequest:
    producer_id: int | None
    producer_epoch: int | None
    timeout_ms: int | None


@dataclass(frozen=True, slots=True)
class _Ended:
    txn: TransactionRow  # as it is after the end
    touched: set[PartitionKey]
    producer: ProducerIdentity | None = None  # the producer's next identity, when the end bumped its epoch


def _union(sets: Iterable[set[PartitionKey]]) -> set[PartitionKey]:
    return set().union(*sets)


class Coordinator:
    def __init__(self, log: LogService, settings: Settings) -> None:
        self.log = log
        self.store = log.store
        self.notifier = log.notifier
        self.settings = settings
        self._begin_kind: MergeKind[_BeginRequest, TransactionRow] = MergeKind("txn-begin", self._begin_many)
        self._end_kind: MergeKind[EndRequest, _Ended] = MergeKind("txn-end", self._end_many)

    # -- producers -------------------------------------------------------------------------

    async def init_producer(
        self, transactional_id: str | None, timeout_ms: int | None, principal: str | None = None
    ) -> ProducerIdentity:
        """InitProducerId: a new id, or for a known transactional id the next epoch; ``principal``'s from now on.

        The previous epoch's unfinished transaction is aborted, or completed if it
        had already reached PREPARE_COMMIT, in the same database transaction as the bump.
        """
        if transactional_id is None:
            producer_id, epoch = await self.store.write(
                lambda conn: producer_store.new_producer(conn, timeout_ms, principal)
            )
            self.log.producer_owners.obtained(producer_id, principal)
            return ProducerIdentity(producer_id, epoch)
        timeout = self.checked_timeout(timeout_ms)

        def unit(conn: Connection) -> tuple[ProducerIdentity, set[PartitionKey]]:
            producer_id, epoch, known = producer_store.bump_transactional_producer(conn, transactional_id, timeout, principal)
            prepared: list[TransactionRow] = []
            if known:
                for txn in txn_store.unfinished_of_producer(conn, producer_id):
                    if txn.state is TxnState.OPEN:
                        abort = transition(txn.state, TxnState.PREPARE_ABORT, f"transaction {txn.txn_id}")
                        txn_store.transition(conn, txn.txn_id, abort)
                        txn = replace(txn, state=abort.target)
                    prepared.append(txn)
            touched = self._complete(conn, prepared)
            return ProducerIdentity(producer_id, epoch, transactional_id), _union(touched.values())

        identity, touched = await self.store.write(unit)
        self.log.producer_owners.obtained(identity.producer_id, principal)
        self.notifier.notify(touched)
        return identity

    def checked_timeout(self, timeout_ms: int | None) -> int:
        timeout = timeout_ms or self.settings.default_transaction_timeout_ms
        if not 0 < timeout <= self.settings.max_transaction_timeout_ms:
            raise InvalidTransactionTimeout(
                f"transaction timeout {timeout} ms is outside 1..{self.settings.max_transaction_timeout_ms} ms"
            )
        return timeout

    # -- transactions -----------------------------------------------------------------------------

    async def begin(
        self, producer_id: int | None, producer_epoch: int | None, timeout_ms: int | None, principal: str | None = None
    ) -> TransactionRow:
        if (producer_id is None) != (producer_epoch is None):
            raise ValidationFailed("give producer_id and producer_epoch together, or neither")
        await self.log.producer_owners.check(producer_id, principal)
        if producer_id is None:
            self.checked_timeout(timeout_ms)  # refused before it is queued; a producer's default needs its row
        request = _BeginRequest(producer_id, producer_epoch, timeout_ms)
        return await self.store.write_merged(self._begin_kind, request)

    def _begin_many(self, conn: Connection, requests: list[_BeginRequest]) -> list[TransactionRow]:
        """The begins of one group commit: the producers' checks together, one insert for all.

        Two begins of one producer in a batch fail it: the second must see the first.
        """
        producers = [r.producer_id for r in requests if r.producer_id is not None]
        if len(set(producers)) != len(producers):
            raise NotMergeable("two begins of one producer")
        bound = [
            (r.producer_id, r.producer_epoch) for r in requests if r.producer_id is not None and r.producer_epoch is not None
        ]
        timeouts, unfinished = lock_producers(conn, bound) if bound else ({}, {})
        rows = []
        for request in requests:
            timeout = request.timeout_ms
            if request.producer_id is not None:
                open_txns = unfinished.get(request.producer_id)
                if open_txns:
                    raise ConcurrentTransactions(
                        f"producer {request.producer_id} already has transaction {open_txns[0].txn_id} in progress"
                    )
                timeout = timeout or timeouts.get(request.producer_id)
            rows.append(new_transaction(request.producer_id, request.producer_epoch, self.checked_timeout(timeout)))
        txn_store.insert_transactions(conn, rows)
        return rows

    async def produce(
        self, topic_name: str, partition: int, records: Sequence[Record], stamp: ProducerStamp, principal: str | None = None
    ) -> AppendResult:
        """Append a batch inside a transaction; the partition joins the transaction.

        A transactional stamp without a txn_id names the producer's open transaction,
        begun here if it has none. A stamp's producer id must be ``principal``'s.
        """
        assert stamp.txn_id is not None or stamp.transactional
        await self.log.producer_owners.check(stamp.producer_id, principal)
        topic = await self.log.writable_topic(topic_name)
        check_partition(topic, partition)
        append = StampedAppend(topic, partition, records, stamp, self.settings.default_transaction_timeout_ms)
        async with self.log.partition_rows_of(topic):
            result = await self.store.write_merged(STAMPED_APPEND, append, locks=[(topic.topic_id, partition)])
        if not result.duplicate:
            self.notifier.notify([(topic.topic_id, partition)])  # read_uncommitted readers
        return result

    async def add_offsets(
        self, txn_id: str, group: str, commits: Sequence[OffsetCommit], member: MemberRef | None = None
    ) -> None:
        """Stage group offsets in the transaction; fenced now, and again when it commits (see group_fencing)."""
        resolved = [(await self.store.topic(c.topic), c) for c in commits]
        for topic, commit in resolved:
            check_partition(topic, commit.partition)

        def unit(conn: Connection) -> None:
            lock_open(conn, txn_id)
            for topic, commit in resolved:
                check_offset_committable(conn, topic, commit)
            group_fencing.check_commit(conn, group, member, [(t, c.partition) for t, c in resolved], transactional=True)
            txn_store.put_offsets(
                conn,
                txn_id,
                group,
                [(t.topic_id, c.partition, c.offset, c.metadata) for t, c in resolved],
                None if member is None else (member.member_id, member.member_epoch),
            )

        try:
            await self.store.write(unit)
        except FencedMemberEpoch:
            GROUP_FENCED_COMMITS.labels("transaction").inc()
            raise

    async def end(self, txn_id: str, commit: bool) -> TxnState:
        """Commit or abort; repeating the same request answers the same, the other one is 409."""
        return (await self._end(txn_id, commit, bump_epoch=False)).txn.state

    async def end_bumping_epoch(self, txn_id: str, commit: bool) -> ProducerIdentity:
        """Commit or abort a producer's transaction and move the producer to its next epoch, atomically
        (Kafka's transaction protocol v2); the producer's identity from now on."""
        ended = await self._end(txn_id, commit, bump_epoch=True)
        assert ended.producer is not None
        return ended.producer

    async def _end(self, txn_id: str, commit: bool, *, bump_epoch: bool) -> _Ended:
        locks = await self._locks_of(txn_id) if self.store.orders_locks else []
        try:
            ended = await self.store.write_merged(self._end_kind, EndRequest(txn_id, commit, bump_epoch), locks=locks)
        except FencedMemberEpoch:
            GROUP_FENCED_COMMITS.labels("transaction_commit").inc()
            raise
        self.notifier.notify(ended.touched)  # read_committed readers held at the LSO may go on
        if commit and ended.txn.state is TxnState.TIMED_OUT:
            if ended.txn.producer_id is not None:
                raise ProducerFenced(f"transaction {txn_id} passed its timeout; its producer epoch is fenced")
            raise AlreadyResolved(f"transaction {txn_id} passed its timeout and was aborted")
        return ended

    def _end_many(self, conn: Connection, requests: list[EndRequest]) -> list[_Ended]:
        """The commits and aborts of one group commit, together: :func:`plan_ends` decides, this carries it out.

        Phase one moves each OPEN transaction to PREPARE_* (one compare-and-set per
        outcome); phase two writes every marker in one append. A transaction asked
        twice in one batch fails the batch; the writer then runs each request alone.
        """
        if len({r.txn_id for r in requests}) != len(requests):
            raise NotMergeable("one transaction ended twice in a batch")
        found, epochs = txn_store.get_many_with_epochs(conn, [r.txn_id for r in requests])
        plan = plan_ends(requests, found, epochs, now_ms())
        prepared = list(plan.resumed)
        for txn in plan.timed_out:
            aborting = self._start_timeout_abort(conn, txn)
            if aborting is None:
                raise AlreadyResolved(f"transaction {txn.txn_id} was ended concurrently")
            prepared.append(aborting)
        for move, txns in plan.moves.items():
            moved = txn_store.transition_many(conn, [t.txn_id for t in txns], move)
            if len(moved) != len(txns):
                lost = next(t.txn_id for t in txns if t.txn_id not in moved)
                raise AlreadyResolved(f"transaction {lost} was ended concurrently")
            prepared.extend(replace(t, state=move.target) for t in txns)
        # Read once for phase one's check and phase two's commit, now that no transaction
        # ending here can stage more (they are PREPARE_*, their rows locked).
        bumped = self._bump_epochs(conn, [r for r in requests if r.bump_epoch], found, plan)
        staged = txn_store.staged_commits(conn, [t.txn_id for t in prepared]) if prepared else []
        committing = plan.committing
        if committing:
            # A zombie member's transaction must not commit offsets of a partition it lost.
            group_fencing.check_staged(conn, [commit for commit in staged if commit.txn_id in committing])
        completed = self._complete_now(conn, prepared, staged)
        # Where each transaction is now, without reading it again: a prepared one ends where
        # its prepare state says, whoever completed it; one left prepared stays so.
        final = {t.txn_id: t if completed is None else finished(t) for t in prepared} | plan.answered
        touched = completed or {}
        return [_Ended(final[r.txn_id], touched.get(r.txn_id, set()), bumped.get(r.txn_id)) for r in requests]

    @staticmethod
    def _bump_epochs(
        conn: Connection, requests: list[EndRequest], found: Mapping[str, TransactionRow], plan: EndPlan
    ) -> dict[str, ProducerIdentity]:
        """Transaction protocol v2: each ended transaction's producer to its next epoch, in the end's own database
        transaction, so no request of the old epoch can slip in between (KIP-890's fix for late writes).

        A transaction this very end aborted for its timeout has bumped its producer already
        (the fence); any other change of epoch since the request was checked is a newer
        instance's, and fences this one.
        """
        timed_out = {t.txn_id for t in plan.timed_out}
        bumped = {}
        for request in requests:
            txn = found[request.txn_id]
            if txn.producer_id is None or txn.producer_epoch is None:
                raise ValidationFailed(f"transaction {txn.txn_id} has no producer whose epoch could move on")
            if txn.txn_id in timed_out:
                bumped[txn.txn_id] = ProducerIdentity(txn.producer_id, txn.producer_epoch + 1)
            else:
                bumped[txn.txn_id] = producer_store.bump_after_end(conn, txn.producer_id, txn.producer_epoch)
        return bumped

    async def describe(self, txn_id: str) -> TransactionView:
        def query(conn: Connection) -> TransactionView:
            txn = transaction(conn, txn_id)
            parts = [
                (self.store.topic_by_id_sync(conn, p.topic_id).name, p.partition)
                for p in txn_store.partitions_of(conn, txn_id)
            ]
            transactional_id, updated_at = txn_store.identity(conn, txn_id) or (None, txn.started_at)
            changed = txn.started_at if txn.state is TxnState.OPEN else updated_at
            return TransactionView(txn, parts, transactional_id, changed)

        return await self.store.read(query)

    # -- background work (the checker calls these) ------------------------------------------------

    async def abort_expired(self, limit: int = 100) -> int:
        """Abort transactions past their timeout (TIMED_OUT) and fence their producers."""
        expired = await self.store.read(lambda conn: txn_store.expired_open(conn, now_ms(), limit))
        for txn in expired:

            def unit(conn: Connection, txn: TransactionRow = txn) -> set[PartitionKey]:
                aborting = self._start_timeout_abort(conn, txn)
                if aborting is None:
                    return set()
                return _union((self._complete_now(conn, [aborting]) or {}).values())

            self.notifier.notify(await self.store.write(unit, locks=await self._locks_of(txn.txn_id)))
        return len(expired)

    async def complete_prepared(self, limit: int = 100) -> int:
        """Finish transactions a crash left in PREPARE_COMMIT / PREPARE_ABORT."""
        pending = await self.store.read(lambda conn: txn_store.preparing(conn, limit))
        for txn in pending:

            def unit(conn: Connection, txn: TransactionRow = txn) -> set[PartitionKey]:
                return _union((self._complete_now(conn, [txn]) or {}).values())

            self.notifier.notify(await self.store.write(unit, locks=await self._locks_of(txn.txn_id)))
        return len(pending)

    # -- internals ------------------------------------------------------------------------------------

    def _complete_now(
        self, conn: Connection, prepared: list[TransactionRow], staged: list[StagedCommit] | None = None
    ) -> dict[str, set[PartitionKey]] | None:
        """Phase two in the same database transaction as phase one, when it can be done at once.

        Phase two runs in a savepoint: if it fails, phase one (the PREPARE_* state) is
        still committed, and recovery completes the transaction later; None says so. For
        several transactions (a merged batch of ends) a failure fails the batch instead, so
        each is ended alone and only the one that cannot complete stays prepared.
        ``staged``: the transactions' staged offsets, if the caller has read them already.
        """
        if not prepared:
            return {}
        try:
            with conn.begin_nested():
                return self._complete(conn, prepared, staged)
        except Exception as error:  # left prepared on purpose; complete_prepared retries it
            if len(prepared) > 1:
                raise NotMergeable("phase two failed for a batch of transactions") from error
            log.exception("could not complete transaction %s now; it stays %s", prepared[0].txn_id, prepared[0].state.value)
            return None

    async def _locks_of(self, txn_id: str) -> list[PartitionKey]:
        """The partitions a transaction wrote to: the rows its end will lock."""
        parts = await self.store.read(lambda conn: txn_store.partitions_of(conn, txn_id))
        return [(p.topic_id, p.partition) for p in parts]

    def _complete(
        self, conn: Connection, prepared: list[TransactionRow], staged: list[StagedCommit] | None = None
    ) -> dict[str, set[PartitionKey]]:
        """Phase two for transactions in PREPARE_*: final state, a marker on every partition
        each wrote to (one append for all), staged offsets on commit. Idempotent: a
        transaction someone else completed is skipped. Returns the partitions each marked.
        """
        moved: set[str] = set()
        for move, ids in completion_moves(prepared).items():
            moved |= txn_store.transition_many(conn, ids, move)
            TRANSACTIONS.labels(move.target.value).inc(len(moved.intersection(ids)))
        finishing = [txn for txn in prepared if txn.txn_id in moved]
        if not finishing:
            return {}
        ids = [txn.txn_id for txn in finishing]
        markers = markers_to_write(finishing, txn_store.partitions_of_many(conn, ids))
        requests = [
            AppendRequest(
                self.store.topic_by_id_sync(conn, m.part.topic_id),
                {m.part.partition: [Record(None, b"null", 0, None, now_ms())]},
                ProducerStamp(m.txn.producer_id, m.txn.producer_epoch, None, m.txn.txn_id, m.control),
            )
            for m in markers
        ]
        offsets = log_store.append_many(conn, requests)
        txn_store.mark_partitions_ended(
            conn,
            [
                (m.txn.txn_id, m.part.topic_id, m.part.partition, bases[m.part.partition], m.aborted)
                for m, bases in zip(markers, offsets, strict=True)
            ],
        )
        forgotten, commits = offsets_to_commit(finishing, txn_store.staged_commits(conn, ids) if staged is None else staged)
        if forgotten:
            txn_store.forget_staged(conn, forgotten)
        for group, group_offsets in commits:
            group_store.commit_offsets(conn, group, group_offsets)
        touched: dict[str, set[PartitionKey]] = defaultdict(set)
        for m in markers:
            touched[m.txn.txn_id].add((m.part.topic_id, m.part.partition))
        # Share-group acknowledgements made in the transactions: accepted or released with them.
        acknowledged = finish_transaction_acks(
            conn,
            self.store,
            [txn.txn_id for txn in finishing if txn.state is TxnState.PREPARE_COMMIT],
            [txn.txn_id for txn in finishing if txn.state is TxnState.PREPARE_ABORT],
            self.settings.share_max_deliveries,
        )
        for txn_id, keys in acknowledged.items():
            touched[txn_id] |= keys
        return touched

    @staticmethod
    def _start_timeout_abort(conn: Connection, txn: TransactionRow) -> TransactionRow | None:
        """OPEN → PREPARE_ABORT for the timeout, fencing a bound producer.

        Returns the transaction as it is now, or None if its state moved already.
        """
        abort = transition(txn.state, TxnState.PREPARE_ABORT, f"transaction {txn.txn_id}")
        if not txn_store.transition(conn, txn.txn_id, abort, timed_out=True):
            return None
        if txn.producer_id is not None and txn.producer_epoch is not None:
            producer_store.fence(conn, txn.producer_id, txn.producer_epoch)
        return replace(txn, state=abort.target, timed_out=True)
