"""The consumer-group assignor: which member should own which partition (KIP-848, server side).

A pure function of (the members' subscriptions, the partitions of the subscribed topics,
the current target assignment) to the next target assignment. No database, no clock:
``tests/unit/test_group_assignor.py`` checks its promises with hypothesis.

- **Complete, one owner each.** Every partition of a topic at least one member subscribes
  to is assigned to exactly one member, and only to a member that subscribes to its topic.
- **Balanced.** Two members with the same subscription differ by at most one partition.
  Members of different subscriptions are balanced as far as their topics allow.
- **Sticky.** A member keeps every partition of its current target that is still valid,
  unless balance needs it elsewhere; then as few as possible move, and partitions that
  were nobody's before move first. Given its own answer back, it answers the same.

The target is only where partitions should end up. Who owns a partition *now* is the
reconciliation's business (:mod:`half_store.domain.group_state`): a partition moves
cooperatively, one heartbeat at a time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

TopicPartition = tuple[int, int]
"""``(topic id, partition)``."""


def assign(
    subscriptions: Mapping[str, frozenset[int]],
    partition_counts: Mapping[int, int],
    current: Mapping[str, frozenset[TopicPartition]],
) -> dict[str, frozenset[TopicPartition]]:
    """The next target assignment.

    ``subscriptions``: each member's topic ids. ``partition_counts``: partitions per topic
    id (a subscribed topic missing here has none, e.g. it was deleted). ``current``: the
    previous target per member (members not in ``subscriptions`` are gone).
    """
    members = sorted(subscriptions)
    subscribed = {t for m in members for t in subscriptions[m] if partition_counts.get(t, 0) > 0}
    candidates = {t: [m for m in members if t in subscriptions[m]] for t in subscribed}
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    taken: set[TopicPartition] = set()

    # Keep what is still valid: the topic exists, has the partition, and the member subscribes.
    for member in members:
        for tp in sorted(current.get(member, ())):
            topic, partition = tp
            if topic in subscriptions[member] and 0 <= partition < partition_counts.get(topic, 0) and tp not in taken:
                owned[member].add(tp)
                taken.add(tp)
    kept = {m: frozenset(owned[m]) for m in members}

    # Place the rest: the partitions with the fewest possible owners first, each on the least loaded.
    unplaced = [(t, p) for t in subscribed for p in range(partition_counts[t]) if (t, p) not in taken]
    unplaced.sort(key=lambda tp: (len(candidates[tp[0]]), tp))
    for tp in unplaced:
        member = min(candidates[tp[0]], key=lambda m: (len(owned[m]), m))
        owned[member].add(tp)

    _balance(owned, subscriptions, kept)
    return {m: frozenset(owned[m]) for m in members}


def _balance(
    owned: dict[str, set[TopicPartition]],
    subscriptions: Mapping[str, frozenset[int]],
    kept: Mapping[str, frozenset[TopicPartition]],
) -> None:
    """Move one partition at a time from a member to one with at least two fewer that may take it.

    Every move lowers the sum of squared loads, so this ends; it ends only when no such
    pair is left, and two members of one subscription always form one if they differ by two.
    """
    by_topic: dict[str, dict[int, set[TopicPartition]]] = {m: defaultdict(set) for m in owned}
    for member, partitions in owned.items():
        for tp in partitions:
            by_topic[member][tp[0]].add(tp)
    while True:
        move = _next_move(owned, subscriptions, by_topic)
        if move is None:
            return
        donor, receiver, topic = move
        choices = by_topic[donor][topic]
        # Partitions the donor only just received move first: they were nobody's before.
        tp = max(choices, key=lambda c: (c not in kept[donor], c))
        choices.discard(tp)
        owned[donor].discard(tp)
        owned[receiver].add(tp)
        by_topic[receiver][topic].add(tp)


def _next_move(
    owned: Mapping[str, set[TopicPartition]],
    subscriptions: Mapping[str, frozenset[int]],
    by_topic: Mapping[str, Mapping[int, set[TopicPartition]]],
) -> tuple[str, str, int] | None:
    """(donor, receiver, topic) of the most useful move, or None when balanced."""
    loads = sorted(owned, key=lambda m: (-len(owned[m]), m))
    for donor in loads:
        for receiver in reversed(loads):
            if len(owned[receiver]) + 1 >= len(owned[donor]):
                break  # the rest of the receivers are even closer to the donor's load
            for topic in sorted(subscriptions[receiver]):
                if by_topic[donor].get(topic):
                    return donor, receiver, topic
    return None
