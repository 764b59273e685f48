"""The replicator's pure parts: what a copy looks like, loop prevention, group sync plans, error texts, status."""

from __future__ import annotations

from typing import Any

import orjson

from app.replication.copying import (
    ORIGIN_CLUSTER,
    ORIGIN_OFFSET,
    copy_of,
    encoded_copies,
    progress_group,
    requests_of,
    transactional_id,
)
from app.replication.errors import ClusterError, is_transient
from app.replication.snapshots import Snapshot
from app.replication.state import ReplicationState, now_ms
from app.replication.status import status_lines
from app.replication.subscriptions import ACTIVE_ON_TARGET, NO_SNAPSHOT, NOT_AHEAD, plan_group_sync
from sdk.errors import BrokerUnavailableError, HalfmqError, StorageUnavailableError, TopicNotFoundError
from sdk.models import CommittedOffset


def fetched(offset: int, headers: dict[str, str] | None = None, **value: Any) -> dict[str, Any]:
    return {
        "topic": "t",
        "partition": 0,
        "offset": offset,
        "timestamp": 1234,
        "key": "k",
        "headers": headers or {},
        **(value or {"value": {"n": offset}}),
    }


def test_a_copy_keeps_key_value_headers_and_timestamp_and_names_its_origin() -> None:
    copy = copy_of(fetched(7, {"trace": "x"}), "A", "B")
    assert copy == {
        "key": "k",
        "value": {"n": 7},
        "timestamp": 1234,
        "headers": {"trace": "x", ORIGIN_CLUSTER: "A", ORIGIN_OFFSET: "7"},
    }


def test_binary_and_null_values_are_copied_as_they_came() -> None:
    assert copy_of(fetched(0, value_base64="AAE="), "A", "B")["value_base64"] == "AAE="  # type: ignore[index]
    null = copy_of(fetched(1, value=None), "A", "B")
    assert null is not None and "value" in null and null["value"] is None


def test_a_message_is_never_copied_back_to_its_origin() -> None:
    came_from_b = fetched(3, {ORIGIN_CLUSTER: "B", ORIGIN_OFFSET: "9"})
    assert copy_of(came_from_b, "A", "B") is None


def test_a_message_copied_on_keeps_its_first_origin() -> None:
    # A -> B -> C: C learns the message was produced on A, so C -> A will not copy it back.
    copy = copy_of(fetched(3, {ORIGIN_CLUSTER: "A", ORIGIN_OFFSET: "9"}), "B", "C")
    assert copy is not None and copy["headers"] == {ORIGIN_CLUSTER: "A", ORIGIN_OFFSET: "9"}


def test_copies_are_cut_into_requests_by_count_and_by_size() -> None:
    copies = encoded_copies([fetched(i) for i in range(10)], "A", "B")
    assert [len(run) for run in requests_of(copies, max_messages=4)] == [4, 4, 2]
    big = encoded_copies([fetched(i, value="x" * 600) for i in range(5)], "A", "B")
    assert all(700 < len(copy) < 750 for copy in big)
    runs = list(requests_of(big, max_messages=100, max_bytes=1500))
    assert [len(run) for run in runs] == [2, 2, 1]
    assert [c for run in runs for c in run] == big
    assert [len(run) for run in requests_of(big[:1], max_messages=100, max_bytes=10)] == [1]  # never an empty request


def test_the_encoded_copies_leave_out_what_came_from_the_target() -> None:
    messages = [fetched(0), fetched(1, {ORIGIN_CLUSTER: "B"}), fetched(2)]
    copies = [orjson.loads(c) for c in encoded_copies(messages, "A", "B")]
    assert [c["headers"][ORIGIN_OFFSET] for c in copies] == ["0", "2"]


def test_names_stay_within_the_broker_identifier_limit() -> None:
    assert transactional_id("A", "orders") == "halfmq-replicator.A.orders"
    assert progress_group("A") == "halfmq-replicator.A"
    long_topic = "t" * 249
    name = transactional_id("eu-west", long_topic)
    assert len(name) <= 255 and name != transactional_id("eu-west", "u" * 249)


def offsets(*rows: tuple[str, int, int]) -> list[CommittedOffset]:
    return [CommittedOffset(topic, partition, offset, metadata="consumer's own") for topic, partition, offset in rows]


