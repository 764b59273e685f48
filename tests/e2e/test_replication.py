"""Replication between two real clusters by a real ``python -m app replicate`` process.

Two broker processes on separate databases (SQLite files; PostgreSQL for one side
where marked) named A and B. What a user would check: everything committed on A is
on B once, in order, with its key, headers and timestamp; nothing uncommitted ever
is; a SIGKILLed replicator neither loses nor repeats a message; two replicators in
opposite directions do not echo; a consumer group that fails over to B skips nothing.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.broker_process import BrokerProcess, wait_for
from tests.support.databases import PostgresDatabases
from tests.support.replicator_process import ReplicatorProcess, read_partition

pytestmark = pytest.mark.e2e

ORIGIN = "halfmq-origin-cluster"
ORIGIN_OFFSET = "halfmq-origin-offset"
STARTUP_SECONDS = 90  # two brokers start at once, on a machine other test runs may share


def start_cluster(name: str, database_url: str, log_path: Path) -> BrokerProcess:
    return BrokerProcess(database_url, log_path=log_path, cluster_name=name).start(timeout=STARTUP_SECONDS)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    """Clusters A and B, each one broker on its own SQLite file, shared by the module's tests (topics are unique)."""
    path = tmp_path_factory.mktemp("clusters")
    a, b = (BrokerProcess(f"sqlite:///{path}/{n}.db", log_path=path / f"{n}.log", cluster_name=n) for n in "AB")
    try:
        with ThreadPoolExecutor(2) as pool:  # they start in parallel
            list(pool.map(lambda broker: broker.start(timeout=STARTUP_SECONDS), (a, b)))
        yield a, b
    finally:
        for broker in (a, b):
            broker.stop()  # a no-op for one that never started


@pytest.fixture
def replicators(tmp_path: Path) -> Iterator[Callable[..., ReplicatorProcess]]:
    """``replicators(source, target, topics, **options)``: started replicator processes, stopped after the test."""
    started: list[ReplicatorProcess] = []

    def start(source: BrokerProcess, target: BrokerProcess, topics: list[str], **options: Any) -> ReplicatorProcess:
        process = ReplicatorProcess(
            source.url, target.url, topics, tmp_path / f"replicator-{len(started)}.log", **options
        )
        started.append(process)
        return process.start()

    yield start
    for process in started:
        process.stop()


def new_topic(*brokers: BrokerProcess, partitions: int = 1) -> str:
    name = f"r-{uuid.uuid4().hex[:10]}"
    for broker in brokers:
        assert httpx.post(f"{broker.url}/v1/topics", json={"name": name, "partitions": partitions}).status_code == 201
    return name


def produce(broker: BrokerProcess, topic: str, messages: list[dict[str, Any]]) -> list[tuple[int, int]]:
    answer = httpx.post(f"{broker.url}/v1/topics/{topic}/messages", json={"messages": messages}, timeout=10)
    assert answer.status_code == 200, answer.text
    return [(o["partition"], o["offset"]) for o in answer.json()["offsets"]]


def transaction(broker: BrokerProcess, topic: str, partition: int, values: list[Any], *, commit: bool | None) -> str:
    """A Kafka-style transaction writing ``values``; committed, aborted, or (``None``) left open."""
    with httpx.Client(base_url=broker.url, timeout=10) as client:
        txn_id = client.post("/v1/transactions", json={}).json()["txn_id"]
        written = client.post(
            f"/v1/topics/{topic}/partitions/{partition}/messages",
            json={"messages": [{"value": v} for v in values], "txn_id": txn_id},
        )
        assert written.status_code == 200, written.text
        if commit is not None:
            assert client.post(f"/v1/transactions/{txn_id}/{'commit' if commit else 'abort'}").status_code == 200
    return txn_id


def half_message(broker: BrokerProcess, topic: str, value: Any, resolve: str | None) -> str:
    with httpx.Client(base_url=broker.url, timeout=10) as client:
        prepared = client.post(
            "/v1/half-messages", json={"topic": topic, "producer_group": "shop", "value": value, "partition": 0}
        )
        assert prepared.status_code == 201, prepared.text
        message_id = str(prepared.json()["message_id"])
        if resolve is not None:
            assert client.post(f"/v1/half-messages/{message_id}/{resolve}").status_code == 200
    return message_id


