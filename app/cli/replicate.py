"""``halfmq replicate``: copy topics from one cluster to another, exactly once, with their groups' offsets.

The verb runs until SIGTERM or Ctrl-C. In a terminal it shows a live table of the
replication (lag, positions, snapshot age); otherwise it logs the same as plain lines
every ``--status-interval-s``. ``--metrics-port`` serves Prometheus metrics on
127.0.0.1. A stop that waiting will not cure (a refused token, partition counts that
differ, another replicator taking over) ends it with a message and an exit code from
:mod:`app.cli.remote`.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from contextlib import nullcontext
from typing import Annotated, NoReturn

import typer
from rich.live import Live

from app.cli.remote import EXIT_CONFLICT, EXIT_NOT_FOUND, EXIT_REFUSED, exit_code_for, fail
from app.replication import (
    ClusterError,
    ProducerFenced,
    ReplicationError,
    ReplicationState,
    Replicator,
    ReplicatorConfig,
    TopicMismatch,
    TopicMissing,
)
from app.replication.snapshots import CorruptProgress
from app.replication.status import serve_metrics, status_lines, status_table
from half_store.domain.constants import TOPIC_NAME_PATTERN, TOPIC_NAME_RE, is_system_topic

log = logging.getLogger("halfmq.replication")

def _names(value: str, what: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names and what == "topic":
        raise typer.BadParameter("name at least one topic")
    return list(dict.fromkeys(names))


def _topics(value: str) -> list[str]:
    topics = _names(value, "topic")
    for topic in topics:
        if not TOPIC_NAME_RE.match(topic):
            raise typer.BadParameter(f"'{topic}' is not a topic name ({TOPIC_NAME_PATTERN})")
        if is_system_topic(topic):
            raise typer.BadParameter(
                f"'{topic}' is a system topic; it is not replicated (half messages stay where they were prepared)"
            )
    return topics


def replicate(
    source: Annotated[str, typer.Option("--source", help="The source cluster's URL")],
    target: Annotated[str, typer.Option("--target", help="The target cluster's URL")],
    topics: Annotated[str, typer.Option("--topics", help="Topics to copy, comma-separated")],
    groups: Annotated[str, typer.Option("--groups", help="Consumer groups whose offsets follow onto the target")] = "",
    source_token: Annotated[
        str | None,
        typer.Option(
            "--source-token", envvar="HALFMQ_SOURCE_TOKEN", help="Bearer token for the source", show_default=False
        ),
    ] = None,
    target_token: Annotated[
        str | None,
        typer.Option(
            "--target-token", envvar="HALFMQ_TARGET_TOKEN", help="Bearer token for the target", show_default=False
        ),
    ] = None,
    snapshot_interval_ms: Annotated[
        int,
        typer.Option("--snapshot-interval-ms", min=10, help="How often positions are paired and group offsets synced"),
    ] = 1000,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port", min=0, max=65535, help="Serve Prometheus metrics on 127.0.0.1:PORT", show_default=False
        ),
    ] = None,
    batch_messages: Annotated[
        int, typer.Option("--batch-messages", min=1, max=10_000, help="Messages per fetch from the source")
    ] = 1000,
    status_interval_s: Annotated[
        float, typer.Option("--status-interval-s", min=0.1, help="Seconds between status lines when not in a terminal")
    ] = 10.0,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error")] = "info",
) -> None:
    """Replicate topics from one cluster to another, exactly once, with their consumer groups' offsets."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    config = ReplicatorConfig(
        source_url=source,
        target_url=target,
        topics=_topics(topics),
        groups=_names(groups, "group"),
        source_token=source_token,
        target_token=target_token,
        snapshot_interval_ms=snapshot_interval_ms,
        batch_messages=batch_messages,
    )
    state = ReplicationState()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    if metrics_port is not None:
        try:
            log.info("metrics on http://127.0.0.1:%d/metrics", serve_metrics(state, metrics_port))
        except OSError as error:
            fail(f"cannot serve metrics on 127.0.0.1:{metrics_port}: {error}", EXIT_REFUSED)
    in_terminal = sys.stdout.isatty()
    if not in_terminal:
        threading.Thread(target=_log_status, args=(state, stop, status_interval_s), name="status", daemon=True).start()
    live = Live(get_renderable=lambda: status_table(state), refresh_per_second=2) if in_terminal else nullcontext()
    try:
        with live:
            Replicator(config, state).run(stop)
    except (ReplicationError, CorruptProgress) as error:
        _stop_on(error)
    log.info("replicator stopped")


def _stop_on(error: Exception) -> NoReturn:
    log.error("replicator stops: %s", error)  # one line for log collectors; fail() words it for a terminal
    if isinstance(error, ClusterError):
        fail(str(error), exit_code_for(error.cause))
    if isinstance(error, (TopicMismatch, ProducerFenced)):
        fail(str(error), EXIT_CONFLICT)
    if isinstance(error, TopicMissing):
        fail(str(error), EXIT_NOT_FOUND)
    fail(str(error), EXIT_REFUSED)


def _log_status(state: ReplicationState, stop: threading.Event, interval: float) -> None:
    while not stop.wait(interval):
        for line in status_lines(state):
            log.info("status %s", line)
