"""Turning wire messages into log records and stored messages back into JSON.

Values are stored as the JSON text the producer sent (re-serialised once by
orjson) or as raw bytes for ``value_base64``; on the way out the stored JSON text
is spliced into the response as an ``orjson.Fragment`` instead of being parsed
and serialised again.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

import orjson
from starlette.responses import Response

from app.api.models import MessageFields, MessageOut
from app.api.tracing import TRACEPARENT
from half_store.domain.constants import VALUE_BINARY, VALUE_JSON
from half_store.domain.errors import ValidationFailed
from half_store.domain.json_bytes import stored_json
from half_store.domain.message_limits import MessageLimits, encode_headers
from half_store.domain.records import Record, StoredMessage, now_ms
from half_store.domain.share_records import ReceivedMessage
from half_store.domain.tags import TAG_HEADER

# JSON text spliced into a body as it is: it stands for whatever the body declares there,
# so to mypy it is Any (the same callable, no wrapper on the fetch path).
json_text: Callable[[bytes | str], Any] = orjson.Fragment


class JsonResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def to_record(
    message: MessageFields, limits: MessageLimits, *, timestamp: int | None = None, trace: dict[str, str] | None = None
) -> Record:
    """A wire message as a log record; ``trace`` (the request's trace context) joins its headers unless it has its own."""
    json_value = None
    if message.value_base64 is None:
        try:
            json_value = stored_json(message.value)
        except TypeError as error:  # e.g. an integer beyond 64 bits
            raise ValidationFailed(f"value cannot be stored as JSON: {error}") from error
    return record_of(
        message.key, json_value, message.value_base64, message.headers, message.tag, limits, timestamp, trace
    )


def record_of(
    key: str | None,
    json_value: bytes | None,
    value_base64: str | None,
    headers: dict[str, str],
    tag: str | None,
    limits: MessageLimits,
    timestamp: int | None,
    trace: dict[str, str] | None = None,
) -> Record:
    """A message's log record: ``json_value`` is its value's JSON text, else ``value_base64`` holds it."""
    if value_base64 is not None:
        try:
            value = base64.b64decode(value_base64, validate=True)
        except (binascii.Error, ValueError) as error:
            raise ValidationFailed("value_base64 is not valid base64") from error
        kind = VALUE_BINARY
    else:
        assert json_value is not None
        value, kind = json_value, VALUE_JSON
    given = headers if trace is None or TRACEPARENT in headers else {**trace, **headers}
    encoded = encode_headers(given if tag is None else {**given, TAG_HEADER: tag}, limits)
    limits.check_size(value, key, encoded)
    return Record(key, value, kind, encoded, now_ms() if timestamp is None else timestamp)


def message_json(message: StoredMessage | ReceivedMessage) -> MessageOut:
    body: MessageOut = {
        "topic": message.topic,
        "partition": message.partition,
        "offset": message.offset,
        "timestamp": message.timestamp,
        "key": message.key,
        "headers": json_text(message.headers) if message.headers else {},
    }
    if message.value_kind == VALUE_BINARY:
        body["value_base64"] = base64.b64encode(message.value).decode()
    else:
        body["value"] = json_text(message.value)
    return body
