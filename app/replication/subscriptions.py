"""Replicated subscriptions: consumer groups' committed offsets, translated onto the target.

Every snapshot interval, for each group, the replicator reads the group's committed
offsets on the source, translates each through the partition's snapshots
(:func:`app.replication.snapshots.translate`) and commits the result on the target,
where a consumer that fails over resumes from it. A target offset only moves forward:
a group that has already consumed further on the target (it failed over, or consumes
there too) is not rewound.

A group with live members on the target (consumer groups with members) refuses offset
commits that do not come from a member (409 ``FENCED_MEMBER_EPOCH``). Such a group is
active on the target, so there is nothing to fail over: the replicator logs it and
skips the group until its members are gone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from app.replication.cluster import Cluster, OffsetWithMetadata
from app.replication.errors import ClusterError
from app.replication.snapshots import History, translate
from app.replication.state import ReplicationState
from sdk.models import CommittedOffset

log = logging.getLogger("halfmq.replication")

FENCED_MEMBER_EPOCH = "FENCED_MEMBER_EPOCH"

# Why a partition's offset is not synced.
NO_SNAPSHOT = "no_snapshot"  # nothing replicated at or below the group's offset yet
NOT_AHEAD = "not_ahead"  # the target's offset is already there or further
ACTIVE_ON_TARGET = "active_on_target"


@dataclass(frozen=True, slots=True)
class GroupSyncPlan:
    commits: list[OffsetWithMetadata]
    skipped: dict[str, int]


def plan_group_sync(
    source_offsets: Iterable[CommittedOffset],
    target_offsets: Mapping[tuple[str, int], int],
    history_of: Callable[[str, int], History],
    topics: Iterable[str],
) -> GroupSyncPlan:
    """What to commit on the target for one group: each replicated partition's translated offset, if it is ahead."""
    replicated = set(topics)
    commits: list[OffsetWithMetadata] = []
    skipped: dict[str, int] = {}
    for offset in source_offsets:
        if offset.topic not in replicated:
            continue
        translated = translate(history_of(offset.topic, offset.partition), offset.offset)
        if translated is None:
            skipped[NO_SNAPSHOT] = skipped.get(NO_SNAPSHOT, 0) + 1
        elif translated <= target_offsets.get((offset.topic, offset.partition), -1):
            skipped[NOT_AHEAD] = skipped.get(NOT_AHEAD, 0) + 1
        else:
            commits.append(OffsetWithMetadata(offset.topic, offset.partition, translated, offset.metadata))
    return GroupSyncPlan(commits, skipped)


class SubscriptionSync:
    """Syncs the listed groups once per call of :meth:`sync_all`; the replicator calls it every snapshot interval."""

    def __init__(
        self, source: Cluster, target: Cluster, groups: list[str], topics: list[str], state: ReplicationState
    ) -> None:
        self.source = source
        self.target = target
        self.groups = groups
        self.topics = topics
        self.state = state
        self._active: set[str] = set()

    def sync_all(self) -> None:
        """One round over every group; a failure of one group's requests raises after the others are done."""
        first_error: ClusterError | None = None
        for group in self.groups:
            try:
                self.sync(group)
            except ClusterError as error:
                first_error = first_error or error
        if first_error is not None:
            raise first_error

    def sync(self, group: str) -> GroupSyncPlan:
        source_offsets = self.source.group_offsets(group)
        target_offsets = {(o.topic, o.partition): o.offset for o in self.target.group_offsets(group)}
        plan = plan_group_sync(source_offsets, target_offsets, self.state.history, self.topics)
        if not plan.commits:
            self.state.group_synced(
                group, 0, plan.skipped, "in step" if not plan.skipped.get(NO_SNAPSHOT) else "waiting"
            )
            return plan
        try:
            self.target.commit_group_offsets(group, plan.commits)
        except ClusterError as error:
            if error.code != FENCED_MEMBER_EPOCH:
                raise
            if group not in self._active:
                log.warning(
                    "group '%s' has live members on the target, so its offsets there are its members' to commit; "
                    "not syncing it while it is active there (%s)",
                    group,
                    error.cause.message,
                )
            self._active.add(group)
            self.state.group_synced(group, 0, {ACTIVE_ON_TARGET: len(plan.commits)}, "active on target")
            return GroupSyncPlan([], {ACTIVE_ON_TARGET: len(plan.commits)})
        if group in self._active:
            log.info("group '%s' has no live members on the target any more; syncing it again", group)
            self._active.discard(group)
        log.debug("group '%s': %s", group, ", ".join(f"{c.topic}/{c.partition}->{c.offset}" for c in plan.commits))
        self.state.group_synced(group, len(plan.commits), plan.skipped, "in step")
        return plan
