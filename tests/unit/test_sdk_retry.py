"""The one retry decision: what is resent, and when resending is not safe."""

from __future__ import annotations

import httpx
import orjson
import pytest

from sdk._http import Call, RetryPolicy, _result, retry_delay
from sdk.errors import HalfmqError, TopicNotFoundError

POLICY = RetryPolicy(max_attempts=3, initial_backoff=0.1, jitter=0.0)
SAFE: Call[None] = Call("POST", "/x", parse=lambda _: None, idempotent=True)
UNSAFE: Call[None] = Call("POST", "/x", parse=lambda _: None, idempotent=False)
REQUEST = httpx.Request("POST", "http://broker/x")


def response(status: int) -> httpx.Response:
    return httpx.Response(status, request=REQUEST)


def test_connection_never_made_is_always_retried() -> None:
    assert retry_delay(POLICY, UNSAFE, 1, httpx.ConnectError("refused")) == 0.1
    assert retry_delay(POLICY, SAFE, 2, httpx.ConnectError("refused")) == 0.2


def test_lost_answers_are_retried_only_when_resending_is_safe() -> None:
    assert retry_delay(POLICY, SAFE, 1, httpx.ReadTimeout("slow")) == 0.1
    assert retry_delay(POLICY, UNSAFE, 1, httpx.ReadTimeout("slow")) is None
    assert retry_delay(POLICY, SAFE, 1, response(503)) == 0.1
    assert retry_delay(POLICY, UNSAFE, 1, response(500)) is None


def test_429_is_always_retried_and_4xx_never() -> None:
    assert retry_delay(POLICY, UNSAFE, 1, response(429)) == 0.1
    for status in (400, 404, 409, 413, 416, 422):
        assert retry_delay(POLICY, SAFE, 1, response(status)) is None


def test_attempts_are_bounded_and_backoff_is_capped() -> None:
    assert retry_delay(POLICY, SAFE, 3, httpx.ConnectError("refused")) is None
    capped = RetryPolicy(max_attempts=100, initial_backoff=1.0, max_backoff=2.0, jitter=0.0)
    assert capped.backoff(10) == 2.0


def test_a_call_may_decode_its_answers_itself_and_errors_keep_their_codes() -> None:
    decoded: list[bytes] = []

    def decode(raw: bytes) -> object:
        decoded.append(raw)
        return {"n": len(raw)}

    call: Call[object] = Call("GET", "/x", parse=lambda body: body, decode=decode)
    assert _result(call, httpx.Response(200, content=b'{"a": 1}', request=REQUEST)) == {"n": 8}
    assert decoded == [b'{"a": 1}']
    error = b'{"error": {"code": "TOPIC_NOT_FOUND", "message": "no topic t"}}'
    with pytest.raises(TopicNotFoundError, match="no topic t"):
        _result(call, httpx.Response(404, content=error, request=REQUEST))
    assert len(decoded) == 1  # an error answer is read as the contract's error shape
    html = httpx.Response(200, content=b"<html>", request=REQUEST)
    with pytest.raises(HalfmqError) as garbled:
        _result(Call("GET", "/x", parse=dict, decode=orjson.loads), html)
    assert garbled.value.code == "INVALID_RESPONSE"
