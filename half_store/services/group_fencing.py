"""KIP-447 fencing of offset commits: a zombie consumer cannot move its old partitions' offsets.

Run inside the unit that writes the offsets, after the group's row lock, so a heartbeat
that moves a partition and a commit for it are applied one after the other, never
interleaved (on PostgreSQL across broker processes too).

- A group with no live members keeps the v1 behaviour: a commit without a member is
  accepted. A commit that names a member is always checked, even in an empty group: a
  consumer whose session lapsed while it was stalled must not commit just because it
  was the last one.
- A plain commit (``POST /v1/groups/{group}/offsets``) while the group has live members
  must name one of them.
- A transaction's ``add offsets`` that names no member is taken without member checks,
  whatever the group's members: Kafka's TxnOffsetCommit without a member id and with
  generation -1 (the pre-KIP-447 path), which consume-transform-produce by group name
  relies on. Its caller gives up the zombie fencing below and keeps only the producer's
  epoch fencing (docs/consumer-groups.md says what that means).
- A commit that names a member needs the member's current epoch and every partition
  held by it (ASSIGNED, or REVOKING: a member commits before it gives a partition up).
- When the transaction commits, its staged offsets are checked again: the member must
  still be live and still hold each partition, held since no later than the epoch it
  staged them under. Kafka checks only when the offsets are added and makes the next
  owner wait (UNSTABLE_OFFSET_COMMIT) for pending transactional offsets; checking at the
  commit means a zombie's transaction can never commit offsets, nor the outputs that
  go with them, for a partition it lost, and the next owner need not wait.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import Connection

from half_store.domain.errors import FencedMemberEpoch
from half_store.domain.group_assignor import TopicPartition
from half_store.domain.group_records import MemberRef
from half_store.domain.records import Topic, now_ms
from half_store.storage import membership_store
from half_store.storage.txn_store import StagedCommit


def check_commit(
    conn: Connection,
    group: str,
    member: MemberRef | None,
    partitions: Sequence[tuple[Topic, int]],
    *,
    transactional: bool = False,
) -> None:
    """Raise :class:`FencedMemberEpoch` unless ``member`` may commit ``group``'s offsets of ``partitions`` now.

    ``transactional``: the offsets go into a transaction, where a commit naming no member is not checked.
    """
    if member is None and transactional:
        return
    now = now_ms()
    if membership_store.lock_group(conn, group, now, create=False) is None:
        if member is not None:
            raise FencedMemberEpoch(f"{member.member_id!r} is not a member of group {group!r}")
        return
    members = membership_store.members(conn, group)
    if member is None:
        live = sum(1 for m in members.values() if m.live_at(now))
        if live:
            raise FencedMemberEpoch(
                f"group {group!r} has {live} live member(s): commit its offsets with member_id and member_epoch"
            )
        return
    found = members.get(member.member_id)
    if found is None or not found.live_at(now):
        raise FencedMemberEpoch(f"{member.member_id!r} is not a live member of group {group!r}")
    if found.member_epoch != member.member_epoch:
        raise FencedMemberEpoch(
            f"member epoch {member.member_epoch} of {member.member_id!r} is stale: "
            f"the current one is {found.member_epoch}"
        )
    held = membership_store.held_partitions(conn, group, member.member_id)
    for topic, partition in partitions:
        if (topic.topic_id, partition) not in held:
            raise FencedMemberEpoch(f"{member.member_id!r} does not own {topic.name}/{partition} in group {group!r}")


def check_staged(conn: Connection, staged: Sequence[StagedCommit]) -> None:
    """At a transaction's commit: its staged offsets may still be committed (see the module docstring)."""
    now = now_ms()
    by_group: dict[str, list[StagedCommit]] = defaultdict(list)
    for commit in staged:
        by_group[commit.group].append(commit)
    for group, commits in sorted(by_group.items()):
        if all(c.member_id is None for c in commits):
            continue
        if membership_store.lock_group(conn, group, now, create=False) is None:
            raise FencedMemberEpoch(f"the transaction's offsets for group {group!r} were staged by a member it no longer has")
        members = membership_store.members(conn, group)
        held: dict[str, dict[TopicPartition, int | None]] = {}
        for commit in commits:
            if commit.member_id is None:  # staged without a member: not checked (the pre-KIP-447 path)
                continue
            found = members.get(commit.member_id)
            if found is None or not found.live_at(now):
                raise FencedMemberEpoch(f"{commit.member_id!r} is no longer a live member of group {group!r}")
            if commit.member_id not in held:
                owned = membership_store.held_partitions(conn, group, commit.member_id)
                held[commit.member_id] = {tp: o.granted_epoch for tp, o in owned.items()}
            granted = held[commit.member_id].get((commit.topic_id, commit.partition))
            if granted is None or commit.member_epoch is None or granted > commit.member_epoch:
                raise FencedMemberEpoch(
                    f"{commit.member_id!r} no longer owns partition {commit.partition} of topic id {commit.topic_id} "
                    f"in group {group!r} as it did when the offsets were staged"
                )
