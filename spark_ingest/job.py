"""``python -m spark_ingest``: ingest committed halfmq messages into Parquet, exactly once.

A Structured Streaming query from the ``halfmq`` source into Spark's Parquet file
sink with a checkpoint. The checkpoint's offset log fixes each micro-batch's
offsets before it runs, and the file sink's ``_spark_metadata`` log commits each
batch's files once, so a rerun, or a restart after a crash, writes nothing twice.
Read the output through Spark (``spark.read.parquet(PATH)`` uses
``_spark_metadata``): after a crash, plain Parquet readers may also see part
files of a batch that never committed.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING

from rich.console import Console

from spark_ingest.client import BrokerClient, HalfmqSourceError, TopicMetadata
from spark_ingest.offsets import OffsetMap, OptionError, parse_offset_spec, parse_topics
from spark_ingest.progress import ProgressView

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

EXIT_OK = 0
EXIT_QUERY_FAILED = 1
EXIT_BAD_INPUT = 2  # unreachable broker, missing topic, bad options: nothing was started
EXIT_INTERRUPTED = 130

# What the job needs beyond the broker's own dependencies: the `spark` extra of the package.
SPARK_MODULES = ("pyspark", "pyarrow")
SPARK_INSTALL_HINT = "pip install 'halfmq[spark]'"


@dataclass(frozen=True)
class JobConfig:
    """The job's command line, validated."""

    url: str
    topics: tuple[str, ...]
    output: str
    checkpoint: str
    trigger: str = "available-now"
    interval: str = "5 seconds"
    max_records_per_trigger: int | None = None
    starting_offsets: str = "earliest"
    group: str | None = None
    min_partitions: int | None = None
    master: str | None = None
    spark_conf: dict[str, str] = field(default_factory=dict)
    token: str | None = field(default=None, repr=False)

    def source_options(self) -> dict[str, str]:
        """Options for ``spark.readStream.format("halfmq")``."""
        options = {"url": self.url, "topic": ",".join(self.topics), "startingOffsets": self.starting_offsets}
        if self.max_records_per_trigger:
            options["maxRecordsPerTrigger"] = str(self.max_records_per_trigger)
        if self.group:
            options["group"] = self.group
        if self.min_partitions:
            options["minPartitions"] = str(self.min_partitions)
        if self.token:
            options["token"] = self.token
        return options


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command line (kept separate so docs and tests can show it)."""
    parser = argparse.ArgumentParser(
        prog="python -m spark_ingest",
        description="Ingest committed halfmq messages into Parquet with Spark, exactly once.",
    )
    parser.add_argument("--url", required=True, help="broker base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument(
        "--token", default=os.environ.get("HALFMQ_TOKEN"), help="bearer token (default: $HALFMQ_TOKEN)"
    )
    parser.add_argument("--topic", required=True, help="topic, or a comma-separated list of topics")
    parser.add_argument("--output", required=True, help="Parquet output directory (any Hadoop path)")
    parser.add_argument(
        "--checkpoint", help="checkpoint directory (default: OUTPUT/_checkpoint); keep it with the output"
    )
    parser.add_argument(
        "--trigger",
        choices=("available-now", "continuous"),
        default="available-now",
        help="available-now: ingest what is committed now, then exit; continuous: keep ingesting until stopped",
    )
    parser.add_argument("--interval", default="5 seconds", help="micro-batch interval for --trigger continuous")
    parser.add_argument(
        "--max-records-per-trigger",
        type=_positive_int,
        metavar="N",
        help="cap each micro-batch at N offsets (N rows at most)",
    )
    parser.add_argument(
        "--starting-offsets", default="earliest", help="earliest, latest or JSON; used only without a checkpoint"
    )
    parser.add_argument("--group", help="report progress as this consumer group's offsets (lag monitoring)")
    parser.add_argument(
        "--min-partitions", type=_positive_int, metavar="N", help="split offset ranges into at least N tasks"
    )
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark configuration (repeatable)"
    )
    return parser


def parse_args(argv: Sequence[str] | None) -> JobConfig:
    """Parse and validate the command line; exits with usage on bad flags."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        topics = parse_topics(args.topic)
        parse_offset_spec(args.starting_offsets, option="--starting-offsets", default="earliest", topics=topics)
    except OptionError as exc:
        parser.error(str(exc))
    spark_conf: dict[str, str] = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--conf expects KEY=VALUE, got {item!r}")
        spark_conf[key.strip()] = value.strip()
    output = args.output.rstrip("/") or args.output
    return JobConfig(
        url=args.url.rstrip("/"),
        token=args.token or None,
        topics=topics,
        output=output,
        checkpoint=args.checkpoint or f"{output}/_checkpoint",
        trigger=args.trigger,
        interval=args.interval,
        max_records_per_trigger=args.max_records_per_trigger,
        starting_offsets=args.starting_offsets,
        group=args.group,
        min_partitions=args.min_partitions,
        master=args.master,
        spark_conf=spark_conf,
    )


def preflight(config: JobConfig) -> list[TopicMetadata]:
    """Check the broker answers and every topic exists, before paying for a JVM.

    A couple of quick retries only: an unreachable broker should be reported in
    seconds, not after the source's patient retry budget.
    """
    with BrokerClient(config.url, timeout=10.0, retries=2, token=config.token) as client:
        return client.topics(list(config.topics))


