"""The one retry decision: what is resent, and when resending is not safe."""

from __future__ import annotations

import httpx

from sdk._http import Call, RetryPolicy, retry_delay

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
