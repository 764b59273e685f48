"""One side of a replication, the source or the target, as the replicator calls its HTTP API.

Each method is one request, built by the SDK's public call builders (:mod:`sdk.calls`: the
path, the body, what may be resent) and sent through an :class:`sdk.Client` (its retry loop
and typed errors); the method names what it does and the right it needs, so a refusal
becomes a :class:`ClusterError` an operator can act on. Fetched messages stay as the
broker's JSON: the replicator writes them back out as they came, without decoding values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from app.replication.errors import ClusterError
from sdk import Client, RetryPolicy, calls
from sdk.calls import Call, TopicPartition
from sdk.errors import HalfmqError, TopicExistsError, TopicNotFoundError
from sdk.models import CommittedOffset, ProduceResult, ProducerIdentity, TopicMetadata

T = TypeVar("T")

RETRY = RetryPolicy(max_attempts=4, initial_backoff=0.1, max_backoff=1.0)
"""A few quick retries per request; longer outages are the replicator's loop's to wait out (and log)."""


@dataclass(frozen=True, slots=True)
class Page:
    """One read_committed fetch of a source partition: the messages as JSON, and where to go on."""

    partition: int
    offset: int
    messages: list[dict[str, Any]]
    next_offset: int
    last_stable_offset: int
    high_watermark: int


def _offsets_and_metadata(
    offsets: Sequence[CommittedOffset],
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, str]]:
    """The offsets to commit, and the metadata of those that carry some, as the SDK's builders take them."""
    positions = {(o.topic, o.partition): o.offset for o in offsets}
    metadata = {(o.topic, o.partition): o.metadata for o in offsets if o.metadata is not None}
    return positions, metadata


class Cluster:
    """The source or the target: ``side`` is ``"source"`` or ``"target"`` (it names the token option in errors)."""

    def __init__(self, side: str, url: str, token: str | None, *, timeout: float = 10.0) -> None:
        self.side = side
        self.url = url.rstrip("/")
        self._client = Client(self.url, token=token, retry=RETRY, timeout=timeout)

    def close(self) -> None:
        self._client.close()

    def _call(self, call: Call[T], action: str, needs: str) -> T:
        try:
            return self._client.call(call)
        except HalfmqError as error:
            raise ClusterError(self.side, self.url, action, needs, error) from error

    # -- cluster and topics ------------------------------------------------------------------

    def name(self) -> str:
        return self._call(calls.cluster_name(), "tell its cluster name (GET /v1/cluster)", "cluster:describe")

    def describe_topic(self, topic: str) -> TopicMetadata | None:
        """The topic's partitions and offsets, or ``None`` if it does not exist."""
        try:
            return self._call(calls.get_topic(topic), f"describe topic '{topic}'", f"topic:describe on '{topic}'")
        except ClusterError as error:
            if isinstance(error.cause, TopicNotFoundError):
                return None
            raise

    def create_topic(self, topic: str, partitions: int) -> bool:
        """Create the topic; ``False`` if it exists already (someone else was first)."""
        try:
            self._call(
                calls.create_topic(topic, partitions), f"create topic '{topic}' with {partitions} partitions",
                f"topic:alter on '{topic}'",
            )
        except ClusterError as error:
            if isinstance(error.cause, TopicExistsError):
                return False
            raise
        return True

    # -- reading ---------------------------------------------------------------------------------

    def fetch(self, topic: str, partition: int, offset: int, *, max_messages: int, max_wait_ms: int) -> Page:
        """Committed messages only (read_committed): no aborted or open transaction's, no half message."""
        call = calls.fetch_raw(
            topic, partition, offset, max_messages=max_messages, max_wait_ms=max_wait_ms, decode=orjson.loads
        )
        fetched = self._call(call, f"read {topic}/{partition} from offset {offset}", f"topic:read on '{topic}'")
        return Page(
            partition=partition,
            offset=offset,
            messages=fetched.messages,
            next_offset=fetched.next_offset,
            last_stable_offset=fetched.last_stable_offset,
            high_watermark=fetched.high_watermark,
        )

    def group_offsets(self, group: str) -> list[CommittedOffset]:
        return self._call(
            calls.group_offsets(group), f"read group '{group}''s offsets",
            f"group:read on '{group}' and topic:read on its topics",
        )

    def commit_group_offsets(self, group: str, offsets: Sequence[CommittedOffset]) -> None:
        positions, metadata = _offsets_and_metadata(offsets)
        self._call(
            calls.commit_group_offsets(group, positions, metadata=metadata), f"commit group '{group}''s offsets",
            f"group:read on '{group}' and topic:read on its topics",
        )

    # -- writing in a transaction ----------------------------------------------------------------

    def init_producer(self, transactional_id: str, timeout_ms: int) -> ProducerIdentity:
        """InitProducerId: a new epoch; the previous one's open transaction is aborted (or finished)."""
        return self._call(
            calls.init_producer(transactional_id, timeout_ms), f"register transactional id '{transactional_id}'",
            f"transactional_id:write on '{transactional_id}'",
        )

    def produce(
        self,
        topic: str,
        partition: int,
        messages: Sequence[bytes],
        producer: ProducerIdentity,
        base_sequence: int,
        txn_id: str | None,
    ) -> ProduceResult:
        """A sequence-numbered batch of messages encoded as JSON into the transaction ``txn_id``, or into one it
        begins when ``None``. The copies are spliced into the body as they were encoded."""
        call = calls.produce_encoded(
            topic, partition, messages, producer=producer, base_sequence=base_sequence, txn_id=txn_id,
            transactional=txn_id is None,
        )
        return self._call(call, f"write copies to {topic}/{partition}", f"topic:write on '{topic}'")

    def begin(self, producer: ProducerIdentity) -> str:
        """Begin a transaction explicitly (for a batch that only moves the position); never resent once sent."""
        begun = self._call(
            calls.begin_transaction(producer, None), "begin a transaction",
            "transactional_id:write on the replicator's transactional id",
        )
        return begun.txn_id

    def add_offsets(self, txn_id: str, group: str, offsets: Sequence[CommittedOffset]) -> None:
        positions, metadata = _offsets_and_metadata(offsets)
        self._call(
            calls.add_offsets_to_transaction(txn_id, group, positions, metadata=metadata),
            f"record its progress in group '{group}'", f"group:read on '{group}' and topic:read on its topics",
        )

    def commit(self, txn_id: str) -> None:
        self._call(
            calls.end_transaction(txn_id, "commit"), f"commit transaction {txn_id}",
            "transactional_id:write on the replicator's transactional id",
        )
