"""RocketMQ-style half messages: prepare, commit, rollback, discard, and what the checker needs.

A half message is appended to ``RMQ_SYS_TRANS_HALF_TOPIC`` with its real topic and
partition in its properties, and indexed in ``half_messages``. Resolving it is one
database transaction: the append to its destination (the real topic on commit,
``TRANS_CHECK_MAX_TIME_TOPIC`` on discard), the op record in
``RMQ_SYS_TRANS_OP_HALF_TOPIC``, and the resolution row whose primary key lets a
half message be resolved once only. A second resolution, from a retried commit, a
checker racing the producer or another broker process, rolls back whole and is
answered from the first one: the same body for the same outcome, 409 otherwise.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from dataclasses import dataclass, replace

import orjson
from sqlalchemy import Connection

from half_store.domain.constants import (
    CHECK_MAX_TOPIC,
    HALF_TOPIC,
    OP_HALF_TOPIC,
    OP_REMOVE_TAG,
    VALUE_JSON,
)
from half_store.domain.errors import (
    AlreadyResolved,
    HalfMessageNotFound,
    InternalError,
    ListenerNotFound,
    TopicNotFound,
)
from half_store.domain.half_records import (
    PROPERTY_CHECK_IMMUNITY,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_UNIQUE_KEY,
    CheckAnswer,
    CheckRecord,
    CheckSent,
    HalfMessage,
    Listener,
    first_check_at,
)
from half_store.domain.half_state import HalfState, repeats, transition
from half_store.domain.json_bytes import stored_json
from half_store.domain.records import (
    Record,
    StoredMessage,
    now_ms,
    pickled_as_arguments,
)
from half_store.metrics import ADMIN_ACTIONS, HALF_MESSAGES
from half_store.services.callback_guard import CallbackGuard
from half_store.services.log_service import LogService
from half_store.storage import half_message_store as store
from half_store.storage import listener_store, log_reads, log_store
from half_store.storage.half_message_store import ResolutionConflict
from half_store.storage.log_store import AppendRequest
from half_store.storage.writer import MergeKind


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class Prepared:
    half: HalfMessage
    created: bool


@dataclass(frozen=True, slots=True)
class _PrepareRequest:
    half: HalfMessage  # its half_offset is known once appended
    record: Record  # the body, with the RocketMQ properties
    topic_id: int
    transaction_id_given: bool  # by the producer: a second prepare with it returns the first


_OFFSET_NOT_YET = -1
# Prepared half messages whose destination this process remembers, so that resolving them
# needs no read to learn which partitions to lock (about 200 bytes each).
_PLACEMENTS_KEPT = 16_384
_OP_HEADERS = orjson.dumps({"TAGS": OP_REMOVE_TAG}).decode()
# How a resolution settles the checks still awaiting an answer.
_CHECK_ANSWERS = {
    HalfState.COMMITTED: CheckAnswer.COMMIT,
    HalfState.ROLLED_BACK: CheckAnswer.ROLLBACK,
    HalfState.DISCARDED: CheckAnswer.TIMEOUT,
}


@dataclass(frozen=True, slots=True)
class _ResolveRequest:
    message_id: str
    target: HalfState
    resolved_by: str


@dataclass(frozen=True, slots=True)
class CheckCandidate:
    """A half message due for a back-check, with its body for the producer."""

    half: HalfMessage
    message: StoredMessage


def answer_repeat(half: HalfMessage, requested: HalfState) -> HalfMessage:
    """A request to resolve a resolved half message: the same answer again, or 409 ALREADY_RESOLVED.

    Anything but a repeat is a move out of a resolved state, which the table refuses.
    """
    if repeats(half.state, requested):
        return half
    transition(half.state, requested, f"half message {half.message_id}")
    # The table let a resolved message move; only a move out of PREPARED resolves one, so refuse it.
    raise AlreadyResolved(f"half message {half.message_id} is already {half.state.value}")


class HalfMessageService:
    def __init__(
        self, log: LogService, transaction_timeout_seconds: float, callback_guard: CallbackGuard | None = None
    ) -> None:
        self.log = log
        # Where listeners' callbacks may point (None: anywhere; only tests that build the service by hand).
        self.callback_guard = callback_guard
        self.store = log.store
        self.transaction_timeout_ms = int(transaction_timeout_seconds * 1000)
        self._prepare_kind: MergeKind[_PrepareRequest, Prepared] = MergeKind("half-prepare", self._prepare_many)
        self._resolve_kind: MergeKind[_ResolveRequest, tuple[HalfMessage, bool]] = MergeKind(
            "half-resolve", self._resolve_many
        )
        # message id -> (topic, partition) of the half messages prepared here, oldest first.
        self._placements: OrderedDict[str, tuple[str, int]] = OrderedDict()

    # -- producer side ----------------------------------------------------------------------

    async def prepare(
        self,
        topic_name: str,
        producer_group: str,
        record: Record,
        *,
        partition: int | None,
        transaction_id: str | None,
        check_immunity_seconds: float | None,
    ) -> Prepared:
        """Store a half message, or return the one this group already prepared for ``transaction_id``."""
        topic = await self.log.writable_topic(topic_name)
        real_partition = self.log.choose_partition(topic, partition, record.key)
        message_id = secrets.token_hex(16)
        txn_id = transaction_id or message_id
        immunity_ms = int((check_immunity_seconds or 0) * 1000)
        born = record.timestamp
        properties = {
            PROPERTY_REAL_TOPIC: topic.name,
            PROPERTY_REAL_QUEUE_ID: real_partition,
            PROPERTY_PRODUCER_GROUP: producer_group,
            PROPERTY_TRANSACTION_ID: txn_id,
            PROPERTY_UNIQUE_KEY: message_id,
            PROPERTY_CHECK_IMMUNITY: immunity_ms / 1000,
        }

        stored = record._replace(properties=orjson.dumps(properties).decode())
        half = HalfMessage(
            message_id,
            _OFFSET_NOT_YET,
            producer_group,
            txn_id,
            topic.name,
            real_partition,
            born,
            immunity_ms,
            0,
            first_check_at(born, self.transaction_timeout_ms, immunity_ms),
        )
        request = _PrepareRequest(half, stored, topic.topic_id, transaction_id is not None)
        locks = [((await self.store.topic(HALF_TOPIC)).topic_id, 0)]
        try:
            try:
                prepared = await self.store.write_merged(self._prepare_kind, request, locks=locks)
            except ResolutionConflict:  # a racing prepare of the same transaction id won: answer with its message
                prepared = await self.store.write_merged(self._prepare_kind, request, locks=locks)
        except TopicNotFound:
            self.store.forget_topic(topic.name)  # deleted since this process looked it up
            raise
        if prepared.created:
            HALF_MESSAGES.labels("prepared").inc()
            if self.store.orders_locks:
                self._remember_placement(prepared.half)
        return prepared

    def _remember_placement(self, half: HalfMessage) -> None:
        self._placements[half.message_id] = (half.topic, half.partition)
        if len(self._placements) > _PLACEMENTS_KEPT:
            self._placements.popitem(last=False)  # the oldest; its resolution reads the index instead

    def _prepare_many(self, conn: Connection, requests: list[_PrepareRequest]) -> list[Prepared]:
        """Prepares of one group commit together: one append to the half topic, one index insert.

        Two prepares of the same transaction id in one batch conflict on the index, which
        fails the batch; the writer then runs each alone and the second finds the first.
        """
        answers: dict[int, Prepared] = {}
        for index, request in enumerate(requests):
            if request.transaction_id_given:
                existing = store.get_by_transaction(conn, request.half.producer_group, request.half.transaction_id)
                if existing is not None:
                    answers[index] = Prepared(existing, created=False)
        fresh = [index for index in range(len(requests)) if index not in answers]
        if fresh:
            # Share-locked until commit, so a deletion of the real topic cannot slip in between.
            live_topics = log_store.existing_topics_locked(conn, sorted({requests[index].topic_id for index in fresh}))
            for index in fresh:
                if requests[index].topic_id not in live_topics:
                    raise TopicNotFound(f"topic {requests[index].half.topic!r} does not exist")
            half_topic = self.store.topic_sync(conn, HALF_TOPIC)
            base = log_store.append(conn, half_topic, 0, [requests[index].record for index in fresh])
            created = [replace(requests[index].half, half_offset=base + n) for n, index in enumerate(fresh)]
            store.insert_halves(conn, [(half, requests[index].topic_id) for half, index in zip(created, fresh, strict=True)])
            answers.update((index, Prepared(half, created=True)) for half, index in zip(created, fresh, strict=True))
        return [answers[index] for index in range(len(requests))]

    async def commit(self, message_id: str, resolved_by: str = "producer") -> HalfMessage:
        return await self._resolve(message_id, HalfState.COMMITTED, resolved_by)

    async def rollback(self, message_id: str, resolved_by: str = "producer") -> HalfMessage:
        return await self._resolve(message_id, HalfState.ROLLED_BACK, resolved_by)

    async def discard(self, message_id: str) -> HalfMessage:
        """Give up on a half message after check_max back-checks (RocketMQ: TRANS_CHECK_MAX_TIME_TOPIC)."""
        return await self._resolve(message_id, HalfState.DISCARDED, "checker")

    async def get(self, message_id: str) -> HalfMessage:
        found = await self.store.read(lambda conn: store.get(conn, message_id))
        if found is None:
            raise HalfMessageNotFound(f"half message {message_id!r} does not exist")
        return found

    async def describe(self, message_id: str) -> tuple[HalfMessage, list[CheckRecord]]:
        """The half message and its last back-checks, oldest first."""

        def query(conn: Connection) -> tuple[HalfMessage | None, list[CheckRecord]]:
            return store.get(conn, message_id), store.checks_of(conn, message_id)

        found, checks = await self.store.read(query)
        if found is None:
            raise HalfMessageNotFound(f"half message {message_id!r} does not exist")
        return found, checks

    async def recheck(self, message_id: str) -> HalfMessage:
        """DISCARDED → PREPARED with check_times 0: the checker asks its producer group again.

        Its copy in TRANS_CHECK_MAX_TIME_TOPIC stays (that log records the discard). The
        DISCARDED resolution row is deleted by a compare-and-set on its outcome, so the
        message is resolvable once more and its next resolution is again the only one: it
        was never committed before (it was discarded), so it is committed at most once.
        """

        def unit(conn: Connection) -> HalfMessage:
            half = store.get(conn, message_id)
            if half is None:
                raise HalfMessageNotFound(f"half message {message_id!r} does not exist")
            transition(half.state, HalfState.PREPARED, f"half message {message_id}")
            now = now_ms()
            if not store.reopen_discarded(conn, message_id, now):
                raise AlreadyResolved(f"half message {message_id} was rechecked or resolved concurrently")
            return replace(half, check_times=0, next_check_at=now, resolution=None)

        reopened = await self.store.write(unit)
        HALF_MESSAGES.labels("rechecked").inc()
        ADMIN_ACTIONS.labels("half_recheck").inc()
        return reopened

    async def list_messages(self, producer_group: str | None, state: HalfState | None, limit: int) -> list[HalfMessage]:
        return await self.store.read(lambda conn: store.list_halves(conn, producer_group, state, limit))

    async def bodies(self, halves: list[HalfMessage]) -> dict[str, StoredMessage]:
        """The key, value and headers of each of ``halves`` (their copies in the half topic), by message id.

        What an operator looks at before resolving one by hand. A body the half topic's
        retention has deleted since (long after its resolution) is left out.
        """
        if not halves:
            return {}

        def query(conn: Connection) -> dict[str, StoredMessage]:
            half_topic = self.store.topic_sync(conn, HALF_TOPIC)
            found = log_reads.read_offsets(conn, half_topic, 0, [h.half_offset for h in halves], in_rows_of_their_own=True)
            return {h.message_id: found[h.half_offset][0] for h in halves if h.half_offset in found}

        return await self.store.read(query)

    # -- listeners ------------------------------------------------------------------------------

    async def register_listener(self, listener: Listener) -> None:
        if listener.callback_url is not None and self.callback_guard is not None:
            await self.callback_guard.check_url(listener.callback_url)  # 422 CALLBACK_NOT_ALLOWED
        await self.store.write(lambda conn: listener_store.put_listener(conn, listener))

    async def remove_listener(self, producer_group: str, instance_id: str) -> None:
        if not await self.store.write(lambda conn: listener_store.delete_listener(conn, producer_group, instance_id)):
            raise ListenerNotFound(f"no listener {instance_id!r} in producer group {producer_group!r}")

    async def live_listeners(self, producer_groups: list[str]) -> list[Listener]:
        return await self.store.read(lambda conn: listener_store.live_listeners(conn, now_ms(), producer_groups))

    # -- checker side ------------------------------------------------------------------------------

    async def due_for_check(self, limit: int, producer_group: str | None = None) -> list[HalfMessage]:
        return await self.store.read(lambda conn: store.due(conn, now_ms(), limit, producer_group))

    async def claim_checks(
        self,
        halves: list[HalfMessage],
        next_check_in_ms: int,
        asked: list[str | None] | None = None,
        answer: CheckAnswer | None = None,
    ) -> list[CheckCandidate]:
        """Count a check on each of ``halves`` (one write for all) and return what to send.

        ``asked`` names the listener instance each check goes to, for the check history;
        ``answer`` is the check's answer when it is known already (nobody to ask: ERROR).
        A half message someone else claimed or resolved meanwhile is left out.
        """
        if not halves:
            return []
        instances = asked if asked is not None else [None] * len(halves)

        def unit(conn: Connection) -> list[CheckCandidate]:
            now = now_ms()
            claimed = [
                (h, instance)
                for h, instance in zip(halves, instances, strict=True)
                if store.claim_check(conn, h.message_id, h.check_times, now + next_check_in_ms)
            ]
            sent = [CheckSent(h.message_id, h.check_times + 1, instance) for h, instance in claimed]
            store.record_checks_sent(conn, sent, now, answer)
            bodies = self._bodies(conn, [h for h, _ in claimed])
            return [
                CheckCandidate(replace(h, check_times=h.check_times + 1), bodies[h.half_offset][0]) for h, _ in claimed
            ]

        return await self.store.write(unit)

    async def record_check_answer(self, message_id: str, number: int, answer: CheckAnswer, latency_ms: int) -> None:
        """What check number ``number`` of a half message got, for its history."""
        await self.store.write(lambda conn: store.record_check_answer(conn, message_id, number, answer, latency_ms))

    # -- internals --------------------------------------------------------------------------------

    async def _resolve(self, message_id: str, target: HalfState, resolved_by: str) -> HalfMessage:
        locks = await self._resolution_locks(message_id, target) if self.store.orders_locks else []
        request = _ResolveRequest(message_id, target, resolved_by)
        try:
            half, resolved_here = await self.store.write_merged(self._resolve_kind, request, locks=locks)
        except ResolutionConflict:
            half, resolved_here = await self.get(message_id), False  # another resolver won the race
        if not resolved_here:
            return answer_repeat(half, target)
        HALF_MESSAGES.labels(target.value.lower()).inc()
        resolution = half.resolution
        if resolution is not None and resolution.topic is not None and resolution.partition is not None:
            topic = await self.store.topic(resolution.topic)
            self.log.notifier.notify([(topic.topic_id, resolution.partition)])
        return half

    def _resolve_many(self, conn: Connection, requests: list[_ResolveRequest]) -> list[tuple[HalfMessage, bool]]:
        """Resolutions of one group commit together; each answer says whether this request resolved it.

        One read of the index and of the bodies, one append of the bodies and op records
        (an offset allocation per partition, one insert), one insert of resolutions. A
        message asked twice in one batch fails the batch; the writer then runs each alone,
        and the second finds the first.
        """
        found = store.get_many(conn, [r.message_id for r in requests])
        answers: dict[int, tuple[HalfMessage, bool]] = {}
        resolving: dict[str, tuple[int, HalfMessage, _ResolveRequest]] = {}
        for index, request in enumerate(requests):
            half = found.get(request.message_id)
            if half is None:
                raise HalfMessageNotFound(f"half message {request.message_id!r} does not exist")
            if half.resolution is not None:
                answers[index] = (half, False)
            elif request.message_id in resolving:
                raise ResolutionConflict(request.message_id)
            else:
                transition(half.state, request.target, f"half message {half.message_id}")
                resolving[request.message_id] = (index, half, request)
        if resolving:
            todo = list(resolving.values())
            moves = self._body_moves(conn, todo)
            op_topic = self.store.topic_sync(conn, OP_HALF_TOPIC)
            op_records = AppendRequest(op_topic, {0: [_op_record(half, request.target) for _, half, request in todo]})
            bases = log_store.append_many(conn, [move for _, move in moves] + [op_records])
            destinations = {
                index: (move.topic, partition, bases[n][partition])
                for n, (index, move) in enumerate(moves)
                for partition in move.records
            }
            op_base = bases[-1][0]
            new = [
                store.NewResolution(
                    half,
                    transition(half.state, request.target, f"half message {half.message_id}"),
                    destinations.get(index),
                    op_base + n,
                    request.resolved_by,
                )
                for n, (index, half, request) in enumerate(todo)
            ]
            for (index, half, _), resolution in zip(todo, store.insert_resolutions(conn, new), strict=True):
                answers[index] = (replace(half, next_check_at=None, resolution=resolution), True)
            self._settle_checks(conn, [(half, request.target) for _, half, request in todo])
        return [answers[index] for index in range(len(requests))]

    @staticmethod
    def _settle_checks(conn: Connection, resolved: list[tuple[HalfMessage, HalfState]]) -> None:
        """Checks still awaiting an answer when their message is resolved (never checked: nothing to do).

        A polling producer answers a check with its commit or rollback; a discarded message's
        last check got no answer in time.
        """
        now = now_ms()
        checked = [(half.message_id, target) for half, target in resolved if half.check_times > 0]
        for target, answer in _CHECK_ANSWERS.items():
            ids = [message_id for message_id, state in checked if state is target]
            if ids:
                polled_only = target is not HalfState.DISCARDED
                store.settle_awaited_checks(conn, ids, answer, now, polled_only=polled_only)

    def _body_moves(
        self, conn: Connection, todo: list[tuple[int, HalfMessage, _ResolveRequest]]
    ) -> list[tuple[int, AppendRequest]]:
        """Where each resolution sends its half message's body (a rollback sends it nowhere)."""
        moving = [(index, half, request.target) for index, half, request in todo if request.target is not HalfState.ROLLED_BACK]
        bodies = self._bodies(conn, [half for _, half, _ in moving])
        moves = []
        for index, half, target in moving:
            body, properties = bodies[half.half_offset]
            if target is HalfState.COMMITTED:
                destination, partition, kept_properties = half.topic, half.partition, None
            else:
                destination, partition, kept_properties = CHECK_MAX_TOPIC, 0, properties
            record = Record(body.key, body.value, body.value_kind, body.headers, now_ms(), kept_properties)
            moves.append((index, AppendRequest(self.store.topic_sync(conn, destination), {partition: [record]})))
        return moves

    def _bodies(self, conn: Connection, halves: list[HalfMessage]) -> dict[int, tuple[StoredMessage, str | None]]:
        """The bodies of ``halves`` in the half topic, by half offset, with their properties."""
        if not halves:
            return {}
        half_topic = self.store.topic_sync(conn, HALF_TOPIC)
        bodies = log_reads.read_offsets(conn, half_topic, 0, [half.half_offset for half in halves], in_rows_of_their_own=True)
        for half in halves:
            if half.half_offset not in bodies:
                raise InternalError(f"half message {half.message_id} is indexed but missing from {HALF_TOPIC}")
        return bodies

    async def _resolution_locks(self, message_id: str, target: HalfState) -> list[tuple[int, int]]:
        """The partitions a resolution appends to, known beforehand so the write can lock them in order.

        Remembered from the prepare if it was made here; read from the index otherwise (another
        broker process prepared it, this one restarted, or it was prepared long ago).
        """
        placement = self._placements.pop(message_id, None)
        if placement is None:
            known = await self.get(message_id)
            if known.resolution is not None:
                return []  # the write only reads it again to answer
            placement = (known.topic, known.partition)
        locks = [((await self.store.topic(OP_HALF_TOPIC)).topic_id, 0)]
        if target is HalfState.COMMITTED:
            topic, partition = placement
            locks.append(((await self.store.topic(topic)).topic_id, partition))
        elif target is HalfState.DISCARDED:
            locks.append(((await self.store.topic(CHECK_MAX_TOPIC)).topic_id, 0))
        return locks


def _op_record(half: HalfMessage, target: HalfState) -> Record:
    """The op record (RocketMQ tag ``d``): which half offset was resolved, and how."""
    body = stored_json({"half_offset": half.half_offset, "message_id": half.message_id, "state": target.value})
    return Record(None, body, VALUE_JSON, _OP_HEADERS, now_ms())
