"""``halfmq principals|tokens|acl``: who may do what, managed over the broker's HTTP API.

These verbs need the admin token (or a principal with ``cluster:alter``; listing needs
``cluster:describe``) in ``--token`` / ``HALFMQ_TOKEN``. A token's secret is printed
once, when it is created: the broker keeps only its hash.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.table import Table

from app.cli.remote import DEFAULT_URL, JsonOption, TokenOption, UrlOption, remote
from sdk import calls

principals_cli = typer.Typer(help="Principals: who a token speaks for.", no_args_is_help=True)
tokens_cli = typer.Typer(help="Bearer tokens of principals (the secret is shown once).", no_args_is_help=True)
acl_cli = typer.Typer(help="ACLs: principal x resource pattern x operations, allow or deny.", no_args_is_help=True)

RESOURCE_TYPES = ("topic", "group", "producer_group", "transactional_id", "cluster")
OPERATIONS = ("read", "write", "describe", "alter")


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    return table


# -- principals -------------------------------------------------------------------------------


@principals_cli.command("create")
def principals_create(
    name: Annotated[str, typer.Argument(help="The principal's name")],
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a principal (then give it a token and ACLs)."""
    with remote(url, token, as_json) as broker:
        created = broker.send(calls.create_principal(name).returning_json())
        broker.show(created, lambda answer: f"principal [bold]{answer['name']}[/bold] created")


@principals_cli.command("list")
def principals_list(url: UrlOption = DEFAULT_URL, token: TokenOption = None, as_json: JsonOption = False) -> None:
    """List the principals."""
    with remote(url, token, as_json) as broker:
        found = broker.send(calls.list_principals().returning_json())
        broker.show(
            found,
            lambda answer: _table(
                "principals", ["name", "created"], [[p["name"], _when(p["created_at"])] for p in answer["principals"]]
            ),
        )


# -- tokens ---------------------------------------------------------------------------------------


@tokens_cli.command("create")
def tokens_create(
    principal: Annotated[str, typer.Argument(help="The principal the token speaks for")],
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a token for a principal; its secret is printed now and never again."""
    with remote(url, token, as_json) as broker:
        created = broker.send(calls.create_token(principal).returning_json())

        def render(answer: Any) -> str:
            return (
                f"token [bold]{answer['token_id']}[/bold] for {answer['principal']} (shown once, keep it):\n"
                f"{answer['token']}\n"
                f"RocketMQ clients: access key {answer['token_id']}, secret key {answer.get('rocketmq_secret_key', '-')}"
            )

        broker.show(created, render)


@tokens_cli.command("list")
def tokens_list(
    principal: Annotated[str | None, typer.Option(help="Only this principal's tokens")] = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List tokens (ids and owners, never secrets)."""
    with remote(url, token, as_json) as broker:
        found = broker.send(calls.list_tokens(principal).returning_json())
        broker.show(
            found,
            lambda answer: _table(
                "tokens",
                ["token id", "principal", "created"],
                [[t["token_id"], t["principal"], _when(t["created_at"])] for t in answer["tokens"]],
            ),
        )


@tokens_cli.command("revoke")
def tokens_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (from `tokens list`)")],
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke a token: refused by every broker process within seconds."""
    with remote(url, token, as_json) as broker:
        broker.send(calls.revoke_token(token_id))
        broker.show({"token_id": token_id, "revoked": True}, lambda _: f"token {token_id} revoked")


# -- ACLs -------------------------------------------------------------------------------------------


@acl_cli.command("add")
def acl_add(
    principal: Annotated[str, typer.Option(help="The principal, or * for every authenticated one")],
    resource_type: Annotated[str, typer.Option("--resource-type", "-r", help=" | ".join(RESOURCE_TYPES))],
    pattern: Annotated[str, typer.Option(help="A name, a prefix (with --prefixed), or * for every name")],
    operation: Annotated[list[str], typer.Option("--operation", "-o", help=" | ".join(OPERATIONS) + " (repeat)")],
    prefixed: Annotated[bool, typer.Option("--prefixed", help="The pattern is a prefix")] = False,
    deny: Annotated[bool, typer.Option("--deny", help="A deny rule (deny wins over allow)")] = False,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add an ACL, e.g. `halfmq acl add --principal app -r topic --pattern orders. --prefixed -o read -o write`."""
    acl = calls.create_acl(principal, resource_type, pattern, operation, prefixed=prefixed, deny=deny)
    with remote(url, token, as_json) as broker:
        created = broker.send(acl.returning_json())
        broker.show(created, lambda answer: _table("ACL", _ACL_COLUMNS, [_acl_row(answer)]))


_ACL_COLUMNS = ["acl id", "principal", "permission", "resource", "pattern", "operations"]


def _acl_row(acl: dict[str, Any]) -> list[str]:
    pattern = acl["pattern"] + ("*" if acl["pattern_type"] == "prefixed" else "")
    operations = ",".join(acl["operations"])
    return [acl["acl_id"], acl["principal"], acl["permission"], acl["resource_type"], pattern, operations]


@acl_cli.command("list")
def acl_list(
    principal: Annotated[str | None, typer.Option(help="Only this principal's ACLs")] = None,
    resource_type: Annotated[str | None, typer.Option("--resource-type", "-r", help="Only this resource type")] = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List ACLs (a prefixed pattern is shown with a trailing *)."""
    with remote(url, token, as_json) as broker:
        found = broker.send(calls.list_acls(principal, resource_type).returning_json())
        broker.show(found, lambda answer: _table("ACLs", _ACL_COLUMNS, [_acl_row(a) for a in answer["acls"]]))


@acl_cli.command("delete")
def acl_delete(
    acl_id: Annotated[str, typer.Argument(help="The ACL's id (from `acl list`)")],
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete an ACL."""
    with remote(url, token, as_json) as broker:
        broker.send(calls.delete_acl(acl_id))
        broker.show({"acl_id": acl_id, "deleted": True}, lambda _: f"ACL {acl_id} deleted")
