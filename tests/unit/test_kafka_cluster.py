"""The cluster Kafka clients see, from the broker registry's live processes: pure functions, no broker."""

from __future__ import annotations

from app.kafka.brokers import ClusterView, KafkaNode
from app.kafka.front import live_nodes
from half_store.domain.broker_records import BrokerRecord, kafka_node_id
from half_store.settings import Settings


def record(instance: str, kafka: str | None, grpc: str | None = None) -> BrokerRecord:
    node = None if kafka is None else kafka_node_id(kafka)
    return BrokerRecord(instance, 0, 0, 1, node, kafka, grpc, ())


def test_node_ids_come_from_the_address_so_a_restart_in_place_keeps_its_id() -> None:
    assert kafka_node_id("10.0.0.1:9092") == kafka_node_id("10.0.0.1:9092") != kafka_node_id("10.0.0.2:9092")
    assert 0 <= kafka_node_id("h:1") < 2**31


def test_only_processes_with_a_kafka_listener_are_nodes() -> None:
    nodes = live_nodes([record("a", "h1:9092"), record("b", None, grpc="h2:8081"), record("c", "[::1]:9093")])
    assert [(n.host, n.port) for n in nodes] == [("h1", 9092), ("::1", 9093)]


def test_every_process_computes_the_same_leaders_and_coordinators_and_spreads_them() -> None:
    live = live_nodes([record(f"p{i}", f"h{i}:9092") for i in range(3)])
    views = []
    for me in live:
        view = ClusterView(me, "local")
        view.update(list(reversed(live)))  # the order the registry answers in does not matter
        views.append(view)
    leaders = [[v.leader_of("orders", p).node_id for p in range(6)] for v in views]
    assert leaders[0] == leaders[1] == leaders[2] and len(set(leaders[0])) == 3
    groups = [f"g{i}" for i in range(30)]
    coordinators = [[v.coordinator_for(g).node_id for g in groups] for v in views]
    assert coordinators[0] == coordinators[1] == coordinators[2] and len(set(coordinators[0])) == 3
    assert sum(v.coordinates("g0") for v in views) == 1  # exactly one process answers the group's requests


def test_a_process_always_counts_itself_even_before_its_row_is_read_back() -> None:
    me = KafkaNode(kafka_node_id("me:9092"), "me", 9092)
    view = ClusterView(me, "local")
    view.update(live_nodes([record("other", "other:9092")]))
    assert {n.node_id for n in view.nodes} == {me.node_id, kafka_node_id("other:9092")}


def test_the_expiry_must_outlast_the_heartbeat() -> None:
    assert "HALFMQ_BROKER_EXPIRY_SECONDS" in (
        Settings(broker_heartbeat_seconds=5, broker_expiry_seconds=5).startup_problem() or ""
    )
    assert Settings(broker_heartbeat_seconds=1, broker_expiry_seconds=3).startup_problem() is None
