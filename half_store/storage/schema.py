"""The table definitions every storage module queries.

This is a description for SQLAlchemy Core, not a way to create tables: only the
Alembic migrations in ``migrations/`` create or change tables, and a test diffs
the two so they cannot drift. All timestamps are milliseconds since the epoch.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from half_store.domain.constants import CONTROL_NONE, VALUE_JSON

# SQLite only auto-increments an INTEGER PRIMARY KEY.
BigId = BigInteger().with_variant(Integer, "sqlite")

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

topics = Table(
    "topics",
    metadata,
    Column("topic_id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(249), nullable=False, unique=True),
    Column("partitions", Integer, nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

partitions = Table(
    "partitions",
    metadata,
    Column("topic_id", Integer, ForeignKey("topics.topic_id"), primary_key=True),
    Column("partition", Integer, primary_key=True, autoincrement=False),
    # The high watermark: the offset the next appended message gets.
    Column("next_offset", BigInteger, nullable=False, default=0),
    Column("log_start_offset", BigInteger, nullable=False, default=0),
)

messages = Table(
    "messages",
    metadata,
    Column("topic_id", Integer, primary_key=True, autoincrement=False),
    Column("partition", Integer, primary_key=True, autoincrement=False),
    Column("offset", BigInteger, primary_key=True, autoincrement=False),
    Column("key", Text, nullable=True),
    Column("value", LargeBinary, nullable=False),
    Column("value_kind", SmallInteger, nullable=False, default=VALUE_JSON),
    Column("headers", Text, nullable=True),  # JSON object; NULL when empty
    Column("timestamp", BigInteger, nullable=False),
    Column("producer_id", BigInteger, nullable=True),
    Column("producer_epoch", Integer, nullable=True),
    Column("sequence", Integer, nullable=True),
    Column("txn_id", String(64), nullable=True),
    Column("control", SmallInteger, nullable=False, default=CONTROL_NONE),
    Column("properties", Text, nullable=True),  # system properties (half topic), JSON
    # How many offsets the row covers, from ``offset``: more than one for a record batch
    # (value_kind VALUE_BATCH, the records in ``value``, see half_store.storage.record_batch).
    Column("record_count", Integer, nullable=False, default=1, server_default="1"),
)
Index(
    "ix_messages_producer_sequence",
    messages.c.topic_id,
    messages.c.partition,
    messages.c.producer_id,
    messages.c.sequence,
    sqlite_where=messages.c.producer_id.isnot(None),
    postgresql_where=messages.c.producer_id.isnot(None),
)

group_offsets = Table(
    "group_offsets",
    metadata,
    Column("group_id", String(255), primary_key=True),
    Column("topic_id", Integer, primary_key=True, autoincrement=False),
    Column("partition", Integer, primary_key=True, autoincrement=False),
    Column("offset", BigInteger, nullable=False),
    Column("metadata", Text, nullable=True),
    Column("updated_at", BigInteger, nullable=False),
)

producers = Table(
    "producers",
    metadata,
    Column("producer_id", BigId, primary_key=True, autoincrement=True),
    Column("transactional_id", String(255), nullable=True, unique=True),
    Column("epoch", Integer, nullable=False),
    Column("transaction_timeout_ms", Integer, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("last_used_at", BigInteger, nullable=False),
    # Who obtained the id (InitProducerId); NULL: obtained with authentication off. Only it and the admin use it.
    Column("principal", String(128), nullable=True),
)

# Per producer and partition: where its sequence stands (Kafka's producer state).
producer_sequences = Table(
    "producer_sequences",
    metadata,
    Column("producer_id", BigInteger, primary_key=True, autoincrement=False),
    Column("topic_id", Integer, primary_key=True, autoincrement=False),
    Column("partition", Integer, primary_key=True, autoincrement=False),
    Column("epoch", Integer, nullable=False),
    Column("last_sequence", Integer, nullable=False),
)

transactions = Table(
    "transactions",
    metadata,
    Column("txn_id", String(64), primary_key=True),
    Column("producer_id", BigInteger, nullable=True),
    Column("producer_epoch", Integer, nullable=True),
    Column("state", String(16), nullable=False),
    Column("timeout_ms", Integer, nullable=False),
    # Set when the broker aborts it for its timeout, so recovery ends it as TIMED_OUT.
    Column("timed_out", Boolean, nullable=False, default=False),
    Column("started_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)
Index("ix_transactions_state_expires_at", transactions.c.state, transactions.c.expires_at)
Index("ix_transactions_producer_id", transactions.c.producer_id)

# The partitions a transaction wrote to (Kafka's AddPartitionsToTxn record). While
# marker_offset is NULL the transaction holds the partition's last stable offset at
# first_offset; once ended, aborted rows are the aborted-range index read_committed uses.
transaction_partitions = Table(
    "transaction_partitions",
    metadata,
    Column("txn_id", String(64), primary_key=True),
    Column("topic_id", Integer, primary_key=True, autoincrement=False),
    Column("partition", Integer, primary_key=True, autoincrement=False),
    Column("first_offset", BigInteger, nullable=False),
    Column("marker_offset", BigInteger, nullable=True),
    Column("aborted", Boolean, nullable=False, default=False),
)
Index(
    "ix_transaction_partitions_topic_id_partition_first_offset",
    transaction_partitions.c.topic_id,
    transaction_partitions.c.partition,
    transaction_partitions.c.first_offset,
)

# What the last stable offset query reads: only open transactions' rows, however long the history.
Index(
    "ix_transaction_partitions_open",
    transaction_partitions.c.topic_id,
    transaction_partitions.c.partition,
    transaction_partitions.c.first_offset,
    sqlite_where=transaction_partitions.c.marker_offset.is_(None),
    postgresql_where=transaction_partitions.c.marker_offset.is_(None),
)

# What a read_committed fetch asks: the aborted transactions overlapping the offsets it
# read. Through the index above that walked every transaction of the partition below the
# page; aborted ones are few, and ordered by their marker the walk starts at the page.
Index(
    "ix_transaction_partitions_aborted",
    transaction_partitions.c.topic_id,
    transaction_partitions.c.partition,
    transaction_partitions.c.marker_offset,
    sqlite_where=transaction_partitions.c.aborted.is_(True),
    postgresql_where=transaction_partitions.c.aborted.is_(True),
)

transaction_offsets = Table(
    "transaction_offsets",
    metadata,
    Column("txn_id", String(64), primary_key=True),
    Column("group_id", String(255), primary_key=True),
    Column("topic_id", Integer, primary_key=True, autoincrement=False),
    Column("partition", Integer, primary_key=True, autoincrement=False),
    Column("offset", BigInteger, nullable=False),
    Column("metadata", Text, nullable=True),
    # Who staged them, when it was a group member: checked again when the transaction commits.
    Column("member_id", String(64), nullable=True),
    Column("member_epoch", Integer, nullable=True),
)

# Mode 1: the index over RMQ_SYS_TRANS_HALF_TOPIC. The message itself lives in the log.
half_messages = Table(
    "half_messages",
    metadata,
    Column("message_id", String(64), primary_key=True),
    Column("half_offset", BigInteger, nullable=False, unique=True),
    Column("producer_group", String(255), nullable=False),
    Column("transaction_id", String(255), nullable=False),
    Column("topic_id", Integer, nullable=False),
    Column("partition", Integer, nullable=False),
    Column("born_timestamp", BigInteger, nullable=False),
    Column("check_immunity_ms", BigInteger, nullable=False),
    Column("check_times", Integer, nullable=False, default=0),
    # When the message may next be checked; NULL once resolved.
    Column("next_check_at", BigInteger, nullable=True),
    UniqueConstraint("producer_group", "transaction_id"),
)
Index("ix_half_messages_next_check_at", half_messages.c.next_check_at)

# The broker processes on this database (one registry for every front): each heartbeats its row
# with the addresses its Kafka and RocketMQ listeners advertise (NULL: that front is off), the
# Kafka node id, and its RocketMQ client sessions as JSON for the admin API. A row whose
# expires_at has passed is a dead process: Metadata and QueryRoute leave it out.
brokers = Table(
    "brokers",
    metadata,
    Column("instance_id", String(128), primary_key=True),
    Column("kafka_node_id", Integer, nullable=True),
    Column("kafka_address", String(255), nullable=True),
    Column("grpc_address", String(255), nullable=True),
    Column("rocketmq_sessions", Text, nullable=False),
    Column("started_at", BigInteger, nullable=False),
    Column("heartbeat_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
)

# Delay messages: the index over RMQ_SYS_SCHEDULE_TOPIC. A row is delivered once: the move into
# its topic and setting delivered_at (a compare-and-set on NULL) are one transaction.
scheduled_messages = Table(
    "scheduled_messages",
    metadata,
    Column("message_id", String(64), primary_key=True),
    Column("schedule_offset", BigInteger, nullable=False, unique=True),
    Column("topic_id", Integer, nullable=False),
    Column("partition", Integer, nullable=False),
    Column("deliver_at", BigInteger, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    # NULL while waiting; the offset it got in its topic (NULL if the topic was deleted meanwhile).
    Column("delivered_at", BigInteger, nullable=True),
    Column("delivered_offset", BigInteger, nullable=True),
)
Index("ix_scheduled_messages_waiting", scheduled_messages.c.deliver_at, scheduled_messages.c.delivered_at)

# Mode 1: the index over RMQ_SYS_TRANS_OP_HALF_TOPIC. Its primary key is what makes
# a half message resolvable at most once, whoever races to resolve it.
half_resolutions = Table(
    "half_resolutions",
    metadata,
    Column("message_id", String(64), primary_key=True),
    Column("outcome", String(16), nullable=False),
    Column("topic_id", Integer, nullable=True),
    Column("partition", Integer, nullable=True),
    Column("offset", BigInteger, nullable=True),
    Column("op_offset", BigInteger, nullable=False),
    Column("resolved_by", String(16), nullable=False),
    Column("resolved_at", BigInteger, nullable=False),
)
Index("ix_half_resolutions_resolved_at", half_resolutions.c.resolved_at)

producer_listeners = Table(
    "producer_listeners",
    metadata,
    Column("producer_group", String(255), primary_key=True),
    Column("instance_id", String(255), primary_key=True),
    Column("callback_url", Text, nullable=True),  # NULL: a polling producer
    Column("secret", Text, nullable=True),
    Column("ttl_seconds", Integer, nullable=False),
    Column("heartbeat_at", BigInteger, nullable=False),
)

# Which broker process runs the background jobs (one at a time).
leases = Table(
    "leases",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("holder", String(128), nullable=False),
    Column("expires_at", BigInteger, nullable=False),
)

# -- authentication and authorization (docs/security.md) --------------------------------

principals = Table(
    "principals",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("created_at", BigInteger, nullable=False),
)

# A token is stored only as the SHA-256 of its secret; token_id is public (it names the token).
auth_tokens = Table(
    "auth_tokens",
    metadata,
    Column("token_id", String(16), primary_key=True),
    Column("principal", String(128), ForeignKey("principals.name"), nullable=False),
    Column("secret_hash", LargeBinary, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    # The token's RocketMQ secret key (half_store.domain.access.rocketmq_secret_key), never the token.
    Column("rocketmq_secret", String(64), nullable=True),
)
Index("ix_auth_tokens_principal", auth_tokens.c.principal)

acls = Table(
    "acls",
    metadata,
    Column("acl_id", String(32), primary_key=True),
    Column("principal", String(128), nullable=False),  # a principal's name, or * for every one
    Column("resource_type", String(32), nullable=False),
    Column("pattern", String(255), nullable=False),
    Column("pattern_type", String(16), nullable=False),
    Column("operations", String(64), nullable=False),  # sorted, comma-separated
    Column("permission", String(8), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    UniqueConstraint(
        "principal", "resource_type", "pattern", "pattern_type", "operations", "permission", name="uq_acls_rule"
    ),
)

# One row: bumped by every change of principals, tokens or ACLs, in the same transaction,
# so every broker process learns of a change by reading one number.
auth_version = Table(
    "auth_version",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("version", BigInteger, nullable=False),
)

# -- operations and administration (issue 21) ----------------------------------------------

# A topic's own settings; a NULL value (or no row) means the broker's default
# (HALFMQ_RETENTION_MS / HALFMQ_RETENTION_BYTES), -1 means keep forever.
topic_configs = Table(
    "topic_configs",
    metadata,
    Column("topic_id", Integer, primary_key=True, autoincrement=False),
    Column("retention_ms", BigInteger, nullable=True),
    Column("retention_bytes", BigInteger, nullable=True),
    Column("updated_at", BigInteger, nullable=False),
)

# Topics that were deleted. Their ids are never handed out again (SQLite would otherwise
# reuse the highest id), and their messages are removed in bounded batches afterwards
# by the retention job, until ``purged``.
deleted_topics = Table(
    "deleted_topics",
    metadata,
    Column("topic_id", Integer, primary_key=True, autoincrement=False),
    Column("name", String(249), nullable=False),
    Column("deleted_at", BigInteger, nullable=False),
    Column("purged", Boolean, nullable=False, default=False),
)

# Size-based retention counts each message's bytes once when it passes ``counted_to``
# and subtracts them when retention deletes it: ``counted_bytes`` is the size of the
# partition's messages in [log_start_offset, counted_to).
retention_cursors = Table(
    "retention_cursors",
    metadata,
    Column("topic_id", Integer, primary_key=True, autoincrement=False),
    Column("partition", Integer, primary_key=True, autoincrement=False),
    Column("counted_to", BigInteger, nullable=False),
    Column("counted_bytes", BigInteger, nullable=False),
)

# The last few back-checks of each half message, a ring of CHECK_HISTORY_KEPT slots per
# message (slot = the check's number modulo that), so it stays bounded without deletes.
# ``answer`` is NULL while the check awaits its answer.
half_checks = Table(
    "half_checks",
    metadata,
    Column("message_id", String(64), primary_key=True),
    Column("slot", Integer, primary_key=True, autoincrement=False),
    Column("at_ms", BigInteger, nullable=False),
    Column("instance_id", String(255), nullable=True),
    Column("answer", String(16), nullable=True),
    Column("latency_ms", BigInteger, nullable=True),
)

# When each background job last finished a round, and in which broker process.
job_rounds = Table(
    "job_rounds",
    metadata,
    Column("job", String(64), primary_key=True),
    Column("holder", String(128), nullable=False),
    Column("finished_at", BigInteger, nullable=False),
)

# -- consumer groups with members (KIP-848) -----------------------------------------------

# One row per group that ever had a member. Every change to a group's members and
# partitions locks this row first (SELECT … FOR UPDATE), so two broker processes on one
# PostgreSQL apply a group's joins, heartbeats, leaves and fenced commits one at a time.
consumer_groups = Table(
    "consumer_groups",
    metadata,
    Column("group_id", String(255), primary_key=True),
    Column("group_epoch", Integer, nullable=False),  # + 1 whenever the target assignment changes
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)

group_members = Table(
    "group_members",
    metadata,
    Column("group_id", String(255), primary_key=True),
    Column("member_id", String(64), primary_key=True),
    Column("member_epoch", Integer, nullable=False),
    Column("topics", Text, nullable=False),  # JSON list of the subscribed topic names
    Column("session_timeout_ms", Integer, nullable=False),
    Column("joined_at", BigInteger, nullable=False),
    Column("last_heartbeat_at", BigInteger, nullable=False),
    # last_heartbeat_at + session_timeout_ms: what the expiry job scans.
    Column("expires_at", BigInteger, nullable=False),
)
Index("ix_group_members_expires_at", group_members.c.expires_at)

# A group's partitions that are held by a member or targeted at one. The primary key is
# what makes "a partition has at most one owner" a database constraint.
group_partitions = Table(
    "group_partitions",
    metadata,
    Column("group_id", String(255), primary_key=True),
    Column("topic_id", Integer, primary_key=True, autoincrement=False),
    Column("partition", Integer, primary_key=True, autoincrement=False),
    Column("state", String(16), nullable=False),  # FREE, ASSIGNED or REVOKING
    Column("owner_member_id", String(64), nullable=True),
    Column("granted_epoch", Integer, nullable=True),  # the owner's member epoch when it got the partition
    Column("target_member_id", String(64), nullable=True),
)

# -- share groups (queue consumption, KIP-932) ------------------------------------------

# Per (group, topic, partition): the share-partition end offset (the group has looked at
# every message below it) and how many records the group accepted and dead-lettered there.
# Every share-group write locks these rows first, in key order.
share_partitions = Table(
    "share_partitions",
    metadata,
    Column("group_id", String(255), primary_key=True),
    Column("topic_id", Integer, primary_key=True, autoincrement=False),
    Column("partition", Integer, primary_key=True, autoincrement=False),
    Column("end_offset", BigInteger, nullable=False),
    Column("accepted", BigInteger, nullable=False, default=0),
    Column("dead_lettered", BigInteger, nullable=False, default=0),
    Column("created_at", BigInteger, nullable=False),
)

# The in-flight records below the end offset: AVAILABLE or ACQUIRED (accepted and archived
# ones are deleted, so the lowest offset here is the share-partition start offset).
share_records = Table(
    "share_records",
    metadata,
    Column("group_id", String(255), primary_key=True),
    Column("topic_id", Integer, primary_key=True, autoincrement=False),
    Column("partition", Integer, primary_key=True, autoincrement=False),
    Column("offset", BigInteger, primary_key=True, autoincrement=False),
    Column("state", String(16), nullable=False),
    Column("delivery_count", Integer, nullable=False),
    Column("generation", BigInteger, nullable=False),
    # ACQUIRED: when the lock runs out; AVAILABLE: when a released record may go out again.
    Column("visible_at", BigInteger, nullable=False),
    Column("key", Text, nullable=True),
    # The transaction whose acknowledgement holds the lock: it is accepted or released with it.
    Column("txn_id", String(64), nullable=True),
)
Index(
    "ix_share_records_txn_id",
    share_records.c.txn_id,
    sqlite_where=share_records.c.txn_id.isnot(None),
    postgresql_where=share_records.c.txn_id.isnot(None),
)
# The sweep that dead-letters records whose last lock ran out looks for high delivery counts.
Index("ix_share_records_delivery_count_visible_at", share_records.c.delivery_count, share_records.c.visible_at)

# Secrets every broker process on this database shares (the share-group receipt key).
broker_secrets = Table(
    "broker_secrets",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
    Column("created_at", BigInteger, nullable=False),
)
