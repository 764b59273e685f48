"""The ``halfmq`` command.

Two kinds of verb: the broker's own (``serve``, ``db``, ``bench``, in :mod:`app.cli.server`),
and an operator's client that talks to a running broker over its HTTP API like any other
client (``--url``, ``--token``, ``--json``; see :mod:`app.cli.remote`). The client verbs
format answers; the API decides.
"""

from __future__ import annotations

import typer

from app import __version__
from app.cli import access, consume, groups, half, produce, replicate, rocketmq, server, share, topics, txn

cli = typer.Typer(help="halfmq: a transactional message broker.", no_args_is_help=True)


def _show_version(asked: bool) -> None:
    if asked:
        typer.echo(f"halfmq {__version__}")
        raise typer.Exit()


@cli.callback()
def _options(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.", callback=_show_version, is_eager=True),
) -> None:
    """halfmq: a transactional message broker."""


cli.command()(server.serve)
cli.add_typer(server.db_cli, name="db")
cli.add_typer(access.principals_cli, name="principals")
cli.add_typer(access.tokens_cli, name="tokens")
cli.add_typer(access.acl_cli, name="acl")
cli.add_typer(groups.groups_cli, name="groups")
cli.add_typer(share.share_cli, name="share")
cli.command()(replicate.replicate)
cli.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []})(
    server.bench
)
# The client verbs: an operator's view of a running broker, over its HTTP API.
cli.add_typer(topics.topics_cli, name="topics")
cli.command()(produce.produce)
cli.command()(consume.consume)
cli.add_typer(txn.txn_cli, name="txn")
cli.add_typer(half.half_cli, name="half")
cli.add_typer(rocketmq.rocketmq_cli, name="rocketmq")
cli.add_typer(rocketmq.delayed_cli, name="delayed")


def main() -> None:
    cli()