def launched_by_spark_submit() -> bool:
    """Whether spark-submit started this driver, so its ``--master`` must be left alone.

    spark-submit starts the driver's JVM first and hands its gateway port to Python. The
    master it was given is a property of that JVM, which a ``SparkConf()`` made before the
    context exists cannot see (that test used to miss it and run every submitted job in
    local mode, never reaching the cluster).
    """
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(config: JobConfig) -> SparkSession:
    """A Spark session: spark-submit's master if there is one, else ``--master`` or ``local[*]``."""
    # Spark's Python workers must run this interpreter (it has pyarrow, httpx and this package).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"halfmq-ingest[{','.join(config.topics)}]")
    if config.master:
        builder = builder.master(config.master)
    elif not launched_by_spark_submit():
        builder = builder.master("local[*]")
    # Our progress display replaces Spark's console progress bar, which would garble it.
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    for key, value in config.spark_conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("HALFMQ_SPARK_LOG_LEVEL", "ERROR"))
    import spark_ingest

    spark_ingest.register(spark)
    return spark


def start_query(spark: SparkSession, config: JobConfig) -> StreamingQuery:
    """Start the halfmq -> Parquet query with the configured trigger."""
    reader = spark.readStream.format("halfmq")
    for key, value in config.source_options().items():
        reader = reader.option(key, value)
    writer = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", config.output)
        .option("checkpointLocation", config.checkpoint)
        .queryName("halfmq_ingest")
    )
    if config.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=config.interval)
    return writer.start()


class StopRequest:
    """Set by SIGINT/SIGTERM; the watch loop polls it.

    Raising KeyboardInterrupt from the handler instead would land inside a py4j call
    and leave a traceback and a confused gateway behind.
    """

    def __init__(self) -> None:
        self.requested = threading.Event()

    def install(self) -> None:
        """Route Ctrl-C and SIGTERM here."""
        signal.signal(signal.SIGINT, self._handle)
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested.set()


def run(config: JobConfig, console: Console) -> int:
    """Run the job to completion (available-now) or until interrupted (continuous)."""
    try:
        metadata = preflight(config)
    except HalfmqSourceError as exc:
        console.print(f"[bold red]error:[/bold red] {exc}")
        return EXIT_BAD_INPUT
    log_start: OffsetMap = {(t.name, p.partition): p.log_start_offset for t in metadata for p in t.partitions}
    target: OffsetMap | None = None
    if config.trigger == "available-now":
        target = {(t.name, p.partition): p.last_stable_offset for t in metadata for p in t.partitions}
    console.print(
        f"halfmq ingest: {config.url} topics [bold]{', '.join(config.topics)}[/bold] -> {config.output} "
        f"(checkpoint {config.checkpoint}, trigger {config.trigger})"
    )
    stop = StopRequest()
    title = f"halfmq -> {config.output}"
    with ProgressView(console, title=title, log_start=log_start, target=target) as view:
        view.status("starting Spark ...")
        spark = build_session(config)
        stop.install()  # after SparkContext, which installs a SIGINT handler of its own
        query = start_query(spark, config)
        view.query_started()
        _watch(query, view, stop)
        if stop.requested.is_set():
            view.status("stopping; an unfinished micro-batch is redone by the next run ...")
            query.stop()
            view.update(query.recentProgress)
    return _finish(query, view, console, interrupted=stop.requested.is_set())


def _watch(query: StreamingQuery, view: ProgressView, stop: StopRequest) -> None:
    from pyspark.errors import StreamingQueryException

    try:
        while query.isActive and not stop.requested.is_set():
            query.awaitTermination(0.5)  # type: ignore[arg-type]  # annotated int, but it takes seconds as a float
            view.update(query.recentProgress)
    except StreamingQueryException:
        pass  # reported by _finish from query.exception()
    view.update(query.recentProgress)


def _finish(query: StreamingQuery, view: ProgressView, console: Console, *, interrupted: bool) -> int:
    error = query.exception()
    if error is not None:
        console.print(f"[bold red]error:[/bold red] the ingest query failed: {concise_error(str(error))}")
        return EXIT_QUERY_FAILED
    stats = view.stats
    console.print(
        f"[green]done[/green]: {stats.rows:,} rows in {stats.batches} micro-batches "
        f"in {stats.elapsed:,.1f} s ({stats.rows / max(stats.elapsed, 1e-9):,.0f} rows/s)"
        + (" (interrupted)" if interrupted else "")
    )
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


def concise_error(text: str) -> str:
    """Our own exception's line out of Spark's wrapped Java and Python tracebacks, if present."""
    ours = [line.strip() for line in text.splitlines() if line.strip().startswith("spark_ingest.")]
    if ours:
        return ours[-1]
    return "\n".join(text.splitlines()[:20])


def missing_spark_modules() -> list[str]:
    """The modules of the ``spark`` extra that cannot be imported here (none when it is installed)."""
    missing = []
    for name in SPARK_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m spark_ingest``; returns the process exit code."""
    config = parse_args(argv)  # before the check, so --help and usage errors work without Spark
    missing = missing_spark_modules()
    if missing:
        # One line a user can act on, instead of a traceback from deep inside the job.
        print(
            f"error: python -m spark_ingest needs {', '.join(missing)} (not installed); "
            f"install the spark extra: {SPARK_INSTALL_HINT}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    # Log lines (not a terminal) must not be wrapped at 80 columns.
    console = Console(highlight=False, soft_wrap=not sys.stdout.isatty())
    started = time.monotonic()
    code = run(config, console)
    if code == EXIT_OK:
        console.print(f"[dim]total {time.monotonic() - started:,.1f} s including Spark start-up[/dim]")
    return code
