"""Replicated subscriptions: consumer groups' committed offsets, translated onto the target.

Every snapshot interval, for each group, the replicator reads the group's committed
offsets on the source, translates each through the partition's snapshots
(:func:`app.replication.snapshots.translate`) and commits the result on the target,
where a consumer that fails over resumes from it. A target offset only moves forward.

The replicator syncs groups that are not consumed on the target: the fail-over case.
A group is taken as consumed there when its offsets on the target changed since the
replicator last wrote them (a consumer failed over and commits there, or the group is
consumed on both sides), or, for consumer groups with members, when the target refuses
the commit because the group has live members (409 ``FENCED_MEMBER_EPOCH``). Such a
group is logged once and skipped, and synced again once it is left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from app.replication.cluster import Cluster
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

QUIET_ROUNDS = 10
"""A group seen consumed on the target is synced again after this many rounds without a sign of it."""


@dataclass(frozen=True, slots=True)
class GroupSyncPlan:
    commits: list[CommittedOffset]
    skipped: dict[str, int]


def plan_group_sync(
    source_offsets: Iterable[CommittedOffset],
    target_offsets: Mapping[tuple[str, int], int],
    history_of: Callable[[str, int], History],
    topics: Iterable[str],
    written: Mapping[tuple[str, int], int] | None = None,
) -> GroupSyncPlan:
    """What to commit on the target for one group: each replicated partition's translated offset, if it is ahead.

    ``written``: what the replicator last committed there per (topic, partition); if the
    target's offset has moved since, the group is consumed on the target and nothing is planned.
    """
    written = written or {}
    moved = [tp for tp, offset in written.items() if target_offsets.get(tp) != offset]
    if moved:
        return GroupSyncPlan([], {ACTIVE_ON_TARGET: len(moved)})
    replicated = set(topics)
    commits: list[CommittedOffset] = []
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
            commits.append(replace(offset, offset=translated, lag=None))  # the source's offset, translated
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
        self._quiet_rounds: dict[str, int] = {}  # groups consumed on the target: rounds since they last were
        self._written: dict[str, dict[tuple[str, int], int]] = {}  # per group: what this replicator committed there

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
        written = self._written.setdefault(group, {})
        plan = plan_group_sync(source_offsets, target_offsets, self.state.history, self.topics, written)
        if plan.skipped.get(ACTIVE_ON_TARGET):
            self._consumed_on_target(group, "its offsets there changed since the replicator wrote them")
            # What they are now is the baseline for noticing whether they still move.
            self._written[group] = {tp: target_offsets[tp] for tp in written if tp in target_offsets}
        if self._quiet_rounds.get(group, QUIET_ROUNDS) < QUIET_ROUNDS:
            self._quiet_rounds[group] += 1
            skipped = {ACTIVE_ON_TARGET: len(plan.commits) + sum(plan.skipped.values())}
            self.state.group_synced(group, 0, skipped, "consumed on target")
            return GroupSyncPlan([], skipped)
        if not plan.commits:
            self._left_alone(group)
            self.state.group_synced(
                group, 0, plan.skipped, "in step" if not plan.skipped.get(NO_SNAPSHOT) else "waiting"
            )
            return plan
        try:
            self.target.commit_group_offsets(group, plan.commits)
        except ClusterError as error:
            if error.code != FENCED_MEMBER_EPOCH:
                raise
            self._consumed_on_target(group, f"it has live members there ({error.cause.message})")
            self.state.group_synced(group, 0, {ACTIVE_ON_TARGET: len(plan.commits)}, "consumed on target")
            return GroupSyncPlan([], {ACTIVE_ON_TARGET: len(plan.commits)})
        self._left_alone(group)
        written.update({(c.topic, c.partition): c.offset for c in plan.commits})
        log.debug("group '%s': %s", group, ", ".join(f"{c.topic}/{c.partition}->{c.offset}" for c in plan.commits))
        self.state.group_synced(group, len(plan.commits), plan.skipped, "in step")
        return plan

    def _consumed_on_target(self, group: str, why: str) -> None:
        if group not in self._quiet_rounds or self._quiet_rounds[group] >= QUIET_ROUNDS:
            log.warning(
                "group '%s' is consumed on the target: %s. Its offsets there are its consumers'; "
                "not syncing it until they are left alone for %d rounds",
                group,
                why,
                QUIET_ROUNDS,
            )
        self._quiet_rounds[group] = 0

    def _left_alone(self, group: str) -> None:
        if group in self._quiet_rounds:
            log.info("group '%s' is no longer consumed on the target; syncing it again", group)
            del self._quiet_rounds[group]
