"""The checker's decisions as small named predicates (RocketMQ's needDiscard / needSkip)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import orjson

from half_store.domain.constants import VALUE_BINARY
from half_store.domain.half_records import CheckPayload, HalfMessage
from half_store.services.half_messages import CheckCandidate

SIGNATURE_HEADER = "X-Halfmq-Signature"


def need_discard(half: HalfMessage, check_max: int) -> bool:
    """Checked ``check_max`` times without an answer: give up on it."""
    return half.check_times >= check_max


def check_payload(candidate: CheckCandidate) -> CheckPayload:
    half, message = candidate.half, candidate.message
    payload: CheckPayload = {
        "message_id": half.message_id,
        "transaction_id": half.transaction_id,
        "producer_group": half.producer_group,
        "topic": half.topic,
        "key": message.key,
        "headers": orjson.loads(message.headers) if message.headers else {},
        "check_times": half.check_times,
        "born_timestamp": half.born_timestamp,
    }
    if message.value_kind == VALUE_BINARY:
        payload["value_base64"] = base64.b64encode(message.value).decode()
    else:
        payload["value"] = orjson.loads(message.value)
    return payload


def signature(secret: str, body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256 of the raw body>``, keyed with the listener's secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def parse_answer(body: bytes) -> str:
    """The listener's answer: COMMIT, ROLLBACK, or UNKNOWN for anything else."""
    try:
        state = orjson.loads(body).get("state")
    except (orjson.JSONDecodeError, AttributeError):
        return "UNKNOWN"
    return state if state in ("COMMIT", "ROLLBACK") else "UNKNOWN"