def as_copied(message: dict[str, Any], origin: str) -> dict[str, Any]:
    """What the copy of a fetched message must look like on the other cluster."""
    headers = dict(message["headers"])
    headers.setdefault(ORIGIN, origin)
    headers.setdefault(ORIGIN_OFFSET, str(message["offset"]))
    kept = {k: message[k] for k in ("partition", "key", "timestamp") if k in message}
    value = {"value_base64": message["value_base64"]} if "value_base64" in message else {"value": message.get("value")}
    return {**kept, **value, "headers": headers}


def comparable(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in ("offset", "topic")}


def test_committed_messages_are_copied_in_order_and_nothing_uncommitted_ever_is(
    clusters: tuple[BrokerProcess, BrokerProcess], replicators: Callable[..., ReplicatorProcess]
) -> None:
    a, b = clusters
    topic = new_topic(a, partitions=2)  # not on B: the replicator creates it with two partitions
    produce(
        a,
        topic,
        [
            {
                "key": "k1",
                "value": {"n": 1},
                "headers": {"trace": "t1"},
                "partition": 0,
                "timestamp": 1_600_000_000_000,
            },
            {"key": None, "value_base64": "AAEC/w==", "partition": 1},
            {"key": "k3", "value": None, "partition": 0},
        ],
    )
    transaction(a, topic, 0, ["aborted-1", "aborted-2"], commit=False)
    transaction(a, topic, 1, ["committed-txn"], commit=True)
    half_message(a, topic, "rolled-back-half", "rollback")
    half_message(a, topic, "committed-half", "commit")
    half_message(a, topic, "prepared-half", None)
    still_open = transaction(a, topic, 1, ["open-txn"], commit=None)
    produce(a, topic, [{"key": "after", "value": 4, "partition": 0}])

    replicator = replicators(a, b, [topic])
    expected = {p: [as_copied(m, "A") for m in read_partition(a.url, topic, p)] for p in (0, 1)}
    assert [m["value"] for m in expected[0] if "value" in m] == [{"n": 1}, None, "committed-half", 4]
    wait_for(lambda: all(len(read_partition(b.url, topic, p)) == len(expected[p]) for p in (0, 1)), "the copies")
    for partition in (0, 1):
        assert [comparable(m) for m in read_partition(b.url, topic, partition)] == expected[partition]
    assert len(httpx.get(f"{b.url}/v1/topics/{topic}").json()["partitions"]) == 2

    # The open transaction's message appears on B once it commits on A, not before.
    assert httpx.post(f"{a.url}/v1/transactions/{still_open}/commit").status_code == 200
    wait_for(lambda: len(read_partition(b.url, topic, 1)) == len(expected[1]) + 1, "the late commit's copy")
    copied_values = [m.get("value") for p in (0, 1) for m in read_partition(b.url, topic, p)]
    assert "open-txn" in copied_values
    for never in ("aborted-1", "aborted-2", "rolled-back-half", "prepared-half"):
        assert never not in copied_values
    assert replicator.stop() == 0


def test_sigkilled_replicators_under_load_leave_every_message_on_the_target_exactly_once(
    clusters: tuple[BrokerProcess, BrokerProcess], replicators: Callable[..., ReplicatorProcess]
) -> None:
    a, b = clusters
    topic = new_topic(a, partitions=2)
    stop = threading.Event()
    rng = random.Random(20)
    aborted: list[str] = []

    def load() -> None:
        n = 0
        while not stop.is_set():
            partition = n % 2
            if n % 5 == 4:  # a transaction now and then, one in three aborted
                values = [f"txn-{n}-{i}" for i in range(3)]
                transaction(a, topic, partition, values, commit=n % 3 != 0)
                aborted.extend(values if n % 3 == 0 else [])
            else:
                produce(a, topic, [{"key": str(n), "value": f"m-{n}-{i}", "partition": partition} for i in range(20)])
            n += 1

    producer = threading.Thread(target=load, daemon=True)
    producer.start()
    try:
        for _kill in range(4):
            replicator = replicators(a, b, [topic], extra=["--batch-messages", "50"])
            before = sum(len(read_partition(b.url, topic, p)) for p in (0, 1))
            wait_for(
                lambda before=before: sum(len(read_partition(b.url, topic, p)) for p in (0, 1)) > before, "progress"
            )
            threading.Event().wait(rng.uniform(0, 0.3))  # then die somewhere in the middle of whatever it does
            replicator.kill()
    finally:
        stop.set()
        producer.join(30)
    replicator = replicators(a, b, [topic])
    wait_for(lambda: replicator.caught_up(a.url, topic), "the last replicator to catch up", timeout=60)
    for partition in (0, 1):
        source = read_partition(a.url, topic, partition)
        copies = read_partition(b.url, topic, partition)
        assert [m["headers"][ORIGIN_OFFSET] for m in copies] == [str(m["offset"]) for m in source]
        assert [m["value"] for m in copies] == [m["value"] for m in source]
    assert aborted and not {m["value"] for p in (0, 1) for m in read_partition(b.url, topic, p)} & set(aborted)


