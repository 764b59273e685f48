"""The assignor's promises, for any members, subscriptions, topics and previous targets (hypothesis)."""

from __future__ import annotations

import os
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from half_store.domain.group_assignor import TopicPartition, assign

Subscriptions = dict[str, frozenset[int]]
Counts = dict[int, int]
Current = dict[str, frozenset[TopicPartition]]

EXAMPLES = int(os.environ.get("HALFMQ_PROPERTY_EXAMPLES", "150"))
TOPICS = st.dictionaries(st.integers(1, 5), st.integers(0, 12), min_size=1, max_size=4)


@st.composite
def groups(draw: st.DrawFn) -> tuple[Subscriptions, Counts, Current]:
    """Members with subscriptions (some to topics that do not exist), and a previous target
    that may be stale: partitions that are gone, owned twice, or of unsubscribed topics."""
    counts = draw(TOPICS)
    names = [*sorted(counts), 99]  # topic 99 is subscribed to but does not exist
    members = draw(st.lists(st.sampled_from([f"m{i}" for i in range(8)]), min_size=1, max_size=8, unique=True))
    subscriptions = {m: frozenset(draw(st.sets(st.sampled_from(names), min_size=1))) for m in members}
    anything = st.tuples(st.sampled_from(names), st.integers(0, 14))
    current = {m: frozenset(draw(st.sets(anything, max_size=10))) for m in [*members, "gone"]}
    return subscriptions, counts, current


def subscribed_partitions(subscriptions: Subscriptions, counts: Counts) -> set[TopicPartition]:
    topics = {t for subscribed in subscriptions.values() for t in subscribed}
    return {(t, p) for t in topics for p in range(counts.get(t, 0))}


@given(groups())
@settings(max_examples=EXAMPLES, deadline=None)
def test_complete_balanced_and_stable(group: tuple[Subscriptions, Counts, Current]) -> None:
    subscriptions, counts, current = group
    target = assign(subscriptions, counts, current)
    # Every subscribed partition has exactly one owner, and that owner subscribes to its topic.
    assert set(target) == set(subscriptions)
    owners = Counter(tp for partitions in target.values() for tp in partitions)
    assert set(owners) == subscribed_partitions(subscriptions, counts)
    assert all(count == 1 for count in owners.values())
    for member, partitions in target.items():
        assert all(topic in subscriptions[member] for topic, _ in partitions)
    # Members of one subscription differ by at most one partition.
    by_subscription: dict[frozenset[int], list[int]] = {}
    for member, partitions in target.items():
        by_subscription.setdefault(subscriptions[member], []).append(len(partitions))
    for loads in by_subscription.values():
        assert max(loads) - min(loads) <= 1
    # Its own answer, given back, is kept as it is: nothing moves without a reason.
    assert assign(subscriptions, counts, target) == target


@st.composite
def balanced_moves(draw: st.DrawFn) -> tuple[Subscriptions, Counts, Current]:
    """One subscription; a valid previous target (each partition at most once), any members."""
    counts = draw(st.dictionaries(st.integers(1, 3), st.integers(1, 12), min_size=1, max_size=3))
    every = sorted((t, p) for t, n in counts.items() for p in range(n))
    members = [f"m{i}" for i in range(draw(st.integers(1, 7)))]
    previous = {tp: draw(st.sampled_from([*members, "gone", None])) for tp in every}
    current = {m: frozenset(tp for tp, owner in previous.items() if owner == m) for m in [*members, "gone"]}
    return dict.fromkeys(members, frozenset(counts)), counts, current


@given(balanced_moves())
@settings(max_examples=EXAMPLES, deadline=None)
def test_as_few_partitions_move_as_balance_allows(group: tuple[Subscriptions, Counts, Current]) -> None:
    """Only partitions above a member's fair share move: a member at or under it keeps all of its own."""
    subscriptions, counts, current = group
    target = assign(subscriptions, counts, current)
    members = sorted(subscriptions)
    total = sum(counts.values())
    share, extra = divmod(total, len(members))
    kept_before = sorted((len(current[m]) for m in members), reverse=True)
    # The fewest moves any balanced target needs: the most loaded members get the larger shares.
    least_moves = sum(max(0, had - (share + 1 if rank < extra else share)) for rank, had in enumerate(kept_before))
    moved = sum(len(current[m] - target[m]) for m in members)
    assert moved == least_moves
    for member in members:
        if len(current[member]) <= share:
            assert current[member] <= target[member]


def test_a_new_member_takes_its_share_from_the_others() -> None:
    before = assign({"a": frozenset({1}), "b": frozenset({1})}, {1: 6}, {})
    assert sorted(len(p) for p in before.values()) == [3, 3]
    after = assign({"a": frozenset({1}), "b": frozenset({1}), "c": frozenset({1})}, {1: 6}, before)
    assert sorted(len(p) for p in after.values()) == [2, 2, 2]
    assert after["a"] <= before["a"] and after["b"] <= before["b"]


def test_a_topic_only_one_member_reads_goes_to_it_first() -> None:
    """The most constrained partitions are placed first, so the others can balance around them."""
    target = assign({"a": frozenset({1}), "b": frozenset({1, 2})}, {1: 4, 2: 4}, {})
    assert target["a"] == {(1, p) for p in range(4)}
    assert target["b"] == {(2, p) for p in range(4)}
