"""The replicator's own status: Prometheus metrics it serves itself, a live table, or log lines.

All three read :class:`~app.replication.state.ReplicationState` when they render, so
what they show is computed at that moment.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import start_http_server
from prometheus_client.registry import Collector
from rich.console import Group, RenderableType
from rich.table import Table

from app.replication.state import ReplicationState, now_ms

log = logging.getLogger("halfmq.replication")


class ReplicationCollector(Collector):
    """``halfmq_replication_*``: per partition lag, positions and snapshot age; per group sync results."""

    def __init__(self, state: ReplicationState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        labels = ["source_cluster", "target_cluster", "topic", "partition"]
        lag = GaugeMetricFamily(
            "halfmq_replication_lag_messages", "Source offsets committed but not yet on the target", labels=labels
        )
        lag_ms = GaugeMetricFamily(
            "halfmq_replication_lag_ms",
            "Age of the oldest source message not yet on the target (0 when caught up)",
            labels=labels,
        )
        age = GaugeMetricFamily(
            "halfmq_replication_snapshot_age_seconds",
            "Age of the partition's last snapshot (0 while caught up: the current position pair is exact)",
            labels=labels,
        )
        source = GaugeMetricFamily("halfmq_replication_source_position", "Next source offset to copy", labels=labels)
        target = GaugeMetricFamily(
            "halfmq_replication_target_position", "Target offset after the last copy", labels=labels
        )
        copied = CounterMetricFamily(
            "halfmq_replication_messages_copied", "Messages copied to the target", labels=labels
        )
        skipped = CounterMetricFamily(
            "halfmq_replication_messages_skipped",
            "Source messages not copied, by reason (loop, retention)",
            labels=[*labels, "reason"],
        )
        clusters = [self.state.source_cluster, self.state.target_cluster]
        for view in self.state.partitions():
            values = [*clusters, view.topic, str(view.partition)]
            if view.lag_messages is not None:
                lag.add_metric(values, view.lag_messages)
            if view.lag_ms is not None:
                lag_ms.add_metric(values, view.lag_ms)
            if view.snapshot_age_ms is not None:
                age.add_metric(values, view.snapshot_age_ms / 1000)
            if view.source_position is not None and view.target_position is not None:
                source.add_metric(values, view.source_position)
                target.add_metric(values, view.target_position)
            copied.add_metric(values, view.copied)
            for reason, count in view.skipped.items():
                skipped.add_metric([*values, reason], count)
        yield from (lag, lag_ms, age, source, target, copied, skipped)
        group_labels = ["source_cluster", "target_cluster", "group"]
        synced = CounterMetricFamily(
            "halfmq_replication_group_offsets_synced", "Group offsets committed on the target", labels=group_labels
        )
        not_synced = CounterMetricFamily(
            "halfmq_replication_group_offsets_not_synced",
            "Group offsets left as they were, by reason",
            labels=[*group_labels, "reason"],
        )
        last = GaugeMetricFamily(
            "halfmq_replication_group_last_sync_timestamp_seconds",
            "When the group was last synced",
            labels=group_labels,
        )
        for group in self.state.groups():
            values = [*clusters, group.group]
            synced.add_metric(values, group.synced)
            for reason, count in group.skipped.items():
                not_synced.add_metric([*values, reason], count)
            if group.last_sync_ms is not None:
                last.add_metric(values, group.last_sync_ms / 1000)
        yield from (synced, not_synced, last)
        retries = CounterMetricFamily(
            "halfmq_replication_retries", "Failed requests the replicator retried, by side", labels=["side"]
        )
        for side, count in sorted(self.state.retries.items()):
            retries.add_metric([side], count)
        yield retries


def serve_metrics(state: ReplicationState, port: int) -> int:
    """Serve ``/metrics`` on 127.0.0.1:``port`` (0: any free port); returns the port."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(ReplicationCollector(state))
    server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
    return int(server.server_port)


def _number(value: int | None, unit: str = "") -> str:
    return "-" if value is None else f"{value}{unit}"


def _seconds(value_ms: int | None) -> str:
    return "-" if value_ms is None else f"{value_ms / 1000:.1f} s"


def status_table(state: ReplicationState) -> RenderableType:
    """The live view shown when the replicator runs in a terminal: partitions, then groups."""
    partitions = Table(title=f"halfmq replicate {state.source_cluster} → {state.target_cluster}", title_justify="left")
    for column in (
        "topic/partition",
        "source",
        "source end",
        "target",
        "lag",
        "lag age",
        "snapshot age",
        "copied",
        "skipped",
    ):
        partitions.add_column(column, justify="left" if column == "topic/partition" else "right")
    for view in state.partitions():
        partitions.add_row(
            f"{view.topic}/{view.partition}",
            _number(view.source_position),
            _number(view.source_end),
            _number(view.target_position),
            _number(view.lag_messages),
            _seconds(view.lag_ms),
            _seconds(view.snapshot_age_ms),
            str(view.copied),
            ", ".join(f"{reason} {count}" for reason, count in sorted(view.skipped.items())) or "0",
        )
    views = state.groups()
    if not views:
        return partitions
    groups = Table(title="replicated subscriptions", title_justify="left")
    for column in ("group", "state", "offsets synced", "last sync"):
        groups.add_column(column)
    now = now_ms()
    for group in views:
        ago = "-" if group.last_sync_ms is None else _seconds(now - group.last_sync_ms) + " ago"
        groups.add_row(group.group, group.note, str(group.synced), ago)
    return Group(partitions, groups)


def status_lines(state: ReplicationState) -> list[str]:
    """The same as plain lines, logged periodically when standard output is not a terminal."""
    lines = [
        f"{view.topic}/{view.partition}: source {_number(view.source_position)} of {_number(view.source_end)}, "
        f"target {_number(view.target_position)}, lag {_number(view.lag_messages)} msgs / {_seconds(view.lag_ms)}, "
        f"snapshot {_seconds(view.snapshot_age_ms)} old, copied {view.copied}"
        + "".join(f", skipped {count} ({reason})" for reason, count in sorted(view.skipped.items()))
        for view in state.partitions()
    ]
    lines += [f"group {g.group}: {g.note}, {g.synced} offsets synced" for g in state.groups()]
    return lines
