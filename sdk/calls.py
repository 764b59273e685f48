"""Every broker request, as a :class:`Call` (no I/O here): the SDK's public call builders.

Blocking and asyncio classes both build their requests with these functions and
hand them to their transport, so a path, a body shape or an idempotency decision
is written down exactly once. Tools that speak the broker's HTTP API for their own
ends (the replicator, the Spark source, the ``halfmq`` CLI) build theirs here too,
and send them with :meth:`sdk.Client.call`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypedDict, Unpack
from urllib.parse import quote

import httpx

from sdk._http import Call
from sdk.models import (
    AckResult,
    CommittedOffset,
    FetchResult,
    GroupDescription,
    GroupMetadata,
    HalfMessageInfo,
    MemberAssignment,
    ProduceResult,
    ProducerIdentity,
    RawFetchResult,
    ReceivedMessage,
    ShareGroupInfo,
    TopicMetadata,
    TransactionInfo,
)

__all__ = [
    "ARROW_STREAM",
    "Call",
    "ShareAck",
    "TopicChanges",
    "TopicPartition",
    "add_acks_to_transaction",
    "add_offsets_to_transaction",
    "alter_topic",
    "begin_transaction",
    "cluster_name",
    "commit_group_offsets",
    "create_acl",
    "create_principal",
    "create_token",
    "create_topic",
    "delete_acl",
    "delete_share_group",
    "delete_topic",
    "describe_group",
    "describe_share_group",
    "end_half_message",
    "end_transaction",
    "fetch",
    "fetch_arrow",
    "fetch_raw",
    "get_half_message",
    "get_topic",
    "get_transaction",
    "group_offsets",
    "health",
    "heartbeat",
    "init_producer",
    "join_group",
    "leave_group",
    "list_acls",
    "list_groups",
    "list_half_messages",
    "list_principals",
    "list_share_groups",
    "list_tokens",
    "list_topics",
    "list_transactions",
    "offsets_for_time",
    "poll_checks",
    "prepare_half_message",
    "produce",
    "produce_encoded",
    "produce_to_partition",
    "recheck_half_message",
    "register_listener",
    "revoke_token",
    "share_acks",
    "share_extend",
    "share_receive",
    "unregister_listener",
]

TopicPartition = tuple[str, int]
"""``(topic, partition)``, the key of every offset mapping in the SDK."""

ARROW_STREAM = "application/vnd.apache.arrow.stream"
"""The media type of the fetch endpoint's Arrow answer (``docs/arrow.md``)."""


def _seg(value: str | int) -> str:
    # Group names, transactional ids and instance ids are free text; never let a
    # "/" or "?" in them change the route.
    return quote(str(value), safe="")


def _ignore(_body: Any) -> None:
    return None


def _as_it_came(answer: Any) -> Any:
    return answer


def _response(response: httpx.Response) -> httpx.Response:
    return response


def _present(**params: Any) -> dict[str, Any]:
    """Query parameters without the ones not given (``None``)."""
    return {name: value for name, value in params.items() if value is not None}


def _offsets_json(
    offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
) -> list[dict[str, Any]]:
    entries = []
    for (topic, partition), offset in sorted(offsets.items()):
        entry: dict[str, Any] = {"topic": topic, "partition": partition, "offset": int(offset)}
        if metadata is not None and (topic, partition) in metadata:
            entry["metadata"] = metadata[(topic, partition)]
        entries.append(entry)
    return entries


# --- topics, produce, fetch, groups --------------------------------------------------


def health() -> Call[Any]:
    """``GET /healthz``."""
    return Call("GET", "/healthz", parse=_as_it_came)


def cluster_name() -> Call[str]:
    """``GET /v1/cluster`` → the broker's ``HALFMQ_CLUSTER_NAME``."""
    return Call("GET", "/v1/cluster", parse=lambda body: str(body["cluster_name"]))


def create_topic(name: str, partitions: int) -> Call[dict[str, Any]]:
    """``POST /v1/topics``; not resent once it may have arrived (a repeat would be TOPIC_EXISTS)."""
    return Call("POST", "/v1/topics", parse=dict, json={"name": name, "partitions": partitions}, idempotent=False)


