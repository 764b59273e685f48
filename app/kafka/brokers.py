"""The cluster as Kafka clients see it: the live brokers, who leads each partition, who coordinates a group.

Every broker process on one database can serve every partition (storage is shared), so
leadership only spreads client load: partition ``p`` of a topic is led by the live broker
at ``(hash(topic) + p) % n`` in node-id order, and a group or transactional id is
coordinated by the broker its hash picks. With one broker process, it is all of them.
The live brokers are the broker registry's (app/presence.py), refreshed at every heartbeat;
two processes may disagree for a heartbeat after one joins or dies, and a client sent to
the wrong one is told NOT_COORDINATOR and asks again.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KafkaNode:
    node_id: int
    host: str
    port: int


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


class ClusterView:
    """This process's node and the live nodes it knows; refreshed from the broker registry."""

    def __init__(self, me: KafkaNode, cluster_id: str) -> None:
        self.me = me
        self.cluster_id = cluster_id
        self.nodes: list[KafkaNode] = [me]

    def update(self, nodes: list[KafkaNode]) -> None:
        known = sorted({n.node_id: n for n in [*nodes, self.me]}.values(), key=lambda n: n.node_id)
        self.nodes = known

    def leader_of(self, topic: str, partition: int) -> KafkaNode:
        return self.nodes[(zlib.crc32(topic.encode()) + partition) % len(self.nodes)]

    def coordinator_for(self, key: str) -> KafkaNode:
        return self.nodes[zlib.crc32(key.encode()) % len(self.nodes)]

    def coordinates(self, key: str) -> bool:
        return self.coordinator_for(key).node_id == self.me.node_id
