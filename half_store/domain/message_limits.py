"""The broker's limits on one message (size, headers), checked the same way by every front."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from half_store.domain.errors import MessageTooLarge, ValidationFailed


@dataclass(frozen=True, slots=True)
class MessageLimits:
    max_message_bytes: int
    max_header_count: int
    max_header_bytes: int

    def check_size(self, value: bytes, key: str | None, headers: str | None) -> None:
        """413 ``MESSAGE_TOO_LARGE`` when value, key and headers together are over the limit."""
        size = len(value) + (len(key.encode()) if key else 0) + (len(headers) if headers else 0)
        if size > self.max_message_bytes:
            raise MessageTooLarge(f"message of {size} bytes is over the limit of {self.max_message_bytes}")


def encode_headers(headers: Mapping[str, str], limits: MessageLimits) -> str | None:
    """Headers as stored (JSON object text), None when there are none; refused past the limits."""
    if not headers:
        return None
    if len(headers) > limits.max_header_count:
        raise ValidationFailed(f"{len(headers)} headers is over the limit of {limits.max_header_count}")
    try:
        encoded = orjson.dumps(headers)
    except TypeError as error:  # a lone surrogate in a name or value
        raise ValidationFailed(f"headers cannot be stored as JSON: {error}") from error
    if len(encoded) > limits.max_header_bytes:
        raise ValidationFailed(f"headers of {len(encoded)} bytes are over the limit of {limits.max_header_bytes}")
    return encoded.decode()