def list_topics(include_system: bool) -> Call[dict[str, int]]:
    """``GET /v1/topics`` → ``{name: partition count}``."""
    return Call(
        "GET", "/v1/topics", params={"include_system": str(include_system).lower()},
        parse=lambda body: {t["name"]: int(t["partitions"]) for t in body["topics"]},
    )


def get_topic(name: str) -> Call[TopicMetadata]:
    """``GET /v1/topics/{topic}``."""
    return Call("GET", f"/v1/topics/{_seg(name)}", parse=TopicMetadata.from_json)


class TopicChanges(TypedDict, total=False):
    """What ``PATCH /v1/topics/{topic}`` changes: more ``partitions`` (never fewer), or retention
    (``None``: back to the broker's default; -1: no limit)."""

    partitions: int
    retention_ms: int | None
    retention_bytes: int | None


def alter_topic(name: str, **changes: Unpack[TopicChanges]) -> Call[TopicMetadata]:
    """``PATCH /v1/topics/{topic}``: setting the same values twice is harmless."""
    return Call("PATCH", f"/v1/topics/{_seg(name)}", json=dict(changes), parse=TopicMetadata.from_json)


def delete_topic(name: str) -> Call[None]:
    """``DELETE /v1/topics/{topic}`` (a resend after a lost answer reads TOPIC_NOT_FOUND)."""
    return Call("DELETE", f"/v1/topics/{_seg(name)}", parse=_ignore)


def produce(topic: str, messages: Sequence[Mapping[str, Any]]) -> Call[list[tuple[int, int]]]:
    """``POST /v1/topics/{topic}/messages``: broker-side partitioning, no deduplication."""
    return Call(
        "POST", f"/v1/topics/{_seg(topic)}/messages", json={"messages": list(messages)}, idempotent=False,
        parse=lambda body: [(int(o["partition"]), int(o["offset"])) for o in body["offsets"]],
    )


def produce_delayed(topic: str, messages: Sequence[Mapping[str, Any]]) -> Call[list[str]]:
    """``POST /v1/topics/{topic}/delayed-messages`` → the delay messages' ids; not resent once it may
    have arrived (a repeat would schedule them twice)."""
    return Call(
        "POST", f"/v1/topics/{_seg(topic)}/delayed-messages", json={"messages": list(messages)}, idempotent=False,
        parse=lambda body: [str(s["message_id"]) for s in body["scheduled"]],
    )


def produce_to_partition(
    topic: str,
    partition: int,
    messages: Sequence[Mapping[str, Any]],
    *,
    producer: ProducerIdentity | None = None,
    base_sequence: int | None = None,
    txn_id: str | None = None,
    transactional: bool = False,
) -> Call[ProduceResult]:
    """``POST /v1/topics/{t}/partitions/{p}/messages``.

    Resending is safe only with a sequence number: the broker then answers a repeat
    with the original offsets (``duplicate: true``) instead of writing it twice.
    ``transactional`` without ``txn_id``: into the producer's open transaction, begun
    by this write if there is none; the result names it.
    """
    body = {"messages": list(messages), **_batch_fields(producer, base_sequence, txn_id, transactional)}
    return Call(
        "POST", f"/v1/topics/{_seg(topic)}/partitions/{partition}/messages", json=body,
        idempotent=base_sequence is not None,
        parse=lambda answer: ProduceResult.from_json(answer, partition),
    )


def produce_encoded(
    topic: str,
    partition: int,
    encoded: Sequence[bytes],
    *,
    producer: ProducerIdentity | None = None,
    base_sequence: int | None = None,
    txn_id: str | None = None,
    transactional: bool = False,
) -> Call[ProduceResult]:
    """:func:`produce_to_partition` for messages already encoded as JSON objects, each spliced
    into the body as it is (a caller that copies many messages encodes them once, its own way)."""
    fields = json.dumps(_batch_fields(producer, base_sequence, txn_id, transactional), separators=(",", ":"))
    rest = fields.encode()[1:-1]  # the object's members, without its braces
    content = b'{"messages":[' + b",".join(encoded) + b"]" + (b"," + rest if rest else b"") + b"}"
    return replace(produce_to_partition(topic, partition, [], producer=producer, base_sequence=base_sequence),
                   json=None, content=content)


