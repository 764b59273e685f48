"""The ``halfmq`` command: ``serve`` and ``db upgrade``."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from app.settings import Settings

cli = typer.Typer(help="halfmq: a transactional message broker.", no_args_is_help=True)
db_cli = typer.Typer(help="Database schema management.", no_args_is_help=True)
cli.add_typer(db_cli, name="db")
console = Console(stderr=True)


def settings_with(**overrides: Any) -> Settings:
    """Environment settings, overridden by the flags that were given."""
    return Settings(**{k: v for k, v in overrides.items() if v is not None})


@cli.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Listen address [env HALFMQ_HOST]")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port [env HALFMQ_PORT]")] = None,
    database_url: Annotated[str | None, typer.Option(help="SQLAlchemy URL [env HALFMQ_DATABASE_URL]")] = None,
    log_level: Annotated[str | None, typer.Option(help="uvicorn log level [env HALFMQ_LOG_LEVEL]")] = None,
) -> None:
    """Run the broker (applies pending migrations first)."""
    import uvicorn

    from app.main import create_app

    settings = settings_with(host=host, port=port, database_url=database_url, log_level=log_level)
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        loop="auto",
        http="auto",
        access_log=False,
        timeout_graceful_shutdown=10,
    )


@db_cli.command("upgrade")
def db_upgrade(
    database_url: Annotated[str | None, typer.Option(help="SQLAlchemy URL [env HALFMQ_DATABASE_URL]")] = None,
    revision: Annotated[str, typer.Argument(help="Target revision")] = "head",
) -> None:
    """Apply the Alembic migrations to the database."""
    from app.storage.database import open_database
    from app.storage.migrate import upgrade

    settings = settings_with(database_url=database_url)
    database = open_database(settings.database_url)
    try:
        upgrade(database.writer, revision)
    finally:
        database.dispose()
    console.print(f"[green]database at {revision}[/green]")


def main() -> None:
    cli()
