"""The broker's own verbs: ``serve``, ``db upgrade|current|downgrade`` and ``bench``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console

from app import serving
from half_store.settings import Settings

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

db_cli = typer.Typer(help="Database schema management.", no_args_is_help=True)
console = Console(stderr=True)


def settings_with(**overrides: Any) -> Settings:
    """Environment settings, overridden by the flags that were given."""
    return Settings(**{k: v for k, v in overrides.items() if v is not None})


def serve(
    host: Annotated[str | None, typer.Option(help="Listen address [env HALFMQ_HOST]")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port [env HALFMQ_PORT]")] = None,
    database_url: Annotated[str | None, typer.Option(help="SQLAlchemy URL [env HALFMQ_DATABASE_URL]")] = None,
    log_level: Annotated[str | None, typer.Option(help="uvicorn log level [env HALFMQ_LOG_LEVEL]")] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, help="HTTP front processes sharing the port and one core [env HALFMQ_WORKERS]")
    ] = None,
    access_log: Annotated[
        bool, typer.Option("--access-log", help="Log one JSON line per request on stdout [env HALFMQ_ACCESS_LOG]")
    ] = False,
    ssl_certfile: Annotated[
        str | None, typer.Option(help="TLS certificate (PEM) [env HALFMQ_SSL_CERTFILE]", show_default=False)
    ] = None,
    ssl_keyfile: Annotated[
        str | None, typer.Option(help="TLS private key (PEM) [env HALFMQ_SSL_KEYFILE]", show_default=False)
    ] = None,
) -> None:
    """Run the broker (applies pending migrations first)."""
    import uvicorn

    access_log_flag = True if access_log else None  # without the flag, the environment decides
    settings = settings_with(
        host=host,
        port=port,
        database_url=database_url,
        log_level=log_level,
        access_log=access_log_flag,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
        workers=workers,
    )
    problem = settings.startup_problem()
    if problem is not None:
        console.print(f"[red]error:[/red] {problem}")
        raise typer.Exit(2)
    unusable = serving.database_problem(settings)
    if unusable is not None:
        fail_with(unusable)
    if settings.workers == 1 or settings.core_process:
        code = serving.serve(settings)
        if code:
            raise typer.Exit(code)
        return
    # Without a core process each worker is a whole broker (use with PostgreSQL). Worker processes
    # build their own app from the environment, so hand the flags over that way.
    flags = {"HOST": host, "PORT": port, "DATABASE_URL": database_url, "LOG_LEVEL": log_level}
    flags.update(ACCESS_LOG=access_log_flag, SSL_CERTFILE=ssl_certfile, SSL_KEYFILE=ssl_keyfile)
    for name, value in flags.items():
        if value is not None:
            os.environ[f"HALFMQ_{name}"] = str(value)
    if settings.migrate_on_start:
        migrate(settings.database_url)  # once, here, rather than racing in every worker
        os.environ["HALFMQ_MIGRATE_ON_START"] = "false"
    uvicorn.run("app.main:create_app", factory=True, workers=settings.workers, **serving.uvicorn_options(settings))


@db_cli.command("upgrade")
def db_upgrade(
    database_url: Annotated[str | None, typer.Option(help="SQLAlchemy URL [env HALFMQ_DATABASE_URL]")] = None,
    revision: Annotated[str, typer.Argument(help="Target revision")] = "head",
) -> None:
    """Apply the Alembic migrations to the database."""
    migrate(settings_with(database_url=database_url).database_url, revision)
    console.print(f"[green]database at {revision}[/green]")


@db_cli.command("current")
def db_current(
    database_url: Annotated[str | None, typer.Option(help="SQLAlchemy URL [env HALFMQ_DATABASE_URL]")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """The database's schema revision, and whether it is the newest this broker knows (exit code 1 if not)."""
    from half_store.storage.migrate import revisions

    with database_of(settings_with(database_url=database_url).database_url, must_exist=True) as engine:
        found = revisions(engine)
    if as_json:
        sys.stdout.write(json.dumps({"current": found.current, "head": found.head, "at_head": found.at_head}) + "\n")
    elif found.at_head:
        Console().print(f"{found.current} [green](head)[/green]", highlight=False)
    else:
        behind = "no schema yet" if found.current is None else f"{found.current}"
        Console().print(f"{behind} [yellow](head is {found.head}; halfmq db upgrade)[/yellow]", highlight=False)
    if not found.at_head:
        raise typer.Exit(1)


@db_cli.command("downgrade")
def db_downgrade(
    revision: Annotated[str, typer.Argument(help="Target revision (such as 0001), -1 for one step, or base", show_default=False)],
    yes: Annotated[bool, typer.Option("--yes", help="Really downgrade: the tables of later revisions are dropped")] = False,
    database_url: Annotated[str | None, typer.Option(help="SQLAlchemy URL [env HALFMQ_DATABASE_URL]")] = None,
) -> None:
    """Take the schema back to REVISION, dropping what later revisions added (and its data). Needs --yes.

    Stop the brokers first: a broker migrates its database up again when it starts.
    """
    from alembic.util import CommandError

    from half_store.storage.migrate import downgrade, revisions

    with database_of(settings_with(database_url=database_url).database_url, must_exist=True) as engine:
        before = revisions(engine).current
        if before is None:  # an empty database (or one taken back to base): there is nothing to undo
            console.print("[red]error:[/red] the database has no schema, so there is nothing to downgrade", highlight=False)
            raise typer.Exit(1)
        if not yes:
            console.print(
                f"[red]error:[/red] this takes the database from {before} back to {revision} and drops what the "
                "revisions in between added, with its data; run again with --yes"
            )
            raise typer.Exit(2)
        try:
            downgrade(engine, revision)
        except CommandError as error:
            console.print(f"[red]error:[/red] {error}")
            raise typer.Exit(1) from None
        after = revisions(engine).current
    console.print(f"[green]database downgraded from {before} to {after or 'base (no schema)'}[/green]")


def fail_with(unusable: serving.DatabaseUnusable) -> NoReturn:
    console.print(f"[red]error:[/red] {unusable.message}", highlight=False, soft_wrap=True)
    raise typer.Exit(unusable.exit_code)


@contextmanager
def database_of(database_url: str, *, must_exist: bool = False) -> Iterator[Engine]:
    """The database's writer engine; one that cannot be used is one line and an exit code, not a traceback."""
    from sqlalchemy.exc import DBAPIError

    try:
        database = serving.open_usable_database(database_url, must_exist=must_exist)
    except serving.DatabaseUnusable as unusable:
        fail_with(unusable)
    try:
        yield database.writer
    except DBAPIError as error:  # it went away after the first connection
        fail_with(serving.DatabaseUnusable(f"the database stopped answering: {serving.one_line(error.orig or error)}", 6))
    finally:
        database.dispose()


def migrate(database_url: str, revision: str = "head") -> None:
    from alembic.util import CommandError

    from half_store.storage.migrate import upgrade

    with database_of(database_url) as engine:
        try:
            upgrade(engine, revision)
        except CommandError as error:  # an unknown revision
            console.print(f"[red]error:[/red] {error}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None


def bench(ctx: typer.Context) -> None:
    """Run the benchmarks (same as `python -m bench`; `halfmq bench --help` for its options)."""
    # A process of its own: the benchmarks drive the broker from outside, and import it.
    raise typer.Exit(subprocess.call([sys.executable, "-m", "bench", *ctx.args]))
