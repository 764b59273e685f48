"""One side of a replication, the source or the target, as the replicator calls its HTTP API.

Each method is one request through the SDK's transport (its retry loop included), and
names what it does and the right it needs, so a refusal becomes a :class:`ClusterError`
an operator can act on. Fetched messages stay as the broker's JSON: the replicator
writes them back out as they came, without decoding values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import orjson

from app.replication.errors import ClusterError
from sdk._http import Call, RetryPolicy, Transport
from sdk.errors import HalfmqError, TopicExistsError, TopicNotFoundError
from sdk.models import CommittedOffset, ProduceResult, ProducerIdentity, TopicMetadata

T = TypeVar("T")

RETRY = RetryPolicy(max_attempts=4, initial_backoff=0.1, max_backoff=1.0)
"""A few quick retries per request; longer outages are the replicator's loop's to wait out (and log)."""


def _seg(value: str) -> str:
    return quote(value, safe="")


@dataclass(frozen=True, slots=True)
class Page:
    """One read_committed fetch of a source partition: the messages as JSON, and where to go on."""

    partition: int
    offset: int
    messages: list[dict[str, Any]]
    next_offset: int
    last_stable_offset: int
    high_watermark: int


@dataclass(frozen=True, slots=True)
class OffsetWithMetadata:
    topic: str
    partition: int
    offset: int
    metadata: str | None = None

    def json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"topic": self.topic, "partition": self.partition, "offset": self.offset}
        if self.metadata is not None:
            body["metadata"] = self.metadata
        return body


class Cluster:
    """The source or the target: ``side`` is ``"source"`` or ``"target"`` (it names the token option in errors)."""

    def __init__(self, side: str, url: str, token: str | None, *, timeout: float = 10.0) -> None:
        self.side = side
        self.url = url.rstrip("/")
        self._transport = Transport(self.url, token=token, retry=RETRY, timeout=timeout)

    def close(self) -> None:
        self._transport.close()

    def _call(self, call: Call[T], action: str, needs: str) -> T:
        try:
            return self._transport.call(call)
        except HalfmqError as error:
            raise ClusterError(self.side, self.url, action, needs, error) from error

    # -- cluster and topics ------------------------------------------------------------------

    def name(self) -> str:
        call = Call("GET", "/v1/cluster", parse=lambda body: str(body["cluster_name"]))
        return self._call(call, "tell its cluster name (GET /v1/cluster)", "cluster:describe")

    def describe_topic(self, topic: str) -> TopicMetadata | None:
        """The topic's partitions and offsets, or ``None`` if it does not exist."""
        call = Call("GET", f"/v1/topics/{_seg(topic)}", parse=TopicMetadata.from_json)
        try:
            return self._call(call, f"describe topic '{topic}'", f"topic:describe on '{topic}'")
        except ClusterError as error:
            if isinstance(error.cause, TopicNotFoundError):
                return None
            raise

    def create_topic(self, topic: str, partitions: int) -> bool:
        """Create the topic; ``False`` if it exists already (someone else was first)."""
        call = Call(
            "POST", "/v1/topics", json={"name": topic, "partitions": partitions}, parse=lambda _: True, idempotent=False
        )
        try:
            return self._call(call, f"create topic '{topic}' with {partitions} partitions", f"topic:alter on '{topic}'")
        except ClusterError as error:
            if isinstance(error.cause, TopicExistsError):
                return False
            raise

    # -- reading ---------------------------------------------------------------------------------

    def fetch(self, topic: str, partition: int, offset: int, *, max_messages: int, max_wait_ms: int) -> Page:
        """Committed messages only (read_committed): no aborted or open transaction's, no half message."""

        def page(body: Mapping[str, Any]) -> Page:
            return Page(
                partition,
                offset,
                list(body["messages"]),
                int(body["next_offset"]),
                int(body["last_stable_offset"]),
                int(body["high_watermark"]),
            )

        call = Call(
            "GET",
            f"/v1/topics/{_seg(topic)}/partitions/{partition}/messages",
            params={
                "offset": offset,
                "max_messages": max_messages,
                "max_wait_ms": max_wait_ms,
                "isolation": "read_committed",
            },
            extra_timeout=max_wait_ms / 1000.0,
            decode=orjson.loads,
            parse=page,
        )
        return self._call(call, f"read {topic}/{partition} from offset {offset}", f"topic:read on '{topic}'")

    def group_offsets(self, group: str) -> list[CommittedOffset]:
        call = Call(
            "GET",
            f"/v1/groups/{_seg(group)}/offsets",
            parse=lambda body: [CommittedOffset.from_json(o) for o in body.get("offsets") or []],
        )
        return self._call(
            call, f"read group '{group}''s offsets", f"group:read on '{group}' and topic:read on its topics"
        )

    def commit_group_offsets(self, group: str, offsets: Sequence[OffsetWithMetadata]) -> None:
        call = Call(
            "POST", f"/v1/groups/{_seg(group)}/offsets", json={"offsets": [o.json() for o in offsets]}, parse=_ignore
        )
        self._call(call, f"commit group '{group}''s offsets", f"group:read on '{group}' and topic:read on its topics")

    # -- writing in a transaction ----------------------------------------------------------------

    def init_producer(self, transactional_id: str, timeout_ms: int) -> ProducerIdentity:
        """InitProducerId: a new epoch; the previous one's open transaction is aborted (or finished)."""
        call = Call(
            "POST",
            "/v1/producers",
            json={"transactional_id": transactional_id, "transaction_timeout_ms": timeout_ms},
            parse=ProducerIdentity.from_json,
        )
        return self._call(
            call, f"register transactional id '{transactional_id}'", f"transactional_id:write on '{transactional_id}'"
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
        begins when ``None``."""
        body: dict[str, Any] = {
            "producer_id": producer.producer_id,
            "producer_epoch": producer.producer_epoch,
            "base_sequence": base_sequence,
        }
        if txn_id is None:
            body["transactional"] = True
        else:
            body["txn_id"] = txn_id
        # The copies are spliced in as they were encoded: the body is built once, by orjson.
        content = b'{"messages":[' + b",".join(messages) + b"]," + orjson.dumps(body)[1:]
        call = Call(
            "POST",
            f"/v1/topics/{_seg(topic)}/partitions/{partition}/messages",
            content=content,
            decode=orjson.loads,
            parse=lambda answer: ProduceResult.from_json(answer, partition),
        )
        return self._call(call, f"write copies to {topic}/{partition}", f"topic:write on '{topic}'")

    def begin(self, producer: ProducerIdentity) -> str:
        """Begin a transaction explicitly (for a batch that only moves the position); never resent once sent."""
        call = Call(
            "POST",
            "/v1/transactions",
            json={"producer_id": producer.producer_id, "producer_epoch": producer.producer_epoch},
            parse=lambda body: str(body["txn_id"]),
            idempotent=False,
        )
        return self._call(call, "begin a transaction", "transactional_id:write on the replicator's transactional id")

    def add_offsets(self, txn_id: str, group: str, offsets: Sequence[OffsetWithMetadata]) -> None:
        call = Call(
            "POST",
            f"/v1/transactions/{_seg(txn_id)}/offsets",
            json={"group": group, "offsets": [o.json() for o in offsets]},
            parse=_ignore,
        )
        self._call(
            call, f"record its progress in group '{group}'", f"group:read on '{group}' and topic:read on its topics"
        )

    def commit(self, txn_id: str) -> None:
        call = Call("POST", f"/v1/transactions/{_seg(txn_id)}/commit", json={}, parse=_ignore)
        self._call(call, f"commit transaction {txn_id}", "transactional_id:write on the replicator's transactional id")


def _ignore(_body: Any) -> None:
    return None