def _batch_fields(
    producer: ProducerIdentity | None, base_sequence: int | None, txn_id: str | None, transactional: bool
) -> dict[str, Any]:
    """Who writes a partition batch and into what: the producer, its sequence, the transaction."""
    fields: dict[str, Any] = {}
    if producer is not None:
        fields["producer_id"] = producer.producer_id
        fields["producer_epoch"] = producer.producer_epoch
    if base_sequence is not None:
        fields["base_sequence"] = base_sequence
    if txn_id is not None:
        fields["txn_id"] = txn_id
    elif transactional:
        fields["transactional"] = True
    return fields


def fetch(
    topic: str, partition: int, offset: int, *, max_messages: int, max_wait_ms: int, isolation: str,
    tag: str | None = None,
) -> Call[FetchResult]:
    """``GET /v1/topics/{t}/partitions/{p}/messages`` (a long-poll when ``max_wait_ms`` > 0); with ``tag``,
    only the messages that tag filter keeps (the position still moves past the others)."""
    params: dict[str, Any] = {"offset": offset, "max_messages": max_messages, "max_wait_ms": max_wait_ms}
    params["isolation"] = isolation
    if tag is not None:
        params["tag"] = tag
    return Call(
        "GET", f"/v1/topics/{_seg(topic)}/partitions/{partition}/messages",
        params=params,
        extra_timeout=max_wait_ms / 1000.0,
        parse=lambda body: FetchResult.from_json(body, topic, partition),
    )


def fetch_raw(
    topic: str, partition: int, offset: int, *, max_messages: int, max_wait_ms: int = 0,
    isolation: str = "read_committed", decode: Callable[[bytes], Any] | None = None,
) -> Call[RawFetchResult]:
    """:func:`fetch`, its messages left as the broker's JSON; ``decode`` reads the answer's bytes
    (a faster JSON codec than the standard one, for callers that move many messages)."""
    call = fetch(topic, partition, offset, max_messages=max_messages, max_wait_ms=max_wait_ms, isolation=isolation)
    return call.answered_by(RawFetchResult.from_json, decode=decode)


def fetch_arrow(
    topic: str, partition: int, offset: int, *, max_messages: int, isolation: str = "read_committed",
    accept: str = ARROW_STREAM, tag: str | None = None,
) -> Call[httpx.Response]:
    """:func:`fetch` answered as an Arrow IPC stream (``docs/arrow.md``): the whole
    :class:`httpx.Response`, whose headers carry ``X-Halfmq-Next-Offset`` and the rest.
    ``accept`` may also name JSON, for brokers that predate the Arrow answer."""
    call = fetch(topic, partition, offset, max_messages=max_messages, max_wait_ms=0, isolation=isolation, tag=tag)
    return call.answered_by(_response, headers={"Accept": accept}, whole_answer=True)


def _member_json(member: GroupMetadata | None) -> dict[str, Any]:
    return {} if member is None else {"member_id": member.member_id, "member_epoch": member.member_epoch}


def commit_group_offsets(
    group: str,
    offsets: Mapping[TopicPartition, int],
    member: GroupMetadata | None = None,
    *,
    metadata: Mapping[TopicPartition, str] | None = None,
) -> Call[None]:
    """``POST /v1/groups/{group}/offsets`` (as ``member``, while the group has members), with
    ``metadata`` stored beside the offsets it names.

    Setting an offset twice is harmless."""
    body = {"offsets": _offsets_json(offsets, metadata), **_member_json(member)}
    return Call("POST", f"/v1/groups/{_seg(group)}/offsets", json=body, parse=_ignore)


