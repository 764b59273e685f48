"""``halfmq groups list|describe|reset-offsets``: consumer groups, through the broker's HTTP API.

The verbs only format; the broker decides. ``reset-offsets`` checks that the group has no
live members first, to say so plainly, but the broker refuses the commit anyway
(409 ``FENCED_MEMBER_EPOCH``) if a member joins in between.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from app.cli.formatting import TIME_FORMATS, parse_time_ms
from app.cli.remote import (
    DEFAULT_URL,
    EXIT_CONFLICT,
    EXIT_REFUSED,
    JsonOption,
    Remote,
    TokenOption,
    UrlOption,
    fail,
    remote,
)
from sdk import calls
from sdk.errors import GroupNotFoundError

groups_cli = typer.Typer(help="Consumer groups: members, assignments, committed offsets and lag.", no_args_is_help=True)
GroupArgument = Annotated[str, typer.Argument(help="The consumer group")]


def _partitions(partitions: list[dict[str, Any]]) -> str:
    return ", ".join(f"{p['topic']}/{p['partition']}" for p in partitions) or "-"


@groups_cli.command("list")
def list_groups(url: UrlOption = DEFAULT_URL, token: TokenOption = None, as_json: JsonOption = False) -> None:
    """Every consumer group with its state, live members and lag (committed records still to read)."""

    def render(answer: dict[str, Any]) -> Table:
        table = Table("group", "state", "members")
        table.add_column("lag", justify="right")
        for group in answer["groups"]:
            lag = group.get("lag")  # an older broker does not send it
            shown = "-" if lag is None else f"[yellow]{lag:,}[/yellow]" if lag else "0"
            table.add_row(group["group"], group["state"], str(group["members"]), shown)
        return table

    with remote(url, token, as_json) as broker:
        broker.show(broker.send(calls.list_groups().returning_json()), render)


@groups_cli.command("describe")
def describe(
    group: GroupArgument, url: UrlOption = DEFAULT_URL, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """A group's members (epoch, assignment, partitions being given up, last heartbeat) and offsets with lag."""

    def render(answer: dict[str, Any]) -> Table:
        table = Table(title=f"{answer['group']}: {answer['state']} (group epoch {answer['group_epoch']})")
        for column in ("member", "epoch", "state", "assignment", "revoking", "last heartbeat (ms)"):
            table.add_column(column)
        for m in answer["members"]:
            table.add_row(
                m["member_id"], str(m["member_epoch"]), m["state"], _partitions(m["assignment"]),
                _partitions(m["revoking"]), str(m["last_heartbeat_ms"]),
            )
        offsets = Table("topic", "partition", "offset", "lag", title="committed offsets")
        for o in answer["offsets"]:
            offsets.add_row(o["topic"], str(o["partition"]), str(o["offset"]), str(o["lag"]))
        grid = Table.grid()
        grid.add_row(table)
        grid.add_row(offsets)
        return grid

    with remote(url, token, as_json) as broker:
        broker.show(broker.send(calls.describe_group(group).returning_json()), render)


def _live_members(broker: Remote, group: str) -> int:
    try:
        answer = broker.send(calls.describe_group(group).returning_json())
    except GroupNotFoundError:
        return 0
    return len(answer["members"])


@groups_cli.command("reset-offsets")
def reset_offsets(
    group: GroupArgument,
    topic: Annotated[str, typer.Option("--topic", help="The topic whose offsets to reset")],
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="To each partition's log start offset")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="To each partition's high watermark")] = False,
    to_offset: Annotated[
        int | None, typer.Option("--to-offset", min=0, help="To this offset (kept within each partition's range)")
    ] = None,
    to_datetime: Annotated[
        str | None,
        typer.Option(
            "--to-datetime",
            help=f"To the first message written at or after this time ({TIME_FORMATS})",
        ),
    ] = None,
    partition: Annotated[
        list[int] | None, typer.Option("--partition", help="Only this partition (repeatable); default all")
    ] = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Move a group's committed offsets on a topic; refused while the group has live members."""
    if sum((to_earliest, to_latest, to_offset is not None, to_datetime is not None)) != 1:
        fail("give exactly one of --to-earliest, --to-latest, --to-offset N and --to-datetime TIME", EXIT_REFUSED)
    at_time = parse_time_ms(to_datetime) if to_datetime is not None else None
    with remote(url, token, as_json) as broker:
        members = _live_members(broker, group)
        if members:
            fail(f"group {group!r} has {members} live member(s); stop its consumers first", EXIT_CONFLICT)
        described = broker.send(calls.get_topic(topic).returning_json())
        chosen = [p for p in described["partitions"] if partition is None or p["partition"] in partition]
        if partition is not None and len(chosen) != len(set(partition)):
            known = sorted(p["partition"] for p in described["partitions"])
            fail(f"topic {topic!r} has partitions {known}, not all of {sorted(set(partition))}", EXIT_REFUSED)
        by_time = broker.send(calls.offsets_for_time(topic, at_time)) if at_time is not None else {}
        offsets = []
        for p in chosen:
            if at_time is not None:
                target = by_time[p["partition"]]
            elif to_earliest:
                target = p["log_start_offset"]
            elif to_latest:
                target = p["high_watermark"]
            else:
                assert to_offset is not None
                target = min(max(to_offset, p["log_start_offset"]), p["high_watermark"])
            offsets.append({"topic": topic, "partition": p["partition"], "offset": target})
        broker.send(calls.commit_group_offsets(group, {(o["topic"], o["partition"]): o["offset"] for o in offsets}))

        def render(answer: dict[str, Any]) -> Table:
            table = Table("topic", "partition", "new offset", title=f"{group}: offsets reset")
            for o in answer["offsets"]:
                table.add_row(o["topic"], str(o["partition"]), str(o["offset"]))
            return table

        broker.show({"group": group, "offsets": offsets}, render)