def test_a_group_sync_commits_translated_offsets_that_move_forward_only() -> None:
    histories = {("t", 0): (Snapshot(0, 0, 0), Snapshot(10, 14, 1)), ("t", 1): (Snapshot(0, 5, 0),)}
    plan = plan_group_sync(
        offsets(("t", 0, 12), ("t", 1, 3), ("other", 0, 99)),
        {("t", 1): 5},  # the target already has partition 1 there: not rewound, not re-committed
        lambda topic, partition: histories.get((topic, partition), ()),
        ["t"],
    )
    assert [(c.topic, c.partition, c.offset, c.metadata) for c in plan.commits] == [("t", 0, 14, "consumer's own")]
    assert plan.skipped == {NOT_AHEAD: 1}


def test_a_group_whose_offsets_moved_on_the_target_is_consumed_there_and_not_synced() -> None:
    histories = {("t", 0): (Snapshot(0, 0, 0), Snapshot(10, 14, 1))}
    plan = plan_group_sync(
        offsets(("t", 0, 12)),
        {("t", 0): 3},
        lambda topic, partition: histories[(topic, partition)],
        ["t"],
        {("t", 0): 0},
    )
    assert plan.commits == [] and plan.skipped == {ACTIVE_ON_TARGET: 1}
    unmoved = plan_group_sync(
        offsets(("t", 0, 12)),
        {("t", 0): 3},
        lambda topic, partition: histories[(topic, partition)],
        ["t"],
        {("t", 0): 3},
    )
    assert [c.offset for c in unmoved.commits] == [14]


def test_a_group_offset_below_every_snapshot_is_left_alone() -> None:
    plan = plan_group_sync(offsets(("t", 0, 2)), {}, lambda topic, partition: (Snapshot(5, 9, 0),), ["t"])
    assert plan.commits == [] and plan.skipped == {NO_SNAPSHOT: 1}


def test_a_refusal_says_which_side_what_was_done_and_which_right_is_missing() -> None:
    refused = HalfmqError("principal repl may not write topic orders", code="FORBIDDEN", status=403)
    error = ClusterError("target", "http://b:8080", "write copies to orders/0", "topic:write on 'orders'", refused)
    text = str(error)
    assert "target (http://b:8080) refused to write copies to orders/0" in text
    assert "FORBIDDEN (403)" in text and "--target-token's principal needs topic:write on 'orders'" in text
    unknown = ClusterError(
        "source", "http://a", "read x", "topic:read", HalfmqError("no", code="UNAUTHENTICATED", status=401)
    )
    assert "--source-token is missing or unknown" in str(unknown)


def test_only_outages_and_server_failures_are_waited_out() -> None:
    def cluster_error(cause: HalfmqError) -> ClusterError:
        return ClusterError("target", "u", "do", "r", cause)

    assert is_transient(cluster_error(BrokerUnavailableError("connection refused")))
    assert is_transient(cluster_error(StorageUnavailableError("db down")))
    assert not is_transient(cluster_error(TopicNotFoundError("gone")))
    assert not is_transient(cluster_error(HalfmqError("no", code="FORBIDDEN", status=403)))


def test_status_shows_lag_in_messages_and_time_and_the_snapshot_age() -> None:
    state = ReplicationState("A", "B")
    state.track("t", [0, 1])
    long_ago = now_ms() - 5000
    state.loaded("t", 0, (Snapshot(0, 0, long_ago), Snapshot(10, 12, long_ago)))
    state.fetched("t", 0, source_end=25, first_timestamp_ms=long_ago)
    state.loaded("t", 1, (Snapshot(4, 4, long_ago),))
    state.fetched("t", 1, source_end=4, first_timestamp_ms=None)
    behind, caught_up = state.partitions()
    assert behind.lag_messages == 15 and behind.lag_ms is not None and behind.lag_ms >= 5000
    assert behind.snapshot_age_ms is not None and behind.snapshot_age_ms >= 5000
    assert (caught_up.lag_messages, caught_up.lag_ms, caught_up.snapshot_age_ms) == (0, 0, 0)
    lines = status_lines(state)
    assert lines[0].startswith("t/0: source 10 of 25, target 12, lag 15 msgs / ")
