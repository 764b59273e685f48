"""The checker's predicates and wire helpers."""

from __future__ import annotations

import hashlib
import hmac

from half_store.domain.half_records import HalfMessage, first_check_at
from half_store.services.check_decisions import need_discard, parse_answer, signature


def half(check_times: int = 0, born: int = 1_000, immunity_ms: int = 0) -> HalfMessage:
    return HalfMessage("m", 0, "g", "t", "topic", 0, born, immunity_ms, check_times, born)


def test_need_discard_after_check_max_checks() -> None:
    assert not need_discard(half(check_times=14), check_max=15)
    assert need_discard(half(check_times=15), check_max=15)


def test_immunity_is_the_longer_of_timeout_and_check_immunity() -> None:
    assert first_check_at(1_000, transaction_timeout_ms=6_000, check_immunity_ms=0) > 6_999
    assert not first_check_at(1_000, transaction_timeout_ms=6_000, check_immunity_ms=0) > 7_000
    assert first_check_at(1_000, transaction_timeout_ms=6_000, check_immunity_ms=60_000) > 30_000


def test_signature_is_hmac_sha256_of_the_raw_body() -> None:
    body = b'{"message_id":"m"}'
    assert signature("k", body) == "sha256=" + hmac.new(b"k", body, hashlib.sha256).hexdigest()


def test_anything_but_commit_or_rollback_is_unknown() -> None:
    assert parse_answer(b'{"state": "COMMIT"}') == "COMMIT"
    assert parse_answer(b'{"state": "ROLLBACK"}') == "ROLLBACK"
    for body in (b'{"state": "UNKNOWN"}', b'{"state": "commit"}', b"[]", b"not json", b"", b'{"x": 1}'):
        assert parse_answer(body) == "UNKNOWN"
