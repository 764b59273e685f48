"""Running the broker: one HTTP front, which starts its core process, or several sharing one.

``halfmq serve`` and a bare ``python -m app`` both come here. The bare form does not
import the CLI (typer, rich, the operator verbs' HTTP client): the front is 8 MB
smaller without them, and a broker process has no use for them.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Any

from half_store.settings import Settings

if TYPE_CHECKING:
    from half_store.storage.database import Database

# Exit codes of a database that cannot be used (docs/cli.md#exit-codes).
EXIT_USAGE = 2  # the URL is not one SQLAlchemy can use: the setting is wrong
EXIT_NOT_FOUND = 3  # an SQLite file that is not there, where a verb must not create it
EXIT_UNAVAILABLE = 6  # the database does not answer


class DatabaseUnusable(Exception):
    """A database URL that cannot be used, said in one line, with the exit code it earns."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def open_usable_database(url: str, *, must_exist: bool = False) -> Database:
    """The database behind ``url``, connected to once; :class:`DatabaseUnusable` if it cannot be.

    ``serve`` and the ``db`` verbs come here first, so an unreachable PostgreSQL or a
    misspelt URL is one line naming the database (its password hidden) and why, instead
    of the tracebacks of a core process that died starting. With ``must_exist`` an SQLite
    file that is not there is reported rather than created (``db current`` in the wrong
    folder must not leave an empty ``halfmq.db`` behind).
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

    from half_store.storage.database import open_database

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise DatabaseUnusable(
            f"{url!r} is not a database URL (such as sqlite:///./halfmq.db or postgresql+psycopg://user@host/db)", EXIT_USAGE
        ) from None
    shown = parsed.render_as_string(hide_password=True)
    path = parsed.database
    is_file = parsed.get_backend_name() == "sqlite" and bool(path) and path != ":memory:" and not str(path).startswith("file:")
    if must_exist and is_file and not os.path.exists(str(path)):
        raise DatabaseUnusable(f"there is no database at {path} ({shown}; halfmq db upgrade creates one)", EXIT_NOT_FOUND)
    try:
        database = open_database(url)
    except NoSuchModuleError:
        raise DatabaseUnusable(
            f"cannot open {shown}: no database driver {parsed.drivername!r} (use sqlite:///PATH or postgresql+psycopg://…)",
            EXIT_USAGE,
        ) from None
    except ImportError as error:  # a known dialect whose driver package is not installed
        raise DatabaseUnusable(f"cannot open {shown}: {one_line(error)}", EXIT_USAGE) from None
    try:
        with database.writer.connect():
            pass
    except DBAPIError as error:
        database.dispose()
        raise DatabaseUnusable(f"cannot reach the database {shown}: {one_line(error.orig or error)}", EXIT_UNAVAILABLE) from None
    return database


def one_line(error: BaseException) -> str:
    """A driver's message on one line (psycopg's run over several, with a hint after a tab)."""
    return re.sub(r"\s+", " ", str(error)).strip() or type(error).__name__


def database_problem(settings: Settings) -> DatabaseUnusable | None:
    """Why the broker could not start on its database, or None when it answers."""
    try:
        open_usable_database(settings.database_url).dispose()
    except DatabaseUnusable as problem:
        return problem
    return None


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    from app.one_write_http import OneWriteHttpToolsProtocol

    return {
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level,
        "loop": "auto",
        "http": OneWriteHttpToolsProtocol,  # uvicorn's httptools protocol, each answer in one write
        "access_log": False,  # the broker's own access log (HALFMQ_ACCESS_LOG) replaces uvicorn's
        "timeout_graceful_shutdown": 10,
        "ssl_certfile": settings.ssl_certfile,
        "ssl_keyfile": settings.ssl_keyfile,
        # X-Forwarded-For is believed only from the proxies the setting names (uvicorn's default
        # believes any local peer, so anything on the broker's host could forge a client address).
        "proxy_headers": bool(settings.forwarded_allow_ips),
        "forwarded_allow_ips": settings.forwarded_allow_ips or None,
    }


def serve(settings: Settings) -> int:
    """Serve until stopped (SIGTERM, SIGINT); the exit code."""
    from app.memory import leave_out_test_tools

    leave_out_test_tools()
    if settings.workers > 1 and settings.core_process:
        from app.fronts import serve_fronts

        return serve_fronts(settings, uvicorn_options(settings))
    from app.core.link import spawn_core

    core = spawn_core(settings) if settings.core_process else None  # starting while this process imports the app
    import uvicorn

    from app.main import create_app

    uvicorn.run(create_app(settings, core), **uvicorn_options(settings))
    return 0


def serve_from_environment() -> int:
    """``python -m app``: the broker with the settings of the environment; the exit code."""
    settings = Settings()
    problem = settings.startup_problem()
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    unusable = database_problem(settings)
    if unusable is not None:
        print(f"error: {unusable.message}", file=sys.stderr)
        return unusable.exit_code
    return serve(settings)