def offsets_for_time(topic: str, timestamp_ms: int, *, isolation: str = "read_committed") -> Call[dict[int, int]]:
    """``GET /v1/topics/{topic}/offsets?timestamp=`` (Kafka's offsets-for-times) → ``{partition: offset}``:
    per partition, the first offset whose message's timestamp is at or after ``timestamp_ms`` (the end
    where there is none yet). Seek there, or commit them as a group's offsets to reset it by time."""
    return Call(
        "GET", f"/v1/topics/{_seg(topic)}/offsets", params={"timestamp": timestamp_ms, "isolation": isolation},
        parse=lambda body: {int(p["partition"]): int(p["offset"]) for p in body.get("partitions") or []},
    )


def group_offsets(group: str) -> Call[list[CommittedOffset]]:
    """``GET /v1/groups/{group}/offsets``."""
    return Call(
        "GET", f"/v1/groups/{_seg(group)}/offsets",
        parse=lambda body: [CommittedOffset.from_json(o) for o in body.get("offsets") or []],
    )


def join_group(
    group: str, member_id: str, topics: Sequence[str], session_timeout_ms: int | None
) -> Call[MemberAssignment]:
    """``POST /v1/groups/{group}/members``; safe to resend: the member id is the client's, so a
    repeat answers the same member."""
    body: dict[str, Any] = {"topics": list(topics), "member_id": member_id}
    if session_timeout_ms is not None:
        body["session_timeout_ms"] = session_timeout_ms
    return Call("POST", f"/v1/groups/{_seg(group)}/members", json=body, parse=MemberAssignment.from_json)


def heartbeat(group: str, member_id: str, member_epoch: int, owned: Sequence[TopicPartition]) -> Call[MemberAssignment]:
    """``POST /v1/groups/{group}/members/{member}/heartbeat``. Resending is safe: if the lost answer
    had moved the epoch on, the repeat is fenced and the member joins again."""
    body = {"member_epoch": member_epoch, "owned": [{"topic": t, "partition": p} for t, p in owned]}
    return Call(
        "POST", f"/v1/groups/{_seg(group)}/members/{_seg(member_id)}/heartbeat", json=body,
        parse=MemberAssignment.from_json,
    )


def leave_group(group: str, member_id: str) -> Call[None]:
    """``DELETE /v1/groups/{group}/members/{member}``: its partitions go to the others at once."""
    return Call("DELETE", f"/v1/groups/{_seg(group)}/members/{_seg(member_id)}", parse=_ignore)


def list_groups() -> Call[list[dict[str, Any]]]:
    """``GET /v1/groups`` → ``[{"group", "state", "members"}]``."""
    return Call("GET", "/v1/groups", parse=lambda body: list(body.get("groups") or []))


def describe_group(group: str) -> Call[GroupDescription]:
    """``GET /v1/groups/{group}``."""
    return Call("GET", f"/v1/groups/{_seg(group)}", parse=GroupDescription.from_json)


# --- producers and Kafka-style transactions (Mode 2) ---------------------------------


def init_producer(transactional_id: str | None = None, transaction_timeout_ms: int | None = None) -> Call[ProducerIdentity]:
    """``POST /v1/producers`` (InitProducerId).

    Resending is harmless: at worst an unused producer id, or one more epoch bump
    of our own transactional id.
    """
    body: dict[str, Any] = {}
    if transactional_id is not None:
        body["transactional_id"] = transactional_id
    if transaction_timeout_ms is not None:
        body["transaction_timeout_ms"] = transaction_timeout_ms
    return Call("POST", "/v1/producers", json=body, parse=ProducerIdentity.from_json)


def begin_transaction(producer: ProducerIdentity | None, timeout_ms: int | None) -> Call[TransactionInfo]:
    """``POST /v1/transactions``; a lost answer cannot be recovered by resending (the
    first one may be open), so only never-sent requests are retried."""
    body: dict[str, Any] = {}
    if producer is not None:
        body.update(producer_id=producer.producer_id, producer_epoch=producer.producer_epoch)
    if timeout_ms is not None:
        body["timeout_ms"] = timeout_ms
    return Call("POST", "/v1/transactions", json=body, idempotent=False, parse=TransactionInfo.from_json)


