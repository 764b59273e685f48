"""``halfmq consume``: read a topic's messages, like Kafka's console consumer, over the fetch API.

Where to start: ``--offset``, else the group's committed offsets (``--group``), else the
log start (``--from-beginning``) or the end (new messages only). With ``--group`` the
offsets of what was printed are committed as it goes, so the next run continues there.
It stops after ``--count`` messages, after ``--timeout`` without a new one, or on Ctrl-C.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from app.cli.formatting import TIME_FORMATS, parse_duration_ms, parse_time_ms, shown_value
from app.cli.remote import (
    DEFAULT_URL,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_REFUSED,
    EXIT_USAGE,
    JsonOption,
    Remote,
    TokenOption,
    UrlOption,
    err,
    fail,
    out,
    remote,
)
from sdk import calls
from sdk.errors import OffsetOutOfRangeError

PAGE = 500  # messages per fetch
IDLE_POLL_MS = 1000  # how long one round of long-polls may wait when nothing was readable


class Isolation(StrEnum):
    read_committed = "read_committed"
    read_uncommitted = "read_uncommitted"


@dataclass
class Position:
    partition: int
    offset: int
    committed: int | None = None  # the group's offset, as last committed by this run or found


def consume(
    topic: Annotated[str, typer.Argument(help="The topic to read", show_default=False)],
    count: Annotated[int | None, typer.Option("--count", "-n", min=1, help="Stop after this many messages")] = None,
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="Start at the log start when there is no committed offset")
    ] = False,
    offset: Annotated[int | None, typer.Option("--offset", min=0, help="Start at this offset in every partition read")] = None,
    from_time: Annotated[
        str | None,
        typer.Option(
            "--from-time", help=f"Start at the first message written at or after this time ({TIME_FORMATS})"
        ),
    ] = None,
    partition: Annotated[
        list[int] | None, typer.Option("--partition", "-p", min=0, help="Read only this partition; repeat for more")
    ] = None,
    group: Annotated[str | None, typer.Option("--group", "-g", help="Start at the group's offsets and commit them")] = None,
    isolation: Annotated[Isolation, typer.Option(help="read_uncommitted also shows open and aborted transactions")] = (
        Isolation.read_committed
    ),
    timeout: Annotated[
        str | None, typer.Option(help="Stop after this long without a new message (30s, 2m); default: wait forever")
    ] = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print a topic's messages, one per line (JSON lines with --json); a progress bar with --count."""
    idle_limit_ms = parse_duration_ms(timeout) if timeout is not None else None
    with remote(url, token, as_json) as broker:
        described = broker.send(calls.get_topic(topic).returning_json())
        ranges = {p["partition"]: p for p in described["partitions"]}
        wanted = partition or sorted(ranges)
        unknown = [p for p in wanted if p not in ranges]
        if unknown:  # what the broker answers a produce to it: the same code, the same exit code
            fail(f"PARTITION_NOT_FOUND: topic {topic} has no partition {unknown[0]} (it has {len(ranges)})", EXIT_NOT_FOUND)
        if from_time is not None:  # Kafka's offsets-for-times: each partition from its own first offset at that time
            if offset is not None:
                fail("give --offset or --from-time, not both", EXIT_USAGE)
            at = parse_time_ms(from_time)
            found = broker.send(calls.offsets_for_time(topic, at, isolation=isolation.value))
            positions = [Position(p, found[p]) for p in wanted]
        else:
            positions = starting_positions(broker, topic, group, wanted, ranges, offset=offset, from_beginning=from_beginning)
        reader = Reader(broker, topic, group, positions, isolation.value, as_json)
        got = reader.run(count, idle_limit_ms)
    if count is not None and got < count:
        if reader.interrupted:
            fail(f"interrupted: got {got} of {count} message(s)", EXIT_INTERRUPTED)
        fail(f"got {got} of {count} message(s) before --timeout", EXIT_REFUSED)


def starting_positions(
    broker: Remote,
    topic: str,
    group: str | None,
    partitions: list[int],
    ranges: dict[int, dict[str, Any]],
    *,
    offset: int | None,
    from_beginning: bool,
) -> list[Position]:
    committed: dict[int, int] = {}
    if group is not None:
        answer = broker.send(calls.group_offsets(group).returning_json())
        committed = {o["partition"]: o["offset"] for o in answer["offsets"] if o["topic"] == topic}
    positions = []
    for p in partitions:
        log_start, end = ranges[p]["log_start_offset"], ranges[p]["high_watermark"]
        if offset is not None:
            start = offset
        elif p in committed:
            start = committed[p]
        else:
            start = log_start if from_beginning else end
        if start < log_start:  # deleted by retention since the group last read: go on from what is left
            err.print(f"[yellow]partition {p}: offset {start} was deleted; starting at the log start {log_start}[/yellow]")
            start = log_start
        positions.append(Position(p, start, committed.get(p)))
    return positions


