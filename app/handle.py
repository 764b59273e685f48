"""What the fronts need from a broker, whether its services run in this process or in the core.

Each service the fronts call has a Protocol here: the methods they may call, with their
signatures. :class:`BrokerHandle` names the services once, as its fields typed by those
Protocols. Everything else is derived from it:

- :class:`app.broker.Broker` (services in this process) and :class:`app.core.link.RemoteBroker`
  (services in the core process) are both BrokerHandles; mypy holds each real service to
  its Protocol where the Broker declares it;
- the core answers exactly the Protocols' methods (:data:`CORE_CALLS`), and the front's
  proxy of a service has exactly those methods.

A method a front needs is added to its service's Protocol, and it is then callable across
the process boundary; nothing else is.
"""

from __future__ import annotations

import inspect
import typing
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from half_store.settings import Settings

if TYPE_CHECKING:
    from half_store.domain.access import (
        AccessSnapshot,
        Acl,
        IssuedToken,
        Operation,
        PatternType,
        Permission,
        Principal,
        ResourceType,
        TokenInfo,
    )
    from half_store.domain.admin_records import (
        CheckerStatus,
        TopicAlteration,
        TopicDetails,
        TransactionFilter,
        TransactionListing,
    )
    from half_store.domain.broker_records import BrokerRecord
    from half_store.domain.classic_groups import ClassicGroupView, JoinAnswer, JoinRequest, SyncAnswer
    from half_store.domain.delay_records import ScheduledMessage
    from half_store.domain.group_records import GroupSummary, GroupView, MemberAnswer, MemberRef, NamedPartition
    from half_store.domain.half_records import CheckAnswer, CheckPayload, CheckRecord, HalfMessage, Listener
    from half_store.domain.half_state import HalfState
    from half_store.domain.log_batches import BatchPage, BatchRead, OffsetAnswer, OffsetQuery
    from half_store.domain.records import (
        AppendResult,
        FetchResult,
        GroupLag,
        GroupOffset,
        OffsetCommit,
        ProducerIdentity,
        ProducerStamp,
        Record,
        StoredMessage,
        Topic,
    )
    from half_store.domain.share_records import (
        Acknowledgement,
        ReceiptResult,
        ShareGroupSummary,
        ShareReceived,
        ShareTopicView,
    )
    from half_store.domain.txn_state import TxnState
    from half_store.services.coordinator import TransactionView
    from half_store.services.half_messages import Prepared
    from half_store.storage.txn_store import TransactionRow

ClientGone = Callable[[], Awaitable[bool]]
"""Passed by a front to a call that may wait (a long poll): whether its client has gone away."""


@runtime_checkable
class LogCalls(Protocol):
    async def create_topic(self, name: str, partition_count: int) -> Topic: ...

    async def list_topics(self, include_system: bool) -> list[Topic]: ...

    async def topic_name_of(self, topic_id: int) -> str | None: ...

    async def produce(
        self, topic_name: str, records: Sequence[Record], partitions: Sequence[int | None]
    ) -> list[tuple[int, int]]: ...

    async def produce_idempotent(
        self, topic_name: str, partition: int, records: Sequence[Record], stamp: ProducerStamp, principal: str | None = None
    ) -> AppendResult: ...

    async def fetch(
        self,
        topic_name: str,
        partition: int,
        offset: int,
        max_messages: int,
        max_wait_ms: int,
        isolation: str,
        client_gone: ClientGone | None = None,
        tags: str | None = None,
    ) -> FetchResult: ...

    async def commit_group_offsets(
        self, group: str, commits: Sequence[OffsetCommit], member: MemberRef | None = None
    ) -> None: ...

    async def group_offsets(self, group: str) -> list[GroupOffset]: ...

    async def pending_group_offsets(self, group: str) -> set[tuple[str, int]]: ...


@runtime_checkable
class CoordinatorCalls(Protocol):
    async def init_producer(
        self, transactional_id: str | None, timeout_ms: int | None, principal: str | None = None
    ) -> ProducerIdentity: ...

    async def produce(
        self, topic_name: str, partition: int, records: Sequence[Record], stamp: ProducerStamp, principal: str | None = None
    ) -> AppendResult: ...

    async def begin(
        self, producer_id: int | None, producer_epoch: int | None, timeout_ms: int | None, principal: str | None = None
    ) -> TransactionRow: ...

    async def describe(self, txn_id: str) -> TransactionView: ...

    async def add_offsets(
        self, txn_id: str, group: str, commits: Sequence[OffsetCommit], member: MemberRef | None = None
    ) -> None: ...

    async def end(self, txn_id: str, commit: bool) -> TxnState: ...


