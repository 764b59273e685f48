"""``halfmq produce``: one message from the command line, or a file of JSON lines in batches."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from app.cli.remote import DEFAULT_URL, JsonOption, Remote, TokenOption, UrlOption, err, fail, remote
from sdk import calls
from sdk.errors import HalfmqError

MESSAGE_FIELDS = {"key", "value", "value_base64", "headers", "partition"}


@dataclass
class Produced:
    """What went where: per partition, the first and last offset written and how many."""

    topic: str
    count: int = 0
    partitions: dict[int, list[int]] = field(default_factory=dict)  # partition -> [first, last, count]

    def add(self, offsets: list[dict[str, int]]) -> None:
        for written in offsets:
            span = self.partitions.setdefault(written["partition"], [written["offset"], written["offset"], 0])
            span[0], span[1], span[2] = min(span[0], written["offset"]), max(span[1], written["offset"]), span[2] + 1
        self.count += len(offsets)

    def json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "produced": self.count,
            "partitions": [
                {"partition": p, "first_offset": first, "last_offset": last, "count": count}
                for p, (first, last, count) in sorted(self.partitions.items())
            ],
        }


def produce(
    topic: Annotated[str, typer.Argument(help="The topic to write to", show_default=False)],
    value: Annotated[
        str | None, typer.Argument(help="The message's value (a string; JSON with --json-value)", show_default=False)
    ] = None,
    key: Annotated[str | None, typer.Option("--key", "-k", help="The message's key (picks the partition)")] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", "-H", help="A header NAME=VALUE; repeat for more")
    ] = None,
    partition: Annotated[int | None, typer.Option("--partition", "-p", min=0, help="Write to this partition")] = None,
    json_value: Annotated[bool, typer.Option("--json-value", help="Parse VALUE as JSON instead of sending a string")] = False,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file",
            "-f",
            help="JSON lines to send ('-': standard input): each line a message "
            '{"key"?, "value" | "value_base64", "headers"?, "partition"?}, or with --values any JSON value',
            show_default=False,
        ),
    ] = None,
    values: Annotated[bool, typer.Option("--values", help="Each line of --file is a value, not a message object")] = False,
    batch_size: Annotated[int, typer.Option(min=1, max=10_000, help="Messages per request with --file")] = 500,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write messages to a topic: VALUE, or every line of --file (a progress bar shows how far it got)."""
    if (value is None) == (file is None):
        fail("give a VALUE or --file, not both and not neither", 2)
    produced = Produced(topic)
    with remote(url, token, as_json) as broker:
        if file is not None:
            produce_file(broker, produced, file, values=values, batch_size=batch_size)
        else:
            assert value is not None
            message = one_message(value, key, header or [], partition, json_value=json_value)
            send(broker, produced, [message])
        broker.show(produced.json(), produced_table)


def one_message(value: str, key: str | None, headers: list[str], partition: int | None, *, json_value: bool) -> dict[str, Any]:
    message: dict[str, Any] = {"key": key, "value": value, "headers": parse_headers(headers)}
    if json_value:
        try:
            message["value"] = json.loads(value)
        except ValueError as error:
            fail(f"--json-value: VALUE is not JSON ({error})", 2)
    if partition is not None:
        message["partition"] = partition
    return message


def parse_headers(given: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for item in given:
        name, equals, header_value = item.partition("=")
        if not equals or not name:
            fail(f"--header {item!r}: write it as NAME=VALUE", 2)
        headers[name] = header_value
    return headers


def produce_file(broker: Remote, produced: Produced, file: Path, *, values: bool, batch_size: int) -> None:
    total = None if str(file) == "-" else count_lines(file)
    progress = Progress(
        TextColumn("producing"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    with progress, lines_of(file) as lines:
        task = progress.add_task("produce", total=total)
        batch: list[dict[str, Any]] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            batch.append(line_message(line, number, values=values, produced=produced))
            if len(batch) == batch_size:
                send(broker, produced, batch)
                progress.update(task, completed=produced.count)
                batch = []
        if batch:
            send(broker, produced, batch)
        progress.update(task, completed=total or produced.count)


def line_message(line: str, number: int, *, values: bool, produced: Produced) -> dict[str, Any]:
    """The message one line stands for; a bad line stops the run, saying what was written before it."""
    written = f"{produced.count} message(s) were produced before it" if produced.count else "nothing was produced"
    try:
        parsed = json.loads(line)
    except ValueError as error:
        fail(f"line {number} is not JSON ({error}); {written}", 1)
    if values:
        return {"value": parsed}
    if not isinstance(parsed, dict) or not ({"value", "value_base64"} & parsed.keys()) or parsed.keys() - MESSAGE_FIELDS:
        fail(
            f'line {number} is not a message {{"key"?, "value" | "value_base64", "headers"?, "partition"?}} '
            f"(use --values to send each line as a value); {written}",
            1,
        )
    return parsed


def send(broker: Remote, produced: Produced, messages: list[dict[str, Any]]) -> None:
    # Not resent after it may have reached the broker: a plain produce is not idempotent (the SDK's call says so).
    try:
        answer = broker.send(calls.produce(produced.topic, messages).returning_json())
    except HalfmqError as error:
        if produced.count:  # a refusal part-way through a file: say what was written before it
            raise type(error)(
                f"{error.message}; {produced.count} message(s) were produced before this batch",
                code=error.code,
                status=error.status,
            ) from error
        raise
    produced.add(answer["offsets"])


def count_lines(file: Path) -> int:
    try:
        with file.open("rb") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError as error:
        fail(f"cannot read {file}: {error.strerror}", 2)


@contextmanager
def lines_of(file: Path) -> Iterator[Iterable[str]]:
    """The lines of ``file``, or of standard input for ``-``."""
    if str(file) == "-":
        yield sys.stdin
        return
    try:
        handle = file.open(encoding="utf-8")
    except OSError as error:
        fail(f"cannot read {file}: {error.strerror}", 2)
    with handle:
        yield handle


def produced_table(answer: dict[str, Any]) -> Table:
    table = Table(title=f"produced {answer['produced']} message(s) to {answer['topic']}", title_justify="left")
    for heading in ("partition", "first offset", "last offset", "messages"):
        table.add_column(heading, justify="right")
    for p in answer["partitions"]:
        table.add_row(str(p["partition"]), str(p["first_offset"]), str(p["last_offset"]), str(p["count"]))
    return table
