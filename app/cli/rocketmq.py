"""``halfmq rocketmq sessions`` and ``halfmq delayed list``: RocketMQ clients and waiting delay messages."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from app.cli.formatting import ago, clock
from app.cli.remote import DEFAULT_URL, JsonOption, TokenOption, UrlOption, remote
from sdk import calls

rocketmq_cli = typer.Typer(help="RocketMQ 5 clients connected over the gRPC protocol.", no_args_is_help=True)
delayed_cli = typer.Typer(help="Delay messages waiting for their time.", no_args_is_help=True)


@rocketmq_cli.command("sessions")
def sessions(url: UrlOption = DEFAULT_URL, token: TokenOption = None, as_json: JsonOption = False) -> None:
    """The RocketMQ clients of every broker process: producers and the topics they publish, consumers and their groups."""
    with remote(url, token, as_json) as broker:
        broker.show(broker.send(calls.rocketmq_sessions().returning_json()), render_sessions)


def render_sessions(answer: dict[str, Any]) -> Table:
    brokers = ", ".join(b["advertised_address"] for b in answer["brokers"]) or "none"
    table = Table(title=f"RocketMQ sessions (listeners: {brokers})", title_justify="left")
    for column in ("client", "kind", "client version", "principal", "topics / group", "broker", "stream", "seen"):
        table.add_column(column)
    for session in answer["sessions"]:
        if session["topics"]:
            what = ", ".join(session["topics"])
        else:
            subscriptions = " ".join(f"{s['topic']}({s['expression']})" for s in session["subscriptions"])
            what = f"{session['group'] or ''} {subscriptions}".strip()
        table.add_row(
            session["client_id"], session["client_type"], f"{session['language']} {session['version']}".strip(),
            session["principal"], what, session["broker"], "open" if session["streaming"] else "-",
            ago(session["last_seen_ms"]),
        )
    return table


@delayed_cli.command("list")
def delayed_list(
    topic: Annotated[str | None, typer.Option(help="Only this topic's")] = None,
    limit: Annotated[int, typer.Option(help="At most this many, soonest first")] = 100,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delay messages still waiting, soonest first."""
    with remote(url, token, as_json) as broker:
        broker.show(broker.send(calls.list_delayed_messages(topic, limit).returning_json()), render_delayed)


def render_delayed(answer: dict[str, Any]) -> Table:
    table = Table(title="delay messages waiting", title_justify="left")
    for column in ("message id", "topic", "partition", "deliver at", "scheduled"):
        table.add_column(column)
    for message in answer["delayed_messages"]:
        table.add_row(
            message["message_id"], message["topic"], str(message["partition"]), clock(message["deliver_at"]),
            ago(message["created_at"]),
        )
    return table