class Reader:
    """Fetches round-robin over the partitions, prints, and commits what it printed."""

    def __init__(
        self, broker: Remote, topic: str, group: str | None, positions: list[Position], isolation: str, as_json: bool
    ) -> None:
        self.broker = broker
        self.topic = topic
        self.group = group
        self.positions = positions
        self.isolation = isolation
        self.as_json = as_json
        self.printed = 0
        self.interrupted = False  # Ctrl-C stopped it

    def run(self, count: int | None, idle_limit_ms: int | None) -> int:
        progress = Progress(
            TextColumn("consuming"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=count is None or not err.is_terminal,
            redirect_stdout=sys.stdout.isatty(),  # messages print above the bar; piped output stays on stdout
            redirect_stderr=False,
        )
        last_message = time.monotonic()
        wait_ms = 0
        try:
            with progress:
                task = progress.add_task("consume", total=count)
                while count is None or self.printed < count:
                    got = self.round(count, wait_ms)
                    progress.update(task, completed=self.printed)
                    now = time.monotonic()
                    if got:
                        last_message, wait_ms = now, 0
                        self.commit()
                        continue
                    idle_ms = (now - last_message) * 1000
                    if idle_limit_ms is not None and idle_ms >= idle_limit_ms:
                        break
                    left = IDLE_POLL_MS if idle_limit_ms is None else max(1, int(idle_limit_ms - idle_ms))
                    wait_ms = max(1, min(IDLE_POLL_MS, left) // len(self.positions))
        except KeyboardInterrupt:  # Ctrl-C: commit what was printed and say how much
            self.interrupted = True
        self.commit()
        if not self.as_json:  # stderr; with --json, standard output holds only the messages
            committed = f"; offsets committed for group {self.group}" if self.group else ""
            err.print(f"consumed {self.printed} message(s) from {self.topic}{committed}", highlight=False)
        return self.printed

    def round(self, count: int | None, wait_ms: int) -> int:
        """One fetch per partition; how many messages it printed."""
        got = 0
        for position in self.positions:
            wanted = PAGE if count is None else min(PAGE, count - self.printed)
            if wanted <= 0:
                break
            page = self.fetch(position, wanted, wait_ms)
            for message in page["messages"][:wanted]:
                self.print(message)
                position.offset = message["offset"] + 1
                got += 1
            if len(page["messages"]) <= wanted:  # all of the page was printed: skip markers and aborted records too
                position.offset = max(position.offset, page["next_offset"])
        return got

    def fetch(self, position: Position, wanted: int, wait_ms: int) -> dict[str, Any]:
        try:
            return self.page(position.partition, position.offset, wanted, wait_ms)
        except OffsetOutOfRangeError:
            # Retention moved the log start past our position while we read: go on from the new log start.
            described = self.broker.send(calls.get_topic(self.topic).returning_json())
            log_start = next(p["log_start_offset"] for p in described["partitions"] if p["partition"] == position.partition)
            if log_start <= position.offset:
                raise
            err.print(f"[yellow]partition {position.partition}: offsets {position.offset}-{log_start - 1} were deleted[/yellow]")
            position.offset = log_start
            return self.page(position.partition, log_start, wanted, wait_ms)

    def page(self, partition: int, offset: int, wanted: int, wait_ms: int) -> dict[str, Any]:
        """One fetch, as the broker's JSON (printed as it came with --json)."""
        call = calls.fetch(
            self.topic, partition, offset, max_messages=wanted, max_wait_ms=wait_ms, isolation=self.isolation
        )
        return self.broker.send(call.returning_json())

    def print(self, message: dict[str, Any]) -> None:
        self.printed += 1
        if self.as_json:
            sys.stdout.write(json.dumps(message) + "\n")
            return
        shown = shown_value(message)
        key = "" if message.get("key") is None else f"[cyan]{escape(message['key'])}[/cyan]  "
        headers = f"  [dim]{escape(json.dumps(message['headers']))}[/dim]" if message.get("headers") else ""
        out.print(f"[dim]{message['partition']}:{message['offset']}[/dim]  {key}{escape(shown)}{headers}", highlight=False)

    def commit(self) -> None:
        if self.group is None:
            return
        moved = [p for p in self.positions if p.offset != p.committed]
        if not moved:
            return
        self.broker.send(calls.commit_group_offsets(self.group, {(self.topic, p.partition): p.offset for p in moved}))
        for p in moved:
            p.committed = p.offset
