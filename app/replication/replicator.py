"""The replicator: connects both sides, prepares the topics, runs one copier per topic and the group sync.

Failures split three ways. An unreachable or failing broker (no answer, 429, 5xx) is
waited out with growing pauses and one log line each; nothing is lost meanwhile, since
the position lives on the target and only moves with what was written. A refusal
that will not heal by waiting (401/403, a topic whose partition counts differ, a
message the target will not take, another replicator taking over) stops the
replicator with an error that says what to fix. Anything else ends the copier's
session, and a new one starts from the committed position.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from app.replication.cluster import Cluster
from app.replication.copying import progress_group
from app.replication.errors import (
    ClusterError,
    ProducerFenced,
    ReplicationError,
    SameCluster,
    TopicMissing,
    is_refused_access,
    is_transient,
)
from app.replication.snapshots import CorruptProgress
from app.replication.state import ReplicationState
from app.replication.subscriptions import SubscriptionSync
from app.replication.topic_copier import CopySettings, StartOver, TopicCopier, check_same_partitions

log = logging.getLogger("halfmq.replication")

T = TypeVar("T")

# Statuses a broker answers the same way however long one waits.
_WILL_NOT_HEAL = (400, 401, 403, 413, 422)


@dataclass(frozen=True)
class ReplicatorConfig:
    source_url: str
    target_url: str
    topics: list[str]
    groups: list[str] = field(default_factory=list)
    source_token: str | None = None
    target_token: str | None = None
    snapshot_interval_ms: int = 1000
    batch_messages: int = 1000


class Backoff:
    """Pauses that double from ``initial`` to ``maximum`` seconds; :meth:`reset` after a success."""

    def __init__(self, initial: float = 0.5, maximum: float = 30.0) -> None:
        self.initial = initial
        self.maximum = maximum
        self._next = initial

    def next(self) -> float:
        delay = self._next
        self._next = min(self.maximum, self._next * 2)
        return delay

    def reset(self) -> None:
        self._next = self.initial


class Replicator:
    """``run(stop)`` replicates until ``stop`` is set, or raises the :class:`ReplicationError` that stopped it."""

    def __init__(self, config: ReplicatorConfig, state: ReplicationState | None = None) -> None:
        self.config = config
        self.state = state or ReplicationState()
        self.source = Cluster("source", config.source_url, config.source_token)
        self.target = Cluster("target", config.target_url, config.target_token)
        self._failure: BaseException | None = None
        self._failed = threading.Event()

    def run(self, stop: threading.Event) -> None:
        try:
            self._run(stop)
        finally:
            self.source.close()
            self.target.close()

    def _run(self, stop: threading.Event) -> None:
        names = [
            self._until_done(stop, cluster.name, f"reach the {cluster.side}") for cluster in (self.source, self.target)
        ]
        if stop.is_set():
            return
        source_name, target_name = names
        assert source_name is not None and target_name is not None
        if source_name == target_name:
            raise SameCluster(
                f"source and target both call themselves '{source_name}'; "
                "give each cluster its own HALFMQ_CLUSTER_NAME, "
                "the replicator tells copies from originals by it"
            )
        if source_name == "local":
            log.warning(
                "the source uses the default cluster name 'local'; "
                "set HALFMQ_CLUSTER_NAME so copies say where they came from"
            )
        self.state.source_cluster, self.state.target_cluster = source_name, target_name
        for topic in self.config.topics:
            if (
                self._until_done(stop, functools.partial(self._prepare_topic, topic), f"prepare topic '{topic}'")
                is None
            ):
                return
        settings = CopySettings(source_name, target_name, self.config.snapshot_interval_ms, self.config.batch_messages)
        copiers = [TopicCopier(topic, self.source, self.target, settings, self.state) for topic in self.config.topics]
        threads = [
            threading.Thread(target=self._supervise, args=(c, stop), name=f"copy-{c.topic}", daemon=True)
            for c in copiers
        ]
        if self.config.groups:
            sync = SubscriptionSync(self.source, self.target, self.config.groups, self.config.topics, self.state)
            threads.append(
                threading.Thread(target=self._sync_groups, args=(sync, stop), name="group-sync", daemon=True)
            )
        log.info(
            "replicating %s from %s (%s) to %s (%s); progress in group '%s' on the target; groups synced: %s",
            ", ".join(self.config.topics),
            source_name,
            self.source.url,
            target_name,
            self.target.url,
            progress_group(source_name),
            ", ".join(self.config.groups) or "none",
        )
        for thread in threads:
            thread.start()
        while not stop.is_set() and not self._failed.is_set():
            stop.wait(0.2)
        stop.set()
        for thread in threads:
            thread.join(timeout=15)
        for copier in copiers:
            copier.close()
        if self._failure is not None:
            raise self._failure

    def _prepare_topic(self, topic: str) -> int:
        """Check (or create) the topic on the target; its partition count."""
        source = self.source.describe_topic(topic)
        if source is None:
            raise TopicMissing(f"topic '{topic}' does not exist on the source ({self.source.url})")
        target = self.target.describe_topic(topic)
        if target is None:
            if self.target.create_topic(topic, source.partition_count):
                log.info("created topic '%s' on the target with %d partition(s)", topic, source.partition_count)
            target = self.target.describe_topic(topic)
            if target is None:
                raise ReplicationError(f"topic '{topic}' vanished from the target right after it was created")
        check_same_partitions(topic, source, target)
        self.state.track(topic, range(source.partition_count))
        return source.partition_count

    def _until_done(self, stop: threading.Event, step: Callable[[], T], what: str) -> T | None:
        """``step()``, retried with backoff while a side is unreachable or failing; ``None`` if stopped meanwhile."""
        backoff = Backoff()
        while not stop.is_set():
            try:
                return step()
            except ClusterError as error:
                if not is_transient(error):
                    raise
                delay = backoff.next()
                self.state.retried(error.side)
                log.warning("%s; retrying in %.1f s (to %s)", error, delay, what)
                stop.wait(delay)
        return None

    def _supervise(self, copier: TopicCopier, stop: threading.Event) -> None:
        """Sessions of one copier, one after another, until stopped or a failure that waiting will not heal."""
        backoff = Backoff()
        while not stop.is_set():
            progressed = threading.Event()
            try:
                copier.session(stop, progressed)
                return
            except ClusterError as error:
                if error.code == "PRODUCER_FENCED":
                    self._fail(
                        ProducerFenced(
                            f"topic '{copier.topic}': another replicator registered transactional id "
                            f"'{copier.transactional_id}' on the target, so this one stops ({error.cause.message})"
                        )
                    )
                    return
                if is_refused_access(error) or error.status in _WILL_NOT_HEAL:
                    self._fail(error)
                    return
                if progressed.is_set():
                    backoff.reset()
                delay = backoff.next()
                if is_transient(error):
                    self.state.retried(error.side)
                    log.warning(
                        "%s; retrying in %.1f s. Nothing is lost: "
                        "topic '%s' resumes from the position committed on the target",
                        error,
                        delay,
                        copier.topic,
                    )
                else:
                    log.warning(
                        "topic '%s': %s; starting over from the committed position in %.1f s",
                        copier.topic,
                        error,
                        delay,
                    )
            except (ReplicationError, CorruptProgress) as error:
                self._fail(error)
                return
            except StartOver as error:
                delay = backoff.next()
                log.warning(
                    "topic '%s': %s; starting over from the committed position in %.1f s", copier.topic, error, delay
                )
            except Exception:
                delay = backoff.next()
                log.exception(
                    "topic '%s': unexpected failure; starting over from the committed position in %.1f s",
                    copier.topic,
                    delay,
                )
            stop.wait(delay)

    def _sync_groups(self, sync: SubscriptionSync, stop: threading.Event) -> None:
        interval = self.config.snapshot_interval_ms / 1000
        failing = False
        while not stop.wait(interval):
            try:
                sync.sync_all()
                if failing:
                    log.info("group offsets sync works again")
                failing = False
            except ClusterError as error:
                if is_refused_access(error):
                    self._fail(error)
                    return
                if is_transient(error):
                    self.state.retried(error.side)
                if not failing:  # one line per outage, not one per interval
                    log.warning("group offsets not synced: %s; trying again every %.1f s", error, interval)
                failing = True

    def _fail(self, error: BaseException) -> None:
        if self._failure is None:
            self._failure = error
        self._failed.set()
