"""Replication between clusters, with replicated subscriptions (``halfmq replicate``).

A client of the HTTP API on both sides, like Spark: it reads committed messages from
the source and writes their copies to the target inside a Kafka-style transaction that
also records how far it got, in its own consumer group on the target, so its progress
and its output commit together. It imports the SDK, never the broker's code.
``docs/replication.md`` describes the algorithm and its guarantees.
"""

from app.replication.errors import (
    ClusterError,
    ProducerFenced,
    ReplicationError,
    SameCluster,
    TopicMismatch,
    TopicMissing,
)
from app.replication.replicator import Replicator, ReplicatorConfig
from app.replication.state import ReplicationState

__all__ = [
    "ClusterError",
    "ProducerFenced",
    "ReplicationError",
    "ReplicationState",
    "Replicator",
    "ReplicatorConfig",
    "SameCluster",
    "TopicMismatch",
    "TopicMissing",
]
