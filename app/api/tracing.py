"""W3C Trace Context on produce and prepare: the caller's ``traceparent`` travels with its messages.

A request that carries a valid ``traceparent`` header (and its ``tracestate``) gives both
to each message it writes, as message headers, unless the message names its own. Headers
go wherever the message goes (fetches, Kafka and RocketMQ consumers, the checker's
callback and polled checks, Spark rows, replicas), so a trace follows a transactional
message from its producer to every consumer. A request without one costs a header lookup.
"""

from __future__ import annotations

import re

from starlette.requests import Request

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
# version-traceid-parentid-flags, lower-case hex; version ff and all-zero ids are invalid (W3C).
_VALID = re.compile(r"^(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$")
MAX_TRACESTATE = 512  # W3C: 32 list members; a longer one is cut by vendors anyway, so it is dropped


def trace_context(request: Request) -> dict[str, str] | None:
    """The request's trace context as message headers, or None (no header, or an invalid one: ignored, as W3C says)."""
    parent = request.headers.get(TRACEPARENT)
    if parent is None:
        return None
    parent = parent.strip().lower()
    if not _VALID.match(parent):
        return None
    context = {TRACEPARENT: parent}
    state = request.headers.get(TRACESTATE)
    if state and len(state) <= MAX_TRACESTATE:
        context[TRACESTATE] = state.strip()
    return context