def test_two_way_replication_does_not_echo(
    clusters: tuple[BrokerProcess, BrokerProcess], replicators: Callable[..., ReplicatorProcess]
) -> None:
    a, b = clusters
    topic = new_topic(a, b)
    a_to_b = replicators(a, b, [topic])
    b_to_a = replicators(b, a, [topic])
    for round_ in range(5):
        produce(a, topic, [{"value": f"a-{round_}-{i}"} for i in range(4)])
        produce(b, topic, [{"value": f"b-{round_}-{i}"} for i in range(4)])
    wait_for(lambda: a_to_b.caught_up(a.url, topic) and b_to_a.caught_up(b.url, topic), "both directions to catch up")
    # Each replicator saw the other's 20 copies on its source, and copied none of them back.
    assert a_to_b.metric("halfmq_replication_messages_skipped_total", topic=topic, reason="loop") == 20
    assert b_to_a.metric("halfmq_replication_messages_skipped_total", topic=topic, reason="loop") == 20
    for here, there in ((a, "B"), (b, "A")):
        values = [m["value"] for m in read_partition(here.url, topic, 0)]
        assert sorted(values) == sorted([f"{side}-{r}-{i}" for side in "ab" for r in range(5) for i in range(4)])
        copies = [m for m in read_partition(here.url, topic, 0) if ORIGIN in m["headers"]]
        assert len(copies) == 20 and {m["headers"][ORIGIN] for m in copies} == {there}


