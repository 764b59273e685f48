"""The core's Prometheus metrics: what happens behind the HTTP front.

Group commits, half messages, checks, transactions and waiters. ``/metrics`` is the
front's registry (:mod:`app.metrics`) followed by this one, so each name appears once
whichever way the broker runs (one process, or a front and a core).
"""

from __future__ import annotations

import gc

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    ProcessCollector,
    generate_latest,
)

CORE_REGISTRY = CollectorRegistry(auto_describe=True)

HALF_MESSAGES = Counter("halfmq_half_messages_total", "Half-message events", ["event"], registry=CORE_REGISTRY)
DELAYED_MESSAGES = Counter(
    "halfmq_delayed_messages_total", "Delay messages scheduled, delivered into their topics, or dropped with their topic",
    ["event"], registry=CORE_REGISTRY,
)
DELAYED_WAITING = Gauge("halfmq_delayed_messages_waiting", "Delay messages waiting for their time", registry=CORE_REGISTRY)
CHECKS = Counter("halfmq_checks_total", "Back-checks sent to producers, by answer", ["result"], registry=CORE_REGISTRY)
TRANSACTIONS = Counter(
    "halfmq_transactions_total", "Kafka-mode transactions ended, by outcome", ["outcome"], registry=CORE_REGISTRY
)
LONG_POLL_WAITERS = Gauge("halfmq_long_poll_waiters", "Fetches waiting for data", registry=CORE_REGISTRY)
CHECKER_LEADER = Gauge("halfmq_checker_leader", "1 while this process holds the checker lease", registry=CORE_REGISTRY)
MEMORY_RELEASED = Counter(
    "halfmq_memory_released_bytes",
    "Resident memory the core process handed back to the system (malloc_trim, HALFMQ_MEMORY_TRIM_SECONDS)",
    registry=CORE_REGISTRY,
)
Gauge(
    "halfmq_gc_frozen_objects",
    "Objects of the core's start-up kept out of the garbage collector's passes (gc.freeze)",
    registry=CORE_REGISTRY,
).set_function(gc.get_freeze_count)
GROUP_COMMITS = Counter(
    "halfmq_group_commits_total", "Database transactions committed by the group-commit writer", registry=CORE_REGISTRY
)
GROUP_COMMIT_UNITS = Counter(
    "halfmq_group_commit_units_total", "Write units those transactions carried", registry=CORE_REGISTRY
)
MERGE_FALLBACKS = Counter(
    "halfmq_group_commit_merge_fallbacks_total",
    "Merged runs that failed and were run again one unit at a time",
    ["kind"],
    registry=CORE_REGISTRY,
)

CAREFUL_RERUNS = Counter(
    "halfmq_group_commit_careful_reruns_total",
    "Group commits rolled back because a unit failed, and run again with a savepoint per unit",
    registry=CORE_REGISTRY,
)

RETENTION_DELETED_MESSAGES = Counter(
    "halfmq_retention_deleted_messages_total",
    "Messages (markers included) retention deleted from the head of user topics' partitions",
    ["topic"],
    registry=CORE_REGISTRY,
)
RETENTION_DELETED_BYTES = Counter(
    "halfmq_retention_deleted_bytes_total",
    "Bytes (value, key and headers) of the messages retention deleted",
    ["topic"],
    registry=CORE_REGISTRY,
)
LOG_START_MOVES = Counter(
    "halfmq_retention_log_start_moves_total",
    "Times retention moved a partition's log start offset up",
    ["topic"],
    registry=CORE_REGISTRY,
)
DELETED_TOPIC_MESSAGES_PURGED = Counter(
    "halfmq_deleted_topic_messages_purged_total",
    "Messages of deleted topics removed afterwards in bounded batches",
    registry=CORE_REGISTRY,
)
ADMIN_ACTIONS = Counter(
    "halfmq_admin_actions_total",
    "Administrative changes done: topic_delete, topic_alter, half_recheck",
    ["action"],
    registry=CORE_REGISTRY,
)
GROUP_MEMBERS = Gauge(
    "halfmq_consumer_group_members",
    "Live members of each consumer group (read from the database)",
    ["group"],
    registry=CORE_REGISTRY,
)
CONSUMER_LAG = Gauge(
    "halfmq_consumer_group_lag",
    "Committed records a consumer group has still to read in a partition (transaction markers not counted), "
    "read from the database when scraped",
    ["group", "topic", "partition"],
    registry=CORE_REGISTRY,
)
GROUP_REBALANCES = Counter(
    "halfmq_consumer_group_rebalances_total",
    "Target assignments recomputed to a different one, by what set it off",
    ["reason"],
    registry=CORE_REGISTRY,
)
GROUP_FENCED_COMMITS = Counter(
    "halfmq_consumer_group_fenced_commits_total",
    "Offset commits refused with FENCED_MEMBER_EPOCH, by where they were made",
    ["kind"],
    registry=CORE_REGISTRY,
)
SHARE_DELIVERED = Counter(
    "halfmq_share_delivered_total",
    "Messages handed out to share-group consumers (each delivery)",
    registry=CORE_REGISTRY,
)
SHARE_REDELIVERED = Counter(
    "halfmq_share_redelivered_total",
    "Deliveries of a message the group had received before (released, or its lock ran out)",
    registry=CORE_REGISTRY,
)
SHARE_ACCEPTED = Counter(
    "halfmq_share_accepted_total",
    "Share-group records accepted (directly or by a committed transaction)",
    registry=CORE_REGISTRY,
)
SHARE_RELEASED = Counter(
    "halfmq_share_released_total",
    "Share-group locks given back before they ran out (RELEASE, or an aborted transaction)",
    registry=CORE_REGISTRY,
)
SHARE_DEAD_LETTERED = Counter(
    "halfmq_share_dead_lettered_total",
    "Share-group records appended to their group's dead-letter topic, by reason",
    ["reason"],
    registry=CORE_REGISTRY,
)
SHARE_LOCKED = Gauge(
    "halfmq_share_locked",
    "Share-group records locked in the database at the last scrape (every broker process on it reports the same)",
    registry=CORE_REGISTRY,
)


def count_core_process() -> None:
    """In a core of its own, also report that process's CPU and memory (``halfmq_core_process_*``)."""
    ProcessCollector(namespace="halfmq_core", registry=CORE_REGISTRY)


def core_metrics() -> bytes:
    return generate_latest(CORE_REGISTRY)
