"""``halfmq topics list|create|describe|alter|delete``: topics as the admin API shows them."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.table import Table

from app.cli.formatting import parse_duration_ms, parse_size_bytes, size, span
from app.cli.remote import DEFAULT_URL, JsonOption, TokenOption, UrlOption, confirmed, fail, remote
from sdk import calls
from sdk.calls import TopicChanges

topics_cli = typer.Typer(help="List, create, describe, alter and delete topics.", no_args_is_help=True)
TopicArgument = Annotated[str, typer.Argument(help="The topic's name", show_default=False)]

# What the retention flags take besides a number: back to the broker's default, or no limit.
DEFAULT_WORDS = ("default",)
UNLIMITED_WORDS = ("-1", "forever", "unlimited", "none")


@topics_cli.command("list")
def list_topics(
    include_system: Annotated[bool, typer.Option("--include-system", help="Also list the broker's own topics")] = False,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """The topics and their partition counts."""
    with remote(url, token, as_json) as broker:
        answer = broker.send(calls.list_topics(include_system).returning_json())
        broker.show(answer, topics_table)


@topics_cli.command("create")
def create_topic(
    name: TopicArgument,
    partitions: Annotated[int, typer.Option("--partitions", "-p", min=1, help="How many partitions")] = 1,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a topic (409 TOPIC_EXISTS, exit code 4, if it exists)."""
    with remote(url, token, as_json) as broker:
        answer = broker.send(calls.create_topic(name, partitions).returning_json())
        broker.show(answer, lambda a: f"created topic [bold]{a['name']}[/bold] with {a['partitions']} partition(s)")


@topics_cli.command("describe")
def describe_topic(
    name: TopicArgument, url: UrlOption = DEFAULT_URL, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """Partitions (log start, last stable offset, high watermark, the transaction holding the LSO back) and config."""
    with remote(url, token, as_json) as broker:
        broker.show(broker.send(calls.get_topic(name).returning_json()), topic_view)


@topics_cli.command("alter")
def alter_topic(
    name: TopicArgument,
    partitions: Annotated[int | None, typer.Option("--partitions", "-p", min=1, help="The new, larger partition count")] = None,
    retention_ms: Annotated[
        str | None,
        typer.Option(help="Keep messages this long: 7d, 12h, 3600000; -1 or forever: no limit; default: the broker's"),
    ] = None,
    retention_bytes: Annotated[
        str | None,
        typer.Option(help="Keep at most this much per partition: 1GiB, 500MiB; -1 or unlimited; default: the broker's"),
    ] = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add partitions or change retention; the answer is the topic's new description."""
    changes: TopicChanges = {}
    if partitions is not None:
        changes["partitions"] = partitions
    if retention_ms is not None:
        changes["retention_ms"] = retention_value(retention_ms, parse_duration_ms)
    if retention_bytes is not None:
        changes["retention_bytes"] = retention_value(retention_bytes, parse_size_bytes)
    if not changes:
        fail("nothing to change: give --partitions, --retention-ms or --retention-bytes", 2)
    with remote(url, token, as_json) as broker:
        answer = broker.send(calls.alter_topic(name, **changes).returning_json())
        broker.show(answer, topic_view)


@topics_cli.command("delete")
def delete_topic(
    name: TopicArgument,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask; needed when not at a terminal")] = False,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete a topic and its messages (409 TOPIC_IN_USE while a transaction or half message targets it)."""
    confirmed(yes, f"Delete topic {name} and all its messages?", f"deleting topic {name} and all its messages")
    with remote(url, token, as_json) as broker:
        broker.send(calls.delete_topic(name))
        broker.show({"deleted": name}, lambda a: f"deleted topic [bold]{a['deleted']}[/bold]")


def retention_value(given: str, parse: Any) -> int | None:
    """A retention flag's value for the API: None (null) means the broker's default, -1 no limit."""
    word = given.strip().lower()
    if word in DEFAULT_WORDS:
        return None
    if word in UNLIMITED_WORDS:
        return -1
    return int(parse(given))


def topics_table(answer: dict[str, Any]) -> RenderableType:
    table = Table(title="topics", title_justify="left")
    table.add_column("topic")
    table.add_column("partitions", justify="right")
    for topic in answer["topics"]:
        table.add_row(topic["name"], str(topic["partitions"]))
    if not answer["topics"]:
        return "no topics"
    return table


def topic_view(answer: dict[str, Any]) -> RenderableType:
    table = Table(title=f"topic {answer['name']}", title_justify="left")
    for heading in ("partition", "log start", "last stable", "high watermark", "messages"):
        table.add_column(heading, justify="right")
    table.add_column("blocking transaction", overflow="fold")
    for p in answer["partitions"]:
        blocking = p.get("blocking_txn_id")
        held_back = p["last_stable_offset"] < p["high_watermark"]  # an open transaction holds read_committed readers
        table.add_row(
            str(p["partition"]),
            str(p["log_start_offset"]),
            f"[yellow]{p['last_stable_offset']}[/yellow]" if held_back else str(p["last_stable_offset"]),
            str(p["high_watermark"]),
            str(p["high_watermark"] - p["log_start_offset"]),
            "-" if blocking is None else f"[yellow]{blocking}[/yellow]",
        )
    config = answer.get("config")
    if config is None:  # a broker without the admin API describes no config
        return table
    return Group(table, config_lines(config))


def config_lines(config: dict[str, Any]) -> str:
    def retention(key: str, show: Any) -> str:
        own, effective = config.get(key), config.get(f"effective_{key}", config.get(key))
        shown = "no limit" if effective is None or effective < 0 else show(effective)
        return f"{shown} ({'set on the topic' if own is not None else 'broker default'})"

    return (
        f"retention by time: {retention('retention_ms', span)}\n"
        f"retention by size: {retention('retention_bytes', size)} per partition"
    )