@runtime_checkable
class HalfMessageCalls(Protocol):
    async def prepare(
        self,
        topic_name: str,
        producer_group: str,
        record: Record,
        *,
        partition: int | None,
        transaction_id: str | None,
        check_immunity_seconds: float | None,
    ) -> Prepared: ...

    async def commit(self, message_id: str, resolved_by: str = "producer") -> HalfMessage: ...

    async def rollback(self, message_id: str, resolved_by: str = "producer") -> HalfMessage: ...

    async def get(self, message_id: str) -> HalfMessage: ...

    async def describe(self, message_id: str) -> tuple[HalfMessage, list[CheckRecord]]: ...

    async def recheck(self, message_id: str) -> HalfMessage: ...

    async def list_messages(self, producer_group: str | None, state: HalfState | None, limit: int) -> list[HalfMessage]: ...

    async def bodies(self, halves: list[HalfMessage]) -> dict[str, StoredMessage]: ...

    async def register_listener(self, listener: Listener) -> None: ...

    async def remove_listener(self, producer_group: str, instance_id: str) -> None: ...

    # The RocketMQ listener: a back-check it sent was answered UNSPECIFIED.
    async def record_check_answer(self, message_id: str, number: int, answer: CheckAnswer, latency_ms: int) -> None: ...


@runtime_checkable
class CheckPollingCalls(Protocol):
    async def poll(
        self,
        producer_group: str,
        instance_id: str,
        max_wait_ms: int,
        max_checks: int,
        client_gone: ClientGone | None = None,
    ) -> list[CheckPayload]: ...


@runtime_checkable
class AccessCalls(Protocol):
    async def snapshot_if_changed(self, known_version: int | None) -> AccessSnapshot | None: ...

    async def create_principal(self, name: str) -> Principal: ...

    async def list_principals(self) -> list[Principal]: ...

    async def create_token(self, principal: str) -> IssuedToken: ...

    async def list_tokens(self, principal: str | None) -> list[TokenInfo]: ...

    async def revoke_token(self, token_id: str) -> TokenInfo: ...

    async def create_acl(
        self,
        principal: str,
        resource_type: ResourceType,
        pattern: str,
        pattern_type: PatternType,
        operations: frozenset[Operation],
        permission: Permission,
    ) -> tuple[Acl, bool]: ...

    async def list_acls(self, principal: str | None, resource_type: ResourceType | None) -> list[Acl]: ...

    async def delete_acl(self, acl_id: str) -> Acl: ...

    async def transactional_id_of_producer(self, producer_id: int) -> tuple[bool, str | None]: ...

    async def transactional_id_of_transaction(self, txn_id: str) -> tuple[bool, str | None]: ...


@runtime_checkable
class AdminCalls(Protocol):
    async def describe_topic(self, name: str) -> TopicDetails: ...

    async def alter_topic(self, name: str, alteration: TopicAlteration) -> TopicDetails: ...

    async def delete_topic(self, name: str) -> None: ...

    async def list_transactions(self, wanted: TransactionFilter) -> list[TransactionListing]: ...

    async def checker_status(self) -> CheckerStatus: ...


@runtime_checkable
class GroupCalls(Protocol):
    async def join(
        self, group: str, member_id: str, topics: Sequence[str], session_timeout_ms: int | None
    ) -> MemberAnswer: ...

    async def heartbeat(
        self,
        group: str,
        member_id: str,
        member_epoch: int,
        owned: Sequence[NamedPartition] | None,
        topics: Sequence[str] | None = None,
    ) -> MemberAnswer: ...

    async def leave(self, group: str, member_id: str) -> None: ...

    async def list_groups(self) -> list[GroupSummary]: ...

    async def lags(self) -> list[GroupLag]: ...

    async def describe(self, group: str) -> GroupView: ...


@runtime_checkable
class ShareGroupCalls(Protocol):
    async def receive(
        self,
        group: str,
        topic_name: str,
        max_messages: int,
        lock_ms: int,
        max_wait_ms: int,
        ordered: bool = False,
        acks: Sequence[Acknowledgement] = (),
        client_gone: ClientGone | None = None,
        tags: str | None = None,
    ) -> ShareReceived: ...

    async def acknowledge(self, group: str, acks: Sequence[Acknowledgement]) -> list[ReceiptResult]: ...

    async def extend(self, group: str, receipts: Sequence[str], lock_ms: int) -> list[ReceiptResult]: ...

    async def acknowledge_in_transaction(self, txn_id: str, group: str, receipts: Sequence[str]) -> list[ReceiptResult]: ...

    async def describe(self, group: str) -> list[ShareTopicView]: ...

    async def list_groups(self) -> list[ShareGroupSummary]: ...

    async def delete_group(self, group: str) -> None: ...