def add_offsets_to_transaction(
    txn_id: str,
    group: str,
    offsets: Mapping[TopicPartition, int],
    member: GroupMetadata | None = None,
    *,
    metadata: Mapping[TopicPartition, str] | None = None,
) -> Call[None]:
    """``POST /v1/transactions/{txn_id}/offsets``: group offsets that commit with the transaction
    (staged by ``member``, which the broker checks now and again at the commit)."""
    return Call(
        "POST", f"/v1/transactions/{_seg(txn_id)}/offsets",
        json={"group": group, "offsets": _offsets_json(offsets, metadata), **_member_json(member)}, parse=_ignore,
    )


def end_transaction(txn_id: str, action: str) -> Call[str]:
    """``POST /v1/transactions/{txn_id}/commit|abort``; both are idempotent on the broker."""
    assert action in ("commit", "abort")
    return Call("POST", f"/v1/transactions/{_seg(txn_id)}/{action}", json={}, parse=lambda body: str(body["state"]))


def get_transaction(txn_id: str) -> Call[TransactionInfo]:
    """``GET /v1/transactions/{txn_id}``."""
    return Call("GET", f"/v1/transactions/{_seg(txn_id)}", parse=TransactionInfo.from_json)


def list_transactions(
    state: str | None = None, older_than_ms: int | None = None, transactional_id: str | None = None
) -> Call[list[dict[str, Any]]]:
    """``GET /v1/transactions?state=&older_than_ms=&transactional_id=`` (Kafka's list / find-hanging)."""
    return Call(
        "GET", "/v1/transactions",
        params=_present(state=state, older_than_ms=older_than_ms, transactional_id=transactional_id),
        parse=lambda body: list(body.get("transactions") or []),
    )


# --- half messages and back-checks (Mode 1) ------------------------------------------


def prepare_half_message(
    topic: str,
    producer_group: str,
    message: Mapping[str, Any],
    transaction_id: str,
    *,
    partition: int | None = None,
    check_immunity_seconds: float | None = None,
) -> Call[HalfMessageInfo]:
    """``POST /v1/half-messages``; always with a transaction id, so a resend returns
    the same half message instead of a second one."""
    body: dict[str, Any] = {"topic": topic, "producer_group": producer_group, "transaction_id": transaction_id}
    body.update(message)
    if partition is not None:
        body["partition"] = partition
    if check_immunity_seconds is not None:
        body["check_immunity_seconds"] = check_immunity_seconds
    return Call("POST", "/v1/half-messages", json=body, parse=HalfMessageInfo.from_json)


def end_half_message(message_id: str, action: str) -> Call[dict[str, Any]]:
    """``POST /v1/half-messages/{id}/commit|rollback``; repeats return the same answer."""
    assert action in ("commit", "rollback")
    return Call("POST", f"/v1/half-messages/{_seg(message_id)}/{action}", json={}, parse=dict)


def get_half_message(message_id: str) -> Call[HalfMessageInfo]:
    """``GET /v1/half-messages/{id}``."""
    return Call("GET", f"/v1/half-messages/{_seg(message_id)}", parse=HalfMessageInfo.from_json)


def recheck_half_message(message_id: str) -> Call[HalfMessageInfo]:
    """``POST /v1/half-messages/{id}/recheck``: a DISCARDED half message back to PREPARED."""
    return Call("POST", f"/v1/half-messages/{_seg(message_id)}/recheck", json={}, parse=HalfMessageInfo.from_json)


def list_half_messages(
    producer_group: str | None, state: str | None, limit: int | None = None
) -> Call[list[HalfMessageInfo]]:
    """``GET /v1/half-messages?producer_group=&state=&limit=`` (a group or state not given: any)."""
    params = _present(producer_group=producer_group or None, state=state or None, limit=limit)
    return Call(
        "GET", "/v1/half-messages", params=params,
        parse=lambda body: [HalfMessageInfo.from_json(h) for h in body.get("half_messages") or []],
    )


def register_listener(
    producer_group: str, instance_id: str, *, callback_url: str, ttl_seconds: int, secret: str
) -> Call[None]:
    """``PUT /v1/producer-groups/{group}/listeners/{instance}``: registration and heartbeat."""
    return Call(
        "PUT", f"/v1/producer-groups/{_seg(producer_group)}/listeners/{_seg(instance_id)}",
        json={"callback_url": callback_url, "ttl_seconds": ttl_seconds, "secret": secret}, parse=_ignore,
    )


