"""The operations API: delete and alter topics, list transactions, report on the checker.

Operators and the console call the same service as any client would (Kafka's admin
client, ``kafka-transactions.sh``, RocketMQ's ``mqadmin``). Retention itself is a job
(``half_store/services/retention.py``); this service only sets the limits it applies.
"""

from __future__ import annotations

from sqlalchemy import Connection

from half_store.domain.admin_records import (
    CheckerStatus,
    ProducerGroupStatus,
    TopicAlteration,
    TopicConfig,
    TopicDetails,
    TransactionFilter,
    TransactionListing,
)
from half_store.domain.constants import CHECKER_LEASE, JOB_BACK_CHECK, JOB_RETENTION, is_system_topic
from half_store.domain.errors import ReservedTopic, TopicNotFound
from half_store.domain.records import Topic, now_ms
from half_store.domain.txn_state import TxnState
from half_store.metrics import ADMIN_ACTIONS
from half_store.services.log_service import LogService
from half_store.settings import Settings
from half_store.storage import half_message_store, lease_store, listener_store, log_store, topic_store, txn_store


class AdminService:
    def __init__(self, log: LogService, settings: Settings) -> None:
        self.log = log
        self.store = log.store
        self.settings = settings

    # -- topics -------------------------------------------------------------------------------

    async def describe_topic(self, name: str) -> TopicDetails:
        """Partitions (with what holds each one's last stable offset back) and configuration."""

        def query(conn: Connection) -> TopicDetails:
            topic = log_store.find_topic(conn, name)
            if topic is None:
                raise TopicNotFound(f"topic {name!r} does not exist")
            config = topic_store.config_of(conn, topic.topic_id)
            states = log_store.partition_states(conn, topic)
            return TopicDetails(topic, states, config, self.effective(config))

        return await self.store.read(query)

    def effective(self, config: TopicConfig) -> TopicConfig:
        return config.effective(self.settings.retention_ms, self.settings.retention_bytes)

    async def alter_topic(self, name: str, alteration: TopicAlteration) -> TopicDetails:
        """More partitions and/or retention limits; fewer partitions → 422 INVALID_PARTITIONS.

        Keys are routed by hash modulo the partition count, so after adding partitions some
        keys go to other partitions than before (as in Kafka): per-key order holds from then on.
        """
        refuse_system_topic(name, "altered")

        def unit(conn: Connection) -> Topic:
            topic = topic_store.lock_topic(conn, name, deleting=False)
            if topic is None:
                raise TopicNotFound(f"topic {name!r} does not exist")
            if alteration.partitions is not None:
                topic = topic_store.add_partitions(conn, topic, alteration.partitions)
            if alteration.config:
                topic_store.put_config(conn, topic.topic_id, alteration.config)
            return topic

        try:
            await self.store.write(unit)
        finally:
            self.store.forget_topic(name)  # this process routes by the new partition count at once
        ADMIN_ACTIONS.labels("topic_alter").inc()
        return await self.describe_topic(name)

    async def delete_topic(self, name: str) -> None:
        """Delete a topic; 409 TOPIC_IN_USE while an unfinished transaction or a prepared half message targets it.

        Fetches waiting on it end with 404 TOPIC_NOT_FOUND at once (in other broker
        processes within their next recheck). Its messages are removed afterwards by the
        retention job, in bounded batches; the name can be used again at once.
        """
        refuse_system_topic(name, "deleted")
        known = await self.store.topic(name)

        def unit(conn: Connection) -> Topic:
            topic = topic_store.lock_topic(conn, name, deleting=True)
            if topic is None:
                raise TopicNotFound(f"topic {name!r} does not exist")
            topic_store.refuse_if_in_use(conn, topic)
            topic_store.delete_topic(conn, topic)
            return topic

        # Its partition rows are locked first, in the writers' order, so appends in flight finish first.
        locks = [(known.topic_id, p) for p in range(known.partitions)] if self.store.orders_locks else []
        try:
            deleted = await self.store.write(unit, locks=locks)
        finally:
            self.store.forget_topic(name)
        self.log.notifier.notify((deleted.topic_id, p) for p in range(deleted.partitions))
        ADMIN_ACTIONS.labels("topic_delete").inc()

    # -- transactions ------------------------------------------------------------------------------

    async def list_transactions(self, wanted: TransactionFilter) -> list[TransactionListing]:
        """Transactions by state, age and transactional id, oldest first (hanging ones lead)."""
        started_before = None if wanted.older_than_ms is None else now_ms() - wanted.older_than_ms
        found = await self.store.read(
            lambda conn: txn_store.list_transactions(
                conn, wanted.states, started_before, wanted.transactional_id, wanted.limit
            )
        )
        return [
            TransactionListing(
                txn_id=listed.row.txn_id,
                transactional_id=listed.transactional_id,
                producer_id=listed.row.producer_id,
                producer_epoch=listed.row.producer_epoch,
                state=listed.row.state,
                partitions=listed.partitions,
                started_ms=listed.row.started_at,
                # An open transaction's row is touched by every write; its state has not changed since it began.
                last_state_change_ms=listed.row.started_at if listed.row.state is TxnState.OPEN else listed.updated_at,
                timeout_ms=listed.row.timeout_ms,
            )
            for listed in found
        ]

    # -- the checker ---------------------------------------------------------------------------------

    async def checker_status(self) -> CheckerStatus:
        """Who runs the checker, when it last went round, and what waits for it per producer group."""
        now = now_ms()

        def query(conn: Connection) -> CheckerStatus:
            lease = lease_store.holder_of(conn, CHECKER_LEASE)
            rounds = lease_store.last_rounds(conn)
            prepared = half_message_store.prepared_by_group(conn)
            listeners = listener_store.live_listener_counts(conn, now)
            groups = [
                ProducerGroupStatus(
                    group,
                    prepared.get(group, (0, 0))[0],
                    prepared[group][1] if group in prepared else None,
                    listeners.get(group, 0),
                )
                for group in sorted(set(prepared) | set(listeners))
            ]
            return CheckerStatus(
                leader=lease[0] if lease is not None and lease[1] >= now else None,
                lease_expires_ms=None if lease is None else lease[1],
                last_round_ms=rounds.get(JOB_BACK_CHECK),
                last_retention_ms=rounds.get(JOB_RETENTION),
                prepared=sum(count for count, _ in prepared.values()),
                groups=groups,
            )

        return await self.store.read(query)


def refuse_system_topic(name: str, done: str) -> None:
    if is_system_topic(name):
        raise ReservedTopic(f"{name!r} is a system topic; it cannot be {done}")
