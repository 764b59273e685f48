"""Names of system topics and rules for topic names: one place for all of them."""

from __future__ import annotations

import re

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_MAX_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
# Delay messages wait here (RocketMQ's SCHEDULE_TOPIC_XXXX) until the lease holder moves them to their topic.
SCHEDULE_TOPIC = "RMQ_SYS_SCHEDULE_TOPIC"
SYSTEM_TOPICS = (HALF_TOPIC, OP_HALF_TOPIC, CHECK_MAX_TOPIC, SCHEDULE_TOPIC)

TOPIC_NAME_PATTERN = r"^[A-Za-z0-9._-]{1,249}$"
TOPIC_NAME_RE = re.compile(TOPIC_NAME_PATTERN)
_RESERVED_PREFIXES = ("RMQ_SYS_", "__", CHECK_MAX_TOPIC)

# The lease row whose holder runs the background jobs (back-checks, timeouts, retention).
CHECKER_LEASE = "checker"
# Background jobs that record when they last finished a round (``job_rounds``).
JOB_BACK_CHECK = "back-check"
JOB_RETENTION = "retention"

# A polling producer's instance id among its group's listeners and in check histories.
POLLER_PREFIX = "poll:"

# Back-checks kept per half message (its check history), the oldest overwritten first.
CHECK_HISTORY_KEPT = 20

# The tag RocketMQ gives op records that remove a half message.
OP_REMOVE_TAG = "d"

ISOLATION_READ_COMMITTED = "read_committed"
# Sequence numbers, epochs and partitions are 32-bit, as in Kafka (INTEGER columns).
MAX_INT32 = 2**31 - 1


# Share groups: a group's dead letters go to the topic DLQ.{group} (one partition, created on
# demand), with these headers naming where each came from and why.
DLQ_TOPIC_PREFIX = "DLQ."
DLQ_HEADER_TOPIC = "halfmq-dlq-topic"
DLQ_HEADER_PARTITION = "halfmq-dlq-partition"
DLQ_HEADER_OFFSET = "halfmq-dlq-offset"
DLQ_HEADER_DELIVERY_COUNT = "halfmq-delivery-count"
DLQ_HEADER_REASON = "halfmq-dlq-reason"
# A share group's name must make a valid topic name after the prefix.
SHARE_GROUP_PATTERN = r"^[A-Za-z0-9._-]{1,245}$"


def dead_letter_topic(group: str) -> str:
    return DLQ_TOPIC_PREFIX + group


def is_system_topic(name: str) -> bool:
    return name.startswith(_RESERVED_PREFIXES)


# What a stored message is: a user message, or a transaction's COMMIT or ABORT marker.
CONTROL_NONE, CONTROL_COMMIT, CONTROL_ABORT = 0, 1, 2
# How a stored value is encoded: JSON text, or raw bytes (sent as value_base64).
VALUE_JSON, VALUE_BINARY = 0, 1
# A messages row holding a record batch (half_store.storage.record_batch), never a record's own kind.
VALUE_BATCH = 2