def unregister_listener(producer_group: str, instance_id: str) -> Call[None]:
    """``DELETE /v1/producer-groups/{group}/listeners/{instance}``."""
    return Call("DELETE", f"/v1/producer-groups/{_seg(producer_group)}/listeners/{_seg(instance_id)}", parse=_ignore)


def poll_checks(producer_group: str, *, max_wait_ms: int, instance_id: str | None = None) -> Call[list[dict[str, Any]]]:
    """``GET /v1/producer-groups/{group}/checks`` (long-poll) for producers without a callback server."""
    params: dict[str, Any] = {"max_wait_ms": max_wait_ms}
    if instance_id is not None:
        params["instance_id"] = instance_id
    return Call(
        "GET", f"/v1/producer-groups/{_seg(producer_group)}/checks", params=params,
        extra_timeout=max_wait_ms / 1000.0, parse=lambda body: list(body.get("checks") or []),
    )


# --- share groups (queue consumption) ------------------------------------------------


def _results(body: Any) -> list[AckResult]:
    return [AckResult.from_json(r) for r in body.get("results") or []]


ShareAck = tuple[str, str, int | None]
"""``(receipt, "ACCEPT" | "RELEASE" | "REJECT", delay_ms)``."""


def _acks_json(acks: Sequence[ShareAck]) -> list[dict[str, Any]]:
    entries = []
    for receipt, kind, delay_ms in acks:
        entry: dict[str, Any] = {"receipt": receipt, "type": kind}
        if delay_ms:
            entry["delay_ms"] = delay_ms
        entries.append(entry)
    return entries


def share_receive(
    group: str, topic: str, *, max_messages: int, lock_ms: int, max_wait_ms: int, ordered: bool,
    acks: Sequence[ShareAck] = (), tag: str | None = None,
) -> Call[tuple[list[ReceivedMessage], list[AckResult]]]:
    """``POST /v1/share-groups/{group}/receive`` (a long-poll when ``max_wait_ms`` > 0), carrying
    ``acks`` of earlier messages (applied first; their results come back with the messages).

    Resent after a lost answer: the messages that answer locked come back once their
    locks run out, so nothing is lost, only delayed by the lock; acknowledgements already
    applied then read RECEIPT_EXPIRED.
    """
    body: dict[str, Any] = {"topic": topic, "max_messages": max_messages, "lock_ms": lock_ms}
    body["max_wait_ms"] = max_wait_ms
    if ordered:
        body["ordered"] = True
    if tag is not None:
        body["tag"] = tag
    if acks:
        body["acks"] = _acks_json(acks)
    return Call(
        "POST", f"/v1/share-groups/{_seg(group)}/receive", json=body, extra_timeout=max_wait_ms / 1000.0,
        parse=lambda answer: ([ReceivedMessage.from_json(m) for m in answer.get("messages") or []], _results(answer)),
    )


def share_acks(group: str, acks: Sequence[ShareAck]) -> Call[list[AckResult]]:
    """``POST /v1/share-groups/{group}/acks``.

    Resent after a lost answer: an acknowledgement already applied then reads RECEIPT_EXPIRED.
    """
    return Call("POST", f"/v1/share-groups/{_seg(group)}/acks", json={"acks": _acks_json(acks)}, parse=_results)


def share_extend(group: str, receipts: Sequence[str], lock_ms: int) -> Call[list[AckResult]]:
    """``POST /v1/share-groups/{group}/extend``: renewing a lock twice is harmless."""
    return Call(
        "POST", f"/v1/share-groups/{_seg(group)}/extend", json={"receipts": list(receipts), "lock_ms": lock_ms},
        parse=_results,
    )


def describe_share_group(group: str) -> Call[ShareGroupInfo]:
    """``GET /v1/share-groups/{group}``."""
    return Call("GET", f"/v1/share-groups/{_seg(group)}", parse=ShareGroupInfo.from_json)


