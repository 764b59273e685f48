"""What every client verb of ``halfmq`` shares: where the broker is, who asks, how answers are shown.

A verb takes the three options below, opens a :class:`Remote` with them and sends the
SDK's calls (:mod:`sdk.calls`: the paths, bodies and what may be resent are the SDK's)
through an :class:`sdk.Client` (its retries and typed errors included). Answers are
printed as rich tables in a terminal, or as JSON with ``--json``. A refusal from the
broker prints its code and message on standard error and exits with a code a script
can test; it never prints a traceback.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, NoReturn, TypeVar
from urllib.parse import urlsplit

import typer
from rich.console import Console, RenderableType

from sdk import Client, RetryPolicy
from sdk.calls import Call
from sdk.errors import BrokerUnavailableError, HalfmqError

T = TypeVar("T")

UrlOption = Annotated[str, typer.Option("--url", envvar="HALFMQ_URL", help="The broker's URL [env HALFMQ_URL]")]
TokenOption = Annotated[
    str | None, typer.Option("--token", envvar="HALFMQ_TOKEN", help="Bearer token [env HALFMQ_TOKEN]", show_default=False)
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the broker's JSON instead of tables")]
DEFAULT_URL = "http://127.0.0.1:8080"

# Exit codes, by what went wrong (2 is click's own: the command line was wrong).
EXIT_REFUSED = 1  # the broker refused the request (400, 422, 413, 416 ...)
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
EXIT_UNAUTHORIZED = 5  # 401 or 403
EXIT_UNAVAILABLE = 6  # no answer, or a 5xx
EXIT_NOT_OFFERED = 7  # the broker has no such endpoint (an older broker, or a feature it was built without)
EXIT_INTERRUPTED = 130  # Ctrl-C before a verb was done (128 + SIGINT, as shells report it)

# The codes of the broker's answer to a route it does not serve (not to an unknown topic, group, ...).
ROUTE_NOT_SERVED = ("NOT_FOUND", "METHOD_NOT_ALLOWED")

out = Console()
err = Console(stderr=True)


class NotOfferedError(HalfmqError):
    """The broker answered that it serves no such route: the verb needs a newer broker."""


def exit_code_for(error: HalfmqError) -> int:
    if isinstance(error, BrokerUnavailableError) or (error.status or 0) >= 500:
        return EXIT_UNAVAILABLE
    if isinstance(error, NotOfferedError):
        return EXIT_NOT_OFFERED
    return {401: EXIT_UNAUTHORIZED, 403: EXIT_UNAUTHORIZED, 404: EXIT_NOT_FOUND, 409: EXIT_CONFLICT}.get(
        error.status or 0, EXIT_REFUSED
    )


def fail(message: str, code: int = EXIT_REFUSED) -> NoReturn:
    # One line, however narrow the terminal: a script may grep it.
    err.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def confirmed(yes: bool, question: str, refusal: str) -> None:
    """A destructive verb goes ahead with --yes, or once a person at a terminal says yes; else exit 2."""
    if yes:
        return
    if not sys.stdin.isatty():
        fail(f"{refusal} needs --yes", EXIT_USAGE)
    typer.confirm(question, abort=True)


@dataclass
class Remote:
    """One broker, as a verb reaches it."""

    client: Client
    as_json: bool

    def send(self, call: Call[T]) -> T:
        """The answer to ``call`` (built by :mod:`sdk.calls`); a refusal raises the SDK's typed error.

        A verb that shows the broker's answer sends ``call.returning_json()``.
        """
        try:
            return self.client.call(call)
        except HalfmqError as error:
            if error.code in ROUTE_NOT_SERVED:  # say what is missing, not just "no such endpoint"
                raise NotOfferedError(
                    f"the broker does not offer {call.method} {call.path} ({error.message}); "
                    f"{not_offered_hint(str(self.client.url))}",
                    code=error.code,
                    status=error.status,
                ) from error
            raise

    def show(self, answer: Any, render: Callable[[Any], RenderableType | str]) -> None:
        """Print ``answer``: as JSON with ``--json``, else as ``render`` makes it."""
        if self.as_json:
            sys.stdout.write(json.dumps(answer, indent=2, sort_keys=False) + "\n")
        else:
            out.print(render(answer))


def tls_verify() -> bool | str:
    """A broker with a certificate of its own CA: ``HALFMQ_CA_FILE`` names the CA bundle to trust."""
    return os.environ.get("HALFMQ_CA_FILE") or True


def not_offered_hint(url: str) -> str:
    """Why a broker may serve no such route: a --url that is not its root, else an older broker."""
    path = urlsplit(url).path.rstrip("/")
    if path:
        return f"--url should be the broker's root, and {url} has the path {path}"
    return "it may be older than this CLI"


def url_problem(url: str) -> str | None:
    """What is wrong with a --url, before anything is sent (a usage error, never retried), or None."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - reading it validates it
    except ValueError as error:
        return f"--url {url!r} is not a URL: {error}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"--url {url!r} is not a broker URL: give http:// or https:// and a host, such as {DEFAULT_URL}"
    if re.search(r"/v\d+/?$", parts.path):
        root = f"{parts.scheme}://{parts.netloc}{parts.path.rsplit('/v', 1)[0]}"
        return f"--url should be the broker's root ({root}), not its API path {parts.path}"
    return None


@contextmanager
def remote(url: str, token: str | None, as_json: bool, *, retry: RetryPolicy | None = None) -> Iterator[Remote]:
    """A :class:`Remote` for one verb; the broker's refusals become a message and an exit code."""
    problem = url_problem(url)
    if problem is not None:
        fail(problem, EXIT_USAGE)
    client = Client(url, token=token, retry=retry or RetryPolicy(max_attempts=3), verify=tls_verify())
    try:
        yield Remote(client, as_json)
    except HalfmqError as error:
        where = f" ({url})" if isinstance(error, BrokerUnavailableError) else ""
        fail(f"{error.code}: {error.message}{where}", exit_code_for(error))
    finally:
        client.close()
