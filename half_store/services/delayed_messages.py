"""Delay messages: kept out of sight in RMQ_SYS_SCHEDULE_TOPIC, moved into their topic when due.

RocketMQ's pattern (SCHEDULE_TOPIC_XXXX), with halfmq's at-most-once move: scheduling is one
transaction (the body appended to the schedule topic, its index row written); delivering is
one transaction too (the index rows claimed by a compare-and-set on ``delivered_at IS NULL``,
the bodies appended to their topics, the offsets noted). A SIGKILL anywhere leaves a message
either waiting (and delivered by the next round) or delivered once: never lost, never doubled.
The lease holder runs :meth:`DelayedMessageService.deliver_due` every
``HALFMQ_DELAY_INTERVAL_SECONDS``; a message is never readable before its time.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import Connection

from half_store.domain.constants import SCHEDULE_TOPIC
from half_store.domain.delay_records import DueMessage, ScheduledMessage
from half_store.domain.errors import DeliveryTimeTooFar, InternalError, ScheduledMessageNotFound, TopicNotFound
from half_store.domain.records import Record, StoredMessage, Topic, now_ms
from half_store.metrics import DELAYED_MESSAGES, DELAYED_WAITING
from half_store.services.log_service import LogService
from half_store.services.notifier import PartitionKey
from half_store.settings import Settings
from half_store.storage import log_reads, log_store, schedule_store
from half_store.storage.log_store import AppendRequest

DELIVER_BATCH = 500


class DelayedMessageService:
    def __init__(self, log: LogService, settings: Settings) -> None:
        self.log = log
        self.store = log.store
        self.max_delay_ms = int(settings.max_delay_seconds * 1000)

    async def schedule(
        self, topic_name: str, records: Sequence[Record], deliver_at: Sequence[int], partitions: Sequence[int | None]
    ) -> list[ScheduledMessage]:
        """Keep ``records`` until their times (ms since the epoch), all or nothing; a time past the
        longest delay is refused (DELIVERY_TIME_TOO_FAR), one already past is delivered at once."""
        now = now_ms()
        for at in deliver_at:
            if at - now > self.max_delay_ms:
                raise DeliveryTimeTooFar(
                    f"delivery time {at} is more than {self.max_delay_ms // 1000} s ahead (HALFMQ_MAX_DELAY_SECONDS)"
                )
        topic = await self.log.writable_topic(topic_name)
        chosen = [self.log.choose_partition(topic, p, r.key) for r, p in zip(records, partitions, strict=True)]
        scheduled = [
            ScheduledMessage(secrets.token_hex(16), topic.name, partition, at, now)
            for partition, at in zip(chosen, deliver_at, strict=True)
        ]
        schedule_topic = await self.store.topic(SCHEDULE_TOPIC)

        def unit(conn: Connection) -> None:
            if topic.topic_id not in log_store.existing_topics_locked(conn, [topic.topic_id]):
                raise TopicNotFound(f"topic {topic.name!r} does not exist")
            base = log_store.append(conn, schedule_topic, 0, records)
            schedule_store.insert_scheduled(
                conn, [(message, topic.topic_id, base + n) for n, message in enumerate(scheduled)]
            )

        try:
            await self.store.write(unit, locks=[(schedule_topic.topic_id, 0)])
        except TopicNotFound:
            self.store.forget_topic(topic.name)
            raise
        DELAYED_MESSAGES.labels("scheduled").inc(len(scheduled))
        return scheduled

    async def get(self, message_id: str) -> ScheduledMessage:
        found = await self.store.read(lambda conn: schedule_store.get(conn, message_id))
        if found is None:
            raise ScheduledMessageNotFound(f"delay message {message_id!r} does not exist (or was delivered long ago)")
        return found

    async def list_waiting(self, topic_name: str | None, limit: int) -> list[ScheduledMessage]:
        topic_id = None if topic_name is None else (await self.store.topic(topic_name)).topic_id
        return await self.store.read(lambda conn: schedule_store.waiting(conn, topic_id, limit))

    async def refresh_waiting_gauge(self) -> None:
        DELAYED_WAITING.set(await self.store.read(schedule_store.count_waiting))

    async def deliver_due(self, limit: int = DELIVER_BATCH) -> int:
        """Move the messages whose time has come into their topics (the lease holder's job); how many moved."""
        due = await self.store.read(lambda conn: schedule_store.due(conn, now_ms(), limit))
        if not due:
            return 0
        locks = sorted({(d.topic_id, d.partition) for d in due})
        delivered, touched, dropped = await self.store.write(lambda conn: self._deliver(conn, due), locks=locks)
        if touched:
            self.log.notifier.notify(touched)
        DELAYED_MESSAGES.labels("delivered").inc(delivered)
        DELAYED_MESSAGES.labels("dropped").inc(dropped)
        return delivered

    def _deliver(self, conn: Connection, due: list[DueMessage]) -> tuple[int, set[PartitionKey], int]:
        now = now_ms()
        claimed = schedule_store.claim(conn, [d.message_id for d in due], now)
        todo = [d for d in due if d.message_id in claimed]  # another deliverer (an old lease holder) took the rest
        if not todo:
            return 0, set(), 0
        live = log_store.existing_topics_locked(conn, sorted({d.topic_id for d in todo}))
        moving = [d for d in todo if d.topic_id in live]  # a deleted topic's messages are dropped with it
        schedule_topic = self.store.topic_sync(conn, SCHEDULE_TOPIC)
        bodies = log_reads.read_offsets(
            conn, schedule_topic, 0, [d.schedule_offset for d in moving], in_rows_of_their_own=True
        )
        by_topic: dict[int, dict[int, list[DueMessage]]] = defaultdict(lambda: defaultdict(list))
        for message in moving:
            if message.schedule_offset not in bodies:
                raise InternalError(f"delay message {message.message_id} is indexed but missing from {SCHEDULE_TOPIC}")
            by_topic[message.topic_id][message.partition].append(message)
        topics: list[Topic] = [self.store.topic_by_id_sync(conn, topic_id) for topic_id in sorted(by_topic)]
        requests = [
            AppendRequest(
                topic,
                {
                    partition: [_record(bodies[m.schedule_offset][0]) for m in messages]
                    for partition, messages in sorted(by_topic[topic.topic_id].items())
                },
            )
            for topic in topics
        ]
        bases = log_store.append_many(conn, requests)
        offsets: dict[str, int] = {}
        for topic, base in zip(topics, bases, strict=True):
            for partition, messages in by_topic[topic.topic_id].items():
                offsets.update((m.message_id, base[partition] + n) for n, m in enumerate(messages))
        schedule_store.set_delivered_offsets(conn, offsets)
        touched = {(topic_id, partition) for topic_id, parts in by_topic.items() for partition in parts}
        return len(moving), touched, len(todo) - len(moving)


def _record(message: StoredMessage) -> Record:
    return Record(message.key, message.value, message.value_kind, message.headers, message.timestamp)