@pytest.fixture(params=["sqlite", "postgresql"])
def source_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerProcess]:
    """A source cluster S of its own, on SQLite or on PostgreSQL."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/s.db"
    else:
        databases: PostgresDatabases = request.getfixturevalue("postgres_databases")
        url = databases.new()
    broker = start_cluster("S", url, tmp_path / "s.log")
    yield broker
    broker.stop()


def test_a_consumer_group_fails_over_to_the_target_without_skipping_a_message(
    source_cluster: BrokerProcess,
    clusters: tuple[BrokerProcess, BrokerProcess],
    replicators: Callable[..., ReplicatorProcess],
) -> None:
    source, (_, target) = source_cluster, clusters
    topic, group = new_topic(source), f"g-{uuid.uuid4().hex[:8]}"
    replicator = replicators(source, target, [topic], groups=[group], snapshot_interval_ms=100)
    consumed: list[int] = []
    position = 0
    for round_ in range(12):
        produce(source, topic, [{"value": f"v-{round_}-{i}"} for i in range(10)])
        if round_ % 4 == 1:
            transaction(source, topic, 0, ["aborted"] * 3, commit=False)  # offsets on S and B stop matching
        wait_for(lambda: replicator.caught_up(source.url, topic), "the copies")
        # The consumer on S reads a few messages and commits, while replication goes on.
        page = httpx.get(
            f"{source.url}/v1/topics/{topic}/partitions/0/messages", params={"offset": position, "max_messages": 7}
        ).json()
        consumed += [m["offset"] for m in page["messages"]]
        position = page["messages"][-1]["offset"] + 1
        offsets = {"offsets": [{"topic": topic, "partition": 0, "offset": position}]}
        assert httpx.post(f"{source.url}/v1/groups/{group}/offsets", json=offsets).status_code == 200

    def rounds_in_step() -> float:
        name = "halfmq_replication_group_offsets_not_synced_total"
        return replicator.metric(name, group=group, reason="not_ahead") or 0

    # Two more sync rounds that find B in step: the second began after the last commit on S.
    seen = rounds_in_step()
    wait_for(lambda: rounds_in_step() >= seen + 2, "sync rounds after the last commit")
    settled = httpx.get(f"{target.url}/v1/groups/{group}/offsets").json()["offsets"][0]["offset"]

    # Fail over: the consumer resumes on B from the group's offset there.
    resumed = read_partition(target.url, topic, 0, offset=settled)
    origins = [int(m["headers"][ORIGIN_OFFSET]) for m in resumed]
    not_yet_consumed = [m["offset"] for m in read_partition(source.url, topic, 0) if m["offset"] >= position]
    assert [o for o in origins if o >= position] == not_yet_consumed  # nothing skipped, in order
    re_read = [o for o in origins if o < position]
    assert re_read == consumed[len(consumed) - len(re_read) :]  # only a tail of what S's consumer had read
    assert len(re_read) < len(consumed)  # snapshots kept it to what arrived since the last one, not everything

    # The consumer now commits on B; the group is consumed there, and the replicator leaves it
    # alone even when the old side commits further.
    on_b = {"offsets": [{"topic": topic, "partition": 0, "offset": resumed[3]["offset"]}]}
    assert httpx.post(f"{target.url}/v1/groups/{group}/offsets", json=on_b).status_code == 200
    on_a = {"offsets": [{"topic": topic, "partition": 0, "offset": position + 5}]}
    assert httpx.post(f"{source.url}/v1/groups/{group}/offsets", json=on_a).status_code == 200

    def rounds_consumed_on_target() -> float:
        name = "halfmq_replication_group_offsets_not_synced_total"
        return replicator.metric(name, group=group, reason="active_on_target") or 0

    wait_for(lambda: rounds_consumed_on_target() >= 2, "sync rounds that find the group consumed on B")
    assert httpx.get(f"{target.url}/v1/groups/{group}/offsets").json()["offsets"][0]["offset"] == resumed[3]["offset"]


def test_bad_input_stops_the_replicator_with_a_reason_and_an_exit_code(
    clusters: tuple[BrokerProcess, BrokerProcess], replicators: Callable[..., ReplicatorProcess]
) -> None:
    a, b = clusters
    topic = new_topic(a, partitions=2)
    assert httpx.post(f"{b.url}/v1/topics", json={"name": topic, "partitions": 3}).status_code == 201
    mismatch = replicators(a, b, [topic])
    assert mismatch.wait_exit() == 4
    assert f"topic '{topic}' has 2 partition(s) on the source and 3 on the target" in mismatch.log_text()

    missing = replicators(a, b, ["no-such-topic"])
    assert missing.wait_exit() == 3
    assert "topic 'no-such-topic' does not exist on the source" in missing.log_text()

    same = replicators(a, a, [topic])
    assert same.wait_exit() == 1
    assert "both call themselves 'A'" in same.log_text()


def test_an_unreachable_target_is_waited_for_and_replication_then_proceeds(
    clusters: tuple[BrokerProcess, BrokerProcess], replicators: Callable[..., ReplicatorProcess], tmp_path: Path
) -> None:
    a, _ = clusters
    topic = new_topic(a)
    produce(a, topic, [{"value": i} for i in range(5)])
    late = BrokerProcess(f"sqlite:///{tmp_path}/late.db", log_path=tmp_path / "late.log", cluster_name="LATE")
    replicator = replicators(a, late, [topic])
    wait_for(
        lambda: "unreachable" in replicator.log_text() and "retrying in" in replicator.log_text(), "the retry log line"
    )
    assert replicator.process.poll() is None  # waiting, not crashing
    late.start(timeout=STARTUP_SECONDS)
    try:
        wait_for(lambda: len(read_partition(late.url, topic, 0)) == 5, "the copies on the late target", timeout=60)
        # The target dies in the middle of the run and comes back on the same database.
        noticed = replicator.log_text().count("unreachable")
        late.kill()
        produce(a, topic, [{"value": i} for i in range(5, 40)])
        wait_for(lambda: replicator.log_text().count("unreachable") > noticed, "the outage to be noticed")
        late.start(timeout=STARTUP_SECONDS)
        wait_for(lambda: replicator.caught_up(a.url, topic), "the replicator to catch up after the outage", timeout=60)
        assert [m["value"] for m in read_partition(late.url, topic, 0)] == list(range(40))
        assert replicator.process.poll() is None
    finally:
        replicator.stop()
        late.stop()