@runtime_checkable
class BatchLogCalls(Protocol):
    """The log as stored batches, for the Kafka front: a whole Fetch or ListOffsets in one call."""

    async def fetch_batches(
        self, reads: Sequence[BatchRead], max_bytes: int, max_wait_ms: int, min_bytes: int, isolation: str
    ) -> list[BatchPage]: ...

    async def list_offsets(self, queries: Sequence[OffsetQuery], isolation: str) -> list[OffsetAnswer]: ...


@runtime_checkable
class ClassicGroupCalls(Protocol):
    """Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), kept in the core's memory."""

    async def join(self, request: JoinRequest) -> JoinAnswer: ...

    async def sync(self, group_id: str, generation_id: int, member_id: str, assignments: dict[str, bytes]) -> SyncAnswer: ...

    async def heartbeat(self, group_id: str, generation_id: int, member_id: str) -> str | None: ...

    async def leave(self, group_id: str, member_ids: list[str]) -> dict[str, str | None]: ...

    async def check_commit(self, group_id: str, generation_id: int, member_id: str) -> None: ...

    async def describe(self, group_ids: list[str]) -> list[ClassicGroupView | None]: ...

    async def list_groups(self) -> list[ClassicGroupView]: ...


@runtime_checkable
class ProducerTransactionCalls(Protocol):
    """A producer's current transaction, named by (producer id, epoch) as Kafka's transactional APIs name it."""

    async def join(self, producer_id: int, producer_epoch: int, principal: str | None = None) -> str: ...

    async def add_offsets(
        self,
        producer_id: int,
        producer_epoch: int,
        group: str,
        commits: Sequence[OffsetCommit],
        member: MemberRef | None = None,
        principal: str | None = None,
    ) -> None: ...

    async def end(
        self, producer_id: int, producer_epoch: int, commit: bool, principal: str | None = None
    ) -> TxnState | None: ...

    async def end_bumping_epoch(
        self, producer_id: int, producer_epoch: int, commit: bool, principal: str | None = None
    ) -> ProducerIdentity: ...


@runtime_checkable
class DelayCalls(Protocol):
    async def schedule(
        self, topic_name: str, records: Sequence[Record], deliver_at: Sequence[int], partitions: Sequence[int | None]
    ) -> list[ScheduledMessage]: ...

    async def get(self, message_id: str) -> ScheduledMessage: ...

    async def list_waiting(self, topic_name: str | None, limit: int) -> list[ScheduledMessage]: ...


@runtime_checkable
class BrokerRegistryCalls(Protocol):
    async def heartbeat(self, broker: BrokerRecord) -> list[BrokerRecord]: ...

    async def leave(self, instance_id: str) -> None: ...

    async def live(self) -> list[BrokerRecord]: ...


@dataclass
class BrokerHandle(ABC):
    """A broker as the fronts see it: its settings, its services (the one place they are named), its health."""

    settings: Settings
    log: LogCalls
    coordinator: CoordinatorCalls
    halves: HalfMessageCalls
    polling: CheckPollingCalls
    access: AccessCalls
    admin: AdminCalls
    groups: GroupCalls
    shares: ShareGroupCalls
    batches: BatchLogCalls
    classic: ClassicGroupCalls
    producer_txns: ProducerTransactionCalls
    delays: DelayCalls
    brokers: BrokerRegistryCalls

    @abstractmethod
    async def ready(self) -> bool:
        """Whether the database answers."""

    @abstractmethod
    async def metrics(self) -> bytes:
        """The core's metrics in Prometheus text format."""


def _service_protocols() -> dict[str, type]:
    hints = typing.get_type_hints(BrokerHandle)
    return {f.name: hints[f.name] for f in fields(BrokerHandle) if f.name != "settings"}


def calls_of(protocol: type) -> frozenset[str]:
    """The methods a service Protocol declares."""
    return frozenset(name for name, member in vars(protocol).items() if inspect.iscoroutinefunction(member))


SERVICES: Mapping[str, type] = _service_protocols()
"""Service name (a BrokerHandle field) -> its Protocol."""

BROKER_CALLS = frozenset({"ready", "metrics"})
CORE_CALLS: Mapping[str, frozenset[str]] = {
    **{name: calls_of(protocol) for name, protocol in SERVICES.items()},
    "broker": BROKER_CALLS,
}
"""What the front may ask the core: each service's Protocol methods, and the broker's health."""