def list_share_groups() -> Call[list[dict[str, Any]]]:
    """``GET /v1/share-groups`` → ``[{"group", "topics", "locked", "accepted", "dlq"}]``."""
    return Call("GET", "/v1/share-groups", parse=lambda body: list(body.get("share_groups") or []))


def delete_share_group(group: str) -> Call[None]:
    """``DELETE /v1/share-groups/{group}`` (409 SHARE_GROUP_IN_USE while a record is locked)."""
    return Call("DELETE", f"/v1/share-groups/{_seg(group)}", parse=_ignore)


def list_delayed_messages(topic: str | None = None, limit: int | None = None) -> Call[list[dict[str, Any]]]:
    """``GET /v1/delayed-messages?topic=&limit=``: the delay messages still waiting, soonest first."""
    return Call(
        "GET", "/v1/delayed-messages", params=_present(topic=topic or None, limit=limit),
        parse=lambda body: list(body.get("delayed_messages") or []),
    )


def rocketmq_sessions() -> Call[dict[str, Any]]:
    """``GET /v1/rocketmq/sessions``: every broker process's RocketMQ listener and its client sessions."""
    return Call("GET", "/v1/rocketmq/sessions", parse=dict)


def add_acks_to_transaction(txn_id: str, group: str, receipts: Sequence[str]) -> Call[list[AckResult]]:
    """``POST /v1/transactions/{txn_id}/acks``: accepted with the transaction, released if it aborts."""
    return Call(
        "POST", f"/v1/transactions/{_seg(txn_id)}/acks", json={"group": group, "receipts": list(receipts)},
        parse=_results,
    )


# --- principals, tokens and ACLs (the admin token, or cluster:alter) ------------------


def create_principal(name: str) -> Call[dict[str, Any]]:
    """``POST /v1/principals``; not resent once it may have arrived (a repeat would be PRINCIPAL_EXISTS)."""
    return Call("POST", "/v1/principals", json={"name": name}, idempotent=False, parse=dict)


def list_principals() -> Call[list[dict[str, Any]]]:
    """``GET /v1/principals``."""
    return Call("GET", "/v1/principals", parse=lambda body: list(body.get("principals") or []))


def create_token(principal: str) -> Call[dict[str, Any]]:
    """``POST /v1/principals/{name}/tokens`` → ``{"token_id", "token", ...}`` (the secret, shown once);
    not resent once it may have arrived (a repeat would make a second token)."""
    return Call("POST", f"/v1/principals/{_seg(principal)}/tokens", idempotent=False, parse=dict)


def list_tokens(principal: str | None = None) -> Call[list[dict[str, Any]]]:
    """``GET /v1/tokens`` (ids and owners, never secrets)."""
    return Call(
        "GET", "/v1/tokens", params=_present(principal=principal), parse=lambda body: list(body.get("tokens") or [])
    )


def revoke_token(token_id: str) -> Call[None]:
    """``DELETE /v1/tokens/{token_id}``."""
    return Call("DELETE", f"/v1/tokens/{_seg(token_id)}", parse=_ignore)


def create_acl(
    principal: str, resource_type: str, pattern: str, operations: Sequence[str], *, prefixed: bool = False,
    deny: bool = False,
) -> Call[dict[str, Any]]:
    """``POST /v1/acls`` → the ACL with its ``acl_id``; not resent once it may have arrived (a
    repeat would add a second, equal ACL)."""
    body = {
        "principal": principal,
        "resource_type": resource_type,
        "pattern": pattern,
        "pattern_type": "prefixed" if prefixed else "literal",
        "operations": list(operations),
        "permission": "deny" if deny else "allow",
    }
    return Call("POST", "/v1/acls", json=body, idempotent=False, parse=dict)


def list_acls(principal: str | None = None, resource_type: str | None = None) -> Call[list[dict[str, Any]]]:
    """``GET /v1/acls``."""
    return Call(
        "GET", "/v1/acls", params=_present(principal=principal, resource_type=resource_type),
        parse=lambda body: list(body.get("acls") or []),
    )


def delete_acl(acl_id: str) -> Call[None]:
    """``DELETE /v1/acls/{acl_id}``."""
    return Call("DELETE", f"/v1/acls/{_seg(acl_id)}", parse=_ignore)
