"""``halfmq share``: share groups (queue consumption), as an operator sees them through the HTTP API."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from app.cli.remote import DEFAULT_URL, JsonOption, TokenOption, UrlOption, confirmed, remote
from sdk import calls

share_cli = typer.Typer(help="Share groups: queue consumption with per-message acknowledgements.", no_args_is_help=True)

COLUMNS = ("available", "locked", "accepted", "dlq")


@share_cli.command("list")
def list_share_groups(url: UrlOption = DEFAULT_URL, token: TokenOption = None, as_json: JsonOption = False) -> None:
    """Every share group that has received from a topic: its topics, locked records, accepted and dead-lettered."""

    def render(answer: dict[str, Any]) -> Table | str:
        if not answer["share_groups"]:
            return "no share groups"
        table = Table("share group", "topics", title="share groups", title_justify="left")
        for column in ("locked", "accepted", "dlq"):
            table.add_column(column, justify="right")
        for group in answer["share_groups"]:
            table.add_row(group["group"], ", ".join(group["topics"]), *(str(group[c]) for c in ("locked", "accepted", "dlq")))
        return table

    with remote(url, token, as_json) as broker:
        broker.show(broker.send(calls.list_share_groups().returning_json()), render)


@share_cli.command("delete")
def delete(
    group: Annotated[str, typer.Argument(help="The share group")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask; needed when not at a terminal")] = False,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Forget GROUP's positions and in-flight records (409 SHARE_GROUP_IN_USE, exit 4, while records are locked).

    Receiving with the group again starts from the beginning of each partition; DLQ.GROUP stays.
    """
    confirmed(yes, f"Delete share group {group}? It starts from the beginning if used again.", f"deleting share group {group}")
    with remote(url, token, as_json) as broker:
        broker.send(calls.delete_share_group(group))
        broker.show({"deleted": group}, lambda a: f"deleted share group [bold]{a['deleted']}[/bold]")


@share_cli.command("describe")
def describe(
    group: Annotated[str, typer.Argument(help="The share group")],
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Per topic of GROUP: messages available, locked, accepted and dead-lettered (in DLQ.GROUP)."""
    with remote(url, token, as_json) as broker:
        broker.show(broker.send(calls.describe_share_group(group).returning_json()), render_group)


def render_group(answer: dict[str, Any]) -> Table:
    table = Table(title=f"share group {answer['group']}", title_justify="left")
    table.add_column("topic")
    table.add_column("partition", justify="right")
    table.add_column("start", justify="right")
    table.add_column("end", justify="right")
    for column in COLUMNS:
        table.add_column(column, justify="right")
    for topic in answer["topics"]:
        table.add_row(topic["topic"], "all", "", "", *(str(topic[c]) for c in COLUMNS), style="bold")
        for part in topic.get("partitions", []):
            table.add_row(
                "", str(part["partition"]), str(part["start_offset"]), str(part["end_offset"]),
                *(str(part[c]) for c in COLUMNS),
            )
    return table
