"""The ingest job's progress display: a live rich panel on a terminal, log lines otherwise.

It is fed Spark's own streaming progress reports (``query.recentProgress``), whose
source section carries our offsets: ``endOffset`` (read so far) and
``latestOffset`` (the broker's last stable offsets, i.e. what is committed).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from spark_ingest.offsets import OffsetMap, offsets_from_json


def _offsets(text: object) -> OffsetMap:
    if not isinstance(text, str) or text in ("", "null"):
        return {}
    return offsets_from_json(json.loads(text))


@dataclass
class IngestStats:
    """What this run has done so far, accumulated from Spark progress reports."""

    log_start: OffsetMap = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    batches: int = 0
    rows: int = 0
    last_rows_per_second: float = 0.0
    first_start: OffsetMap = field(default_factory=dict)
    read_to: OffsetMap = field(default_factory=dict)
    committed: OffsetMap = field(default_factory=dict)
    seen: set[tuple[str, int]] = field(default_factory=set)

    def add(self, progress: Mapping[str, Any]) -> bool:
        """Account one progress report; False if seen before or an idle tick (no batch ran)."""
        report_id = (str(progress["runId"]), int(progress["batchId"]))
        if report_id in self.seen:
            return False
        self.seen.add(report_id)
        sources = progress.get("sources") or []
        if not sources:
            return False
        source = sources[0]
        start, end = _offsets(source.get("startOffset")), _offsets(source.get("endOffset"))
        self.committed = _offsets(source.get("latestOffset")) or self.committed
        if not end or (end == self.read_to and int(progress.get("numInputRows") or 0) == 0):
            return False
        if not self.first_start:
            # A fresh query's first batch reports no start offset: it began at the log start.
            self.first_start = dict(start) if start else dict(self.log_start)
        self.read_to = end
        self.batches += 1
        self.rows += int(progress.get("numInputRows") or 0)
        self.last_rows_per_second = float(progress.get("processedRowsPerSecond") or 0.0)
        return True

    @property
    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.started

    def lag(self) -> int:
        """Committed offsets not yet read (an upper bound on rows still to write)."""
        return sum(max(0, offset - self.read_to.get(key, offset)) for key, offset in self.committed.items())


class ProgressView:
    """Shows :class:`IngestStats` live on a terminal, or as one line per batch in a log."""

    def __init__(self, console: Console, *, title: str, log_start: OffsetMap, target: OffsetMap | None) -> None:
        self.console = console
        self.title = title
        self.target = target
        self.stats = IngestStats(log_start=dict(log_start))
        self._live: Live | None = None
        self._bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>5.1f}%"),
            TimeElapsedColumn(),
            console=console,
        )
        self._task = self._bar.add_task("offsets", total=1)
        self._phase = "starting"

    def __enter__(self) -> ProgressView:
        if self.console.is_terminal:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(None, None, None)

    def status(self, text: str) -> None:
        """A phase change (starting Spark, waiting for the first batch, ...)."""
        self._phase = text
        if self._live is None:
            self.console.print(f"[dim]{text}[/dim]")
        else:
            self._live.update(self._render())

    def query_started(self) -> None:
        """Rates are measured from here: Spark's start-up is not ingest time."""
        self.stats.started = time.monotonic()
        self.status("ingesting")

    def update(self, progress_reports: Sequence[Mapping[str, Any]]) -> None:
        """Account new progress reports (repeats are ignored) and refresh the display."""
        for report in progress_reports:
            if self.stats.add(report) and self._live is None:
                self.console.print(self._line(report))
        if self._live is not None:
            self._live.update(self._render())

    def _line(self, report: Mapping[str, Any]) -> str:
        return (
            f"batch {report.get('batchId')}: {report.get('numInputRows')} rows "
            f"(total {self.stats.rows} in {self.stats.batches} batches, "
            f"{self.stats.last_rows_per_second:,.0f} rows/s), lag {self.stats.lag()} offsets"
        )

    def _render(self) -> Group:
        done, total = self._coverage()
        self._bar.update(self._task, completed=done, total=max(total, 1))
        table = Table(title=self.title, expand=False)
        for column in ("topic", "partition", "read to", "committed (LSO)", "lag"):
            table.add_column(column, justify="right" if column != "topic" else "left")
        for (topic, partition), committed in sorted(self.stats.committed.items()):
            read = self.stats.read_to.get((topic, partition), 0)
            table.add_row(topic, str(partition), f"{read:,}", f"{committed:,}", f"{max(0, committed - read):,}")
        summary = (
            f"[bold]{self.stats.rows:,}[/bold] rows written in {self.stats.batches} batches · "
            f"{self.stats.last_rows_per_second:,.0f} rows/s last batch · "
            f"{self.stats.rows / max(self.stats.elapsed, 1e-9):,.0f} rows/s overall"
        )
        return Group(table, self._bar, summary, f"[dim]{self._phase}[/dim]")

    def _coverage(self) -> tuple[int, int]:
        target = self.target or self.stats.committed
        start = self.stats.first_start
        total = sum(max(0, offset - start.get(key, 0)) for key, offset in target.items())
        done = sum(
            max(0, min(self.stats.read_to.get(key, start.get(key, 0)), offset) - start.get(key, 0))
            for key, offset in target.items()
        )
        return done, total
