"""Every broker request, as a :class:`Call` (no I/O here): the SDK's public call builders.

Blocking and asyncio classes both build their requests with these functions and
hand them to their transport, so a path, a body shape or an idempotency decision
is written down exactly once. Tools that speak the broker's HTTP API for their own
ends (the replicator, the Spark source, the ``halfmq`` CLI) build theirs here too,
and send them with :meth:`sdk.Client.call`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

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
    ReceivedMessage,
    ShareGroupInfo,
    TopicMetadata,
    TransactionInfo,
)

TopicPartition = tuple[str, int]
"""``(topic, partition)``, the key of every offset mapping in the SDK."""


def _seg(value: str | int) -> str:
    # Group names, transactional ids and instance ids are free text; never let a
    # "/" or "?" in them change the route.
    return quote(str(value), safe="")


def _ignore(_body: Any) -> None:
    return None


def _offsets_json(offsets: Mapping[TopicPartition, int]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p, "offset": int(o)} for (t, p), o in sorted(offsets.items())]


# --- topics, produce, fetch, groups --------------------------------------------------


def health() -> Call[Any]:
    """``GET /healthz``."""
    return Call("GET", "/healthz", parse=lambda body: body)


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


def produce(topic: str, messages: Sequence[Mapping[str, Any]]) -> Call[list[tuple[int, int]]]:
    """``POST /v1/topics/{topic}/messages``: broker-side partitioning, no deduplication."""
    return Call(
        "POST", f"/v1/topics/{_seg(topic)}/messages", json={"messages": list(messages)}, idempotent=False,
        parse=lambda body: [(int(o["partition"]), int(o["offset"])) for o in body["offsets"]],
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
    body: dict[str, Any] = {"messages": list(messages)}
    if producer is not None:
        body["producer_id"] = producer.producer_id
        body["producer_epoch"] = producer.producer_epoch
    if base_sequence is not None:
        body["base_sequence"] = base_sequence
    if txn_id is not None:
        body["txn_id"] = txn_id
    elif transactional:
        body["transactional"] = True
    return Call(
        "POST", f"/v1/topics/{_seg(topic)}/partitions/{partition}/messages", json=body,
        idempotent=base_sequence is not None,
        parse=lambda answer: ProduceResult.from_json(answer, partition),
    )


def fetch(
    topic: str, partition: int, offset: int, *, max_messages: int, max_wait_ms: int, isolation: str
) -> Call[FetchResult]:
    """``GET /v1/topics/{t}/partitions/{p}/messages`` (a long-poll when ``max_wait_ms`` > 0)."""
    return Call(
        "GET", f"/v1/topics/{_seg(topic)}/partitions/{partition}/messages",
        params={"offset": offset, "max_messages": max_messages, "max_wait_ms": max_wait_ms, "isolation": isolation},
        extra_timeout=max_wait_ms / 1000.0,
        parse=lambda body: FetchResult.from_json(body, topic, partition),
    )


def _member_json(member: GroupMetadata | None) -> dict[str, Any]:
    return {} if member is None else {"member_id": member.member_id, "member_epoch": member.member_epoch}


def commit_group_offsets(
    group: str, offsets: Mapping[TopicPartition, int], member: GroupMetadata | None = None
) -> Call[None]:
    """``POST /v1/groups/{group}/offsets`` (as ``member``, while the group has members).

    Setting an offset twice is harmless."""
    body = {"offsets": _offsets_json(offsets), **_member_json(member)}
    return Call("POST", f"/v1/groups/{_seg(group)}/offsets", json=body, parse=_ignore)


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
    txn_id: str, group: str, offsets: Mapping[TopicPartition, int], member: GroupMetadata | None = None
) -> Call[None]:
    """``POST /v1/transactions/{txn_id}/offsets``: group offsets that commit with the transaction
    (staged by ``member``, which the broker checks now and again at the commit)."""
    return Call(
        "POST", f"/v1/transactions/{_seg(txn_id)}/offsets",
        json={"group": group, "offsets": _offsets_json(offsets), **_member_json(member)}, parse=_ignore,
    )


def end_transaction(txn_id: str, action: str) -> Call[str]:
    """``POST /v1/transactions/{txn_id}/commit|abort``; both are idempotent on the broker."""
    assert action in ("commit", "abort")
    return Call("POST", f"/v1/transactions/{_seg(txn_id)}/{action}", json={}, parse=lambda body: str(body["state"]))


def get_transaction(txn_id: str) -> Call[TransactionInfo]:
    """``GET /v1/transactions/{txn_id}``."""
    return Call("GET", f"/v1/transactions/{_seg(txn_id)}", parse=TransactionInfo.from_json)


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


def list_half_messages(producer_group: str, state: str | None) -> Call[list[HalfMessageInfo]]:
    """``GET /v1/half-messages?producer_group=&state=``."""
    params = {"producer_group": producer_group} | ({"state": state} if state else {})
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
    acks: Sequence[ShareAck] = (),
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


def add_acks_to_transaction(txn_id: str, group: str, receipts: Sequence[str]) -> Call[list[AckResult]]:
    """``POST /v1/transactions/{txn_id}/acks``: accepted with the transaction, released if it aborts."""
    return Call(
        "POST", f"/v1/transactions/{_seg(txn_id)}/acks", json={"group": group, "receipts": list(receipts)},
        parse=_results,
    )
