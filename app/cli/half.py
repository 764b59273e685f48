"""``halfmq half list|describe|commit|rollback|recheck``: RocketMQ-style half messages, by hand."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table

from app.cli.formatting import ago, clock, shown_value, styled_state
from app.cli.remote import DEFAULT_URL, JsonOption, TokenOption, UrlOption, remote
from sdk import calls
from sdk.calls import Call

half_cli = typer.Typer(help="List, describe and resolve half messages.", no_args_is_help=True)
VALUE_COLUMN = 60  # characters of a value in the list's table; describe shows it whole
MessageArgument = Annotated[str, typer.Argument(help="The half message's message_id", show_default=False)]


class HalfState(StrEnum):
    PREPARED = "PREPARED"
    COMMITTED = "COMMITTED"
    ROLLED_BACK = "ROLLED_BACK"
    DISCARDED = "DISCARDED"


@half_cli.command("list")
def list_half_messages(
    group: Annotated[str | None, typer.Option("--group", "-g", help="Only this producer group's")] = None,
    state: Annotated[HalfState | None, typer.Option("--state", "-s", help="Only those in this state")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="At most this many")] = 1000,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Half messages, with their state and how often the checker asked about them."""
    with remote(url, token, as_json) as broker:
        found = calls.list_half_messages(group, state.value if state else None, limit)
        broker.show(broker.send(found.returning_json()), half_table)


@half_cli.command("describe")
def describe_half_message(
    message_id: MessageArgument, url: UrlOption = DEFAULT_URL, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """One half message and its check history: when the checker asked, whom, and what came back."""
    with remote(url, token, as_json) as broker:
        broker.show(broker.send(calls.get_half_message(message_id).returning_json()), half_view)


@half_cli.command("commit")
def commit_half_message(
    message_id: MessageArgument, url: UrlOption = DEFAULT_URL, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """Commit: the message goes to its topic (409 ALREADY_RESOLVED, exit code 4, if it was rolled back or discarded)."""
    resolve(calls.end_half_message(message_id, "commit"), url, token, as_json)


@half_cli.command("rollback")
def rollback_half_message(
    message_id: MessageArgument, url: UrlOption = DEFAULT_URL, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """Roll back: the message is never delivered (409 ALREADY_RESOLVED if it was committed)."""
    resolve(calls.end_half_message(message_id, "rollback"), url, token, as_json)


@half_cli.command("recheck")
def recheck_half_message(
    message_id: MessageArgument, url: UrlOption = DEFAULT_URL, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """Give a DISCARDED message back to the checker: PREPARED again with check_times 0 (409 from any other state)."""
    resolve(calls.recheck_half_message(message_id), url, token, as_json)


def resolve(call: Call[Any], url: str, token: str | None, as_json: bool) -> None:
    with remote(url, token, as_json) as broker:
        broker.show(broker.send(call.returning_json()), resolved_line)


def resolved_line(answer: dict[str, Any]) -> str:
    where = ""
    if answer.get("offset") is not None:  # a commit says where the message went
        where = f" to {answer['topic']}-{answer['partition']} at offset {answer['offset']}"
    return f"half message {answer['message_id']}: {styled_state(answer['state'])}{where}"


def half_table(answer: dict[str, Any]) -> RenderableType:
    if not answer["half_messages"]:
        return "no half messages"
    table = Table(title="half messages", title_justify="left")
    table.add_column("message_id", overflow="fold")  # whole, to be copied into the next command
    for heading in ("producer group", "topic", "state", "checks", "born", "resolved by", "key"):
        table.add_column(heading, justify="right" if heading == "checks" else "left")
    table.add_column("value", overflow="ellipsis", no_wrap=True)
    for half in answer["half_messages"]:
        table.add_row(
            half["message_id"],
            half["producer_group"],
            half["topic"],
            styled_state(half["state"]),
            str(half["check_times"]),
            ago(half["born_timestamp"]),
            half.get("resolved_by") or "-",
            escape(half.get("key") or "-"),
            escape(shown_value(half, VALUE_COLUMN)),
        )
    return table


def half_view(half: dict[str, Any]) -> RenderableType:
    fields = Table(title="half message", title_justify="left", show_header=False)
    fields.add_column("field", style="bold", no_wrap=True)
    fields.add_column("value", overflow="fold")
    fields.add_row("message_id", half["message_id"])
    fields.add_row("state", styled_state(half["state"]))
    fields.add_row("transaction id", half["transaction_id"])
    fields.add_row("producer group", half["producer_group"])
    target = f"{half['topic']}-{half['partition']}" if half.get("partition") is not None else half["topic"]
    if half.get("offset") is not None:
        target += f" at offset {half['offset']}"
    fields.add_row("topic", target)
    fields.add_row("born", f"{clock(half['born_timestamp'])} ({ago(half['born_timestamp'])})")
    fields.add_row("checks", str(half["check_times"]))
    if half.get("resolved_by"):
        fields.add_row("resolved", f"by {half['resolved_by']}, {ago(half.get('resolved_at'))}")
    if half.get("body_hidden") or "headers" in half:  # what an operator decides on: the message itself
        fields.add_row("key", escape(str(half.get("key") or "-")))
        fields.add_row("headers", escape(json.dumps(half.get("headers") or {})))
        fields.add_row("value", escape(shown_value(half)))
    checks = half.get("checks")
    if checks is None:  # a broker without check history
        return fields
    if not checks:
        return Group(fields, "no back-checks yet")
    history = Table(title="check history (oldest first)", title_justify="left")
    for heading in ("at", "instance", "answer", "latency"):
        history.add_column(heading, justify="right" if heading == "latency" else "left")
    for check in checks:
        answer = check.get("answer") or "awaited"
        style = "green" if answer in ("COMMIT", "ROLLBACK") else "yellow" if answer == "UNKNOWN" else "red"
        latency = "-" if check.get("latency_ms") is None else f"{check['latency_ms']} ms"
        history.add_row(clock(check["at_ms"]), check.get("instance_id") or "-", f"[{style}]{answer}[/{style}]", latency)
    return Group(fields, history)
