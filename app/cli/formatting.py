"""What the client verbs share besides the connection: times, durations, sizes and state colours.

Answers carry times as milliseconds since the epoch; an operator reads ages ("4m 10s
ago") and local clock times. Flags take durations and sizes the way operators write
them (``30s``, ``7d``, ``512MiB``) and send the API its plain integers.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from typing import Any

import typer

_DURATION_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_DURATION = re.compile(r"^(\d+)\s*(ms|s|m|h|d|w)?$")
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_SIZE = re.compile(r"^(\d+)\s*([kmgt]?)(i?b)?$")

# Rich styles of the states an operator scans for: what needs attention is red or yellow.
STATE_STYLES = {
    "PREPARED": "yellow",
    "COMMITTED": "green",
    "ROLLED_BACK": "blue",
    "DISCARDED": "red",
    "OPEN": "yellow",
    "PREPARE_COMMIT": "yellow",
    "PREPARE_ABORT": "yellow",
    "ABORTED": "blue",
    "TIMED_OUT": "red",
    "STABLE": "green",
    "RECONCILING": "yellow",
    "EMPTY": "dim",
}
OPEN_TXN_STATES = ("OPEN", "PREPARE_COMMIT", "PREPARE_ABORT")


def shown_value(message: dict[str, Any], width: int | None = None) -> str:
    """A message's value as one line: a string as it is, other JSON as JSON text, binary as ``<base64>``.

    ``width`` cuts it (with …) for a table column; a value the broker already cut
    (``value_truncated``) ends in … too. A message shown without its body (the caller may
    not read its topic) is ``(hidden)``.
    """
    if message.get("body_hidden"):
        return "(hidden: needs topic:read)"
    if "value_base64" in message:
        text = f"<{message['value_base64']}>"
    elif "value" in message:
        value = message["value"]
        text = value if isinstance(value, str) else json.dumps(value)
    else:
        return "-"
    cut = bool(message.get("value_truncated"))
    if width is not None and len(text) > width:
        text, cut = text[: width - 1], True
    return f"{text}…" if cut else text


def now_ms() -> int:
    return int(time.time() * 1000)


def styled_state(state: str) -> str:
    style = STATE_STYLES.get(state)
    return f"[{style}]{state}[/{style}]" if style else state


def span(ms: int | None) -> str:
    """A duration as an operator says it: ``850ms``, ``42s``, ``3m 07s``, ``2h 05m``, ``3d 4h``."""
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms // 1000
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def ago(at_ms: int | None, now: int | None = None) -> str:
    if at_ms is None:
        return "-"
    return f"{span(max(0, (now or now_ms()) - at_ms))} ago"


def clock(at_ms: int | None) -> str:
    """A local wall-clock time, to the second."""
    if at_ms is None:
        return "-"
    return datetime.fromtimestamp(at_ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def parse_duration_ms(text: str) -> int:
    """``500ms``, ``30s``, ``5m``, ``2h``, ``7d``, ``1w``; a bare number is milliseconds."""
    match = _DURATION.match(text.strip().lower())
    if match is None:
        raise typer.BadParameter(f"{text!r} is not a duration (such as 500ms, 30s, 5m, 2h, 7d)")
    return int(match.group(1)) * _DURATION_UNITS_MS[match.group(2) or "ms"]


TIME_FORMATS = "2026-11-27T09:30:00, …Z, ms since the epoch, '30m ago'"


def parse_time_ms(text: str) -> int:
    """A point in time, as ms since the epoch: ``2026-11-27T09:30:00`` (local time unless it names
    a zone: ``…Z``, ``…+01:00``), a date, ms since the epoch, or a duration ago (``30m ago``, ``-2h``)."""
    given = text.strip()
    if given.isdigit():
        return int(given)
    relative = given[1:] if given.startswith("-") else given[:-4] if given.lower().endswith(" ago") else None
    if relative is not None:
        return now_ms() - parse_duration_ms(relative)
    try:
        return int(datetime.fromisoformat(given.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is not a time (such as 2026-11-27T09:30:00, 2026-11-27T09:30:00Z, 1764236000000 or '30m ago')"
        ) from None


def parse_size_bytes(text: str) -> int:
    """``1048576``, ``512k``, ``512KiB``, ``100MB``, ``2g``: binary multiples (1k = 1024 bytes)."""
    match = _SIZE.match(text.strip().lower())
    if match is None:
        raise typer.BadParameter(f"{text!r} is not a size (such as 1048576, 512KiB, 100MiB, 2GiB)")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2)]


def size(count: int | None) -> str:
    if count is None:
        return "-"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
