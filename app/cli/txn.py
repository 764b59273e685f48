"""``halfmq txn list|describe|abort``: find hanging transactions and end them (Kafka's kafka-transactions.sh)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import RenderableType
from rich.table import Table

from app.cli.formatting import OPEN_TXN_STATES, ago, clock, now_ms, parse_duration_ms, span, styled_state
from app.cli.remote import DEFAULT_URL, JsonOption, TokenOption, UrlOption, remote
from sdk import calls

txn_cli = typer.Typer(help="List, describe and abort Kafka/Pulsar-mode transactions.", no_args_is_help=True)
TxnArgument = Annotated[str, typer.Argument(help="The transaction's txn_id", show_default=False)]


@txn_cli.command("list")
def list_transactions(
    state: Annotated[
        list[str] | None,
        typer.Option("--state", "-s", help="Only this state (OPEN, PREPARE_COMMIT, ..., TIMED_OUT); repeat or comma-separate"),
    ] = None,
    older_than: Annotated[
        str | None, typer.Option("--older-than", help="Only those started at least this long ago (30s, 5m, 2h)")
    ] = None,
    transactional_id: Annotated[str | None, typer.Option("--transactional-id", help="Only this producer's")] = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Transactions, hanging ones first: unfinished, oldest first; then the ended ones, newest first."""
    states = [s.strip().upper() for given in state or [] for s in given.split(",") if s.strip()]
    older_than_ms = parse_duration_ms(older_than) if older_than is not None else None
    with remote(url, token, as_json) as broker:
        found: dict[str, dict[str, Any]] = {}
        # One request per state: the contract's filter takes one state at a time.
        for one_state in states or [""]:
            for txn in broker.send(calls.list_transactions(one_state or None, older_than_ms, transactional_id)):
                found[txn["txn_id"]] = txn
        broker.show({"transactions": hanging_first(list(found.values()))}, transactions_table)


@txn_cli.command("describe")
def describe_transaction(
    txn_id: TxnArgument, url: UrlOption = DEFAULT_URL, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """One transaction: state, producer, timeout, the partitions it wrote to."""
    with remote(url, token, as_json) as broker:
        broker.show(broker.send(calls.get_transaction(txn_id).returning_json()), transaction_view)


@txn_cli.command("abort")
def abort_transaction(
    txn_id: TxnArgument, url: UrlOption = DEFAULT_URL, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """Abort a transaction: its messages are never read_committed and the partitions' LSO moves on.

    Aborting an aborted one again is fine; a committed one answers 409 ALREADY_RESOLVED (exit code 4).
    """
    with remote(url, token, as_json) as broker:
        answer = broker.send(calls.end_transaction(txn_id, "abort").returning_json())
        broker.show(answer, lambda a: f"transaction {a['txn_id']}: {styled_state(a['state'])}")


def is_open(txn: dict[str, Any]) -> bool:
    return txn["state"] in OPEN_TXN_STATES


def hanging_first(transactions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    unfinished = sorted((t for t in transactions if is_open(t)), key=lambda t: t["started_ms"])
    ended = sorted((t for t in transactions if not is_open(t)), key=lambda t: -t["last_state_change_ms"])
    return unfinished + ended


def overdue(txn: dict[str, Any], now: int) -> bool:
    """Unfinished past its timeout: the broker's timeout job should have aborted it already."""
    return is_open(txn) and now - txn["started_ms"] > txn["timeout_ms"]


def partitions_text(partitions: list[dict[str, Any]]) -> str:
    return ", ".join(f"{p['topic']}-{p['partition']}" for p in partitions) or "-"


def transactions_table(answer: dict[str, Any]) -> RenderableType:
    if not answer["transactions"]:
        return "no transactions"
    now = now_ms()
    table = Table(title="transactions (unfinished first, oldest first)", title_justify="left")
    table.add_column("txn_id", overflow="fold")  # whole, to be copied into `halfmq txn abort`
    for heading in ("transactional id", "producer", "state", "age", "timeout", "last change", "partitions"):
        table.add_column(heading, justify="right" if heading in ("age", "timeout") else "left")
    for txn in answer["transactions"]:
        producer = "-" if txn.get("producer_id") is None else f"{txn['producer_id']}/{txn['producer_epoch']}"
        age = span(now - txn["started_ms"])
        table.add_row(
            txn["txn_id"],
            txn.get("transactional_id") or "-",
            producer,
            styled_state(txn["state"]),
            f"[red]{age} overdue[/red]" if overdue(txn, now) else age,
            span(txn["timeout_ms"]),
            ago(txn["last_state_change_ms"], now),
            partitions_text(txn["partitions"]),
        )
    return table


def transaction_view(txn: dict[str, Any]) -> RenderableType:
    table = Table(title="transaction", title_justify="left", show_header=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_row("txn_id", txn["txn_id"])
    table.add_row("state", styled_state(txn["state"]))
    if txn.get("producer_id") is not None:
        table.add_row("producer", f"id {txn['producer_id']}, epoch {txn['producer_epoch']}")
    if txn.get("transactional_id"):
        table.add_row("transactional id", txn["transactional_id"])
    table.add_row("timeout", span(txn["timeout_ms"]))
    if "started_ms" in txn:
        overdue = " [red]overdue[/red]" if is_open(txn) and txn.get("age_ms", 0) > txn["timeout_ms"] else ""
        table.add_row("started", f"{clock(txn['started_ms'])} ({ago(txn['started_ms'])}){overdue}")
    if txn.get("last_state_change_ms") and not is_open(txn):
        table.add_row("ended", ago(txn["last_state_change_ms"]))
    table.add_row("partitions", partitions_text(txn["partitions"]))
    return table
