"""Back-checks of RocketMQ transactions, sent down the Telemetry streams of connected producers.

The checker's rules stay the checker's (immunity, interval, check max, discard): this
listener is one more *polling* producer of each topic's producer group, as the REST
``/checks`` pollers are. Every ``HALFMQ_GRPC_CHECK_POLL_SECONDS`` it asks for the due checks
of each topic a live producer session publishes, on behalf of one of those producers in
turn (so the check history names the client asked), and pushes each as a
``RecoverOrphanedTransactionCommand``. The client's EndTransaction is the answer; an
UNSPECIFIED answer, or none, leaves the message to be asked again once the poll lease
(``HALFMQ_POLL_CHECK_LEASE_SECONDS``) runs out, each ask counting as one check.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict

from app.handle import BrokerHandle
from app.metrics import ROCKETMQ_CHECKS_SENT
from app.rocketmq.messages import checked_message
from app.rocketmq.protocol import new
from app.rocketmq.send import producer_group_of
from app.rocketmq.sessions import Sessions
from half_store.domain.errors import BrokerError
from half_store.domain.half_records import CheckAnswer
from half_store.settings import Settings

log = logging.getLogger(__name__)

CHECKS_PER_POLL = 64
_PENDING_KEPT = 16_384  # checks awaiting an answer remembered here, for the check history


class TransactionChecks:
    def __init__(self, broker: BrokerHandle, sessions: Sessions, settings: Settings) -> None:
        self.broker = broker
        self.sessions = sessions
        self.interval = settings.grpc_check_poll_seconds
        # transaction id -> (check number, when it was sent), oldest first
        self._pending: OrderedDict[str, tuple[int, float]] = OrderedDict()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.round()
            except BrokerError as error:  # the database is away: try again next round
                log.warning("could not poll back-checks for RocketMQ producers: %s", error)
            except Exception:  # a bug must not end the checks of every later round
                log.exception("RocketMQ back-check round failed")

    async def round(self) -> int:
        """One poll per published topic; the number of checks sent."""
        sent = 0
        for topic, producers in sorted(self.sessions.publishers().items()):
            session = self.sessions.pick(producers)
            due = await self.broker.polling.poll(producer_group_of(topic), session.client_id, 0, CHECKS_PER_POLL)
            for payload in due:
                command = new(
                    "TelemetryCommand",
                    recover_orphaned_transaction_command=new(
                        "RecoverOrphanedTransactionCommand",
                        message=checked_message(payload, session.namespace),
                        transaction_id=payload["message_id"],
                    ),
                )
                if session.send(command):
                    self._remember(payload["message_id"], payload["check_times"])
                    sent += 1
        ROCKETMQ_CHECKS_SENT.inc(sent)
        return sent

    def _remember(self, transaction_id: str, number: int) -> None:
        self._pending[transaction_id] = (number, time.monotonic())
        self._pending.move_to_end(transaction_id)
        if len(self._pending) > _PENDING_KEPT:
            self._pending.popitem(last=False)

    def answered(self, transaction_id: str) -> None:
        self._pending.pop(transaction_id, None)

    async def unanswered(self, transaction_id: str) -> None:
        """An UNSPECIFIED answer to a check sent from here: UNKNOWN in the message's check history."""
        pending = self._pending.pop(transaction_id, None)
        if pending is not None:
            number, sent_at = pending
            latency_ms = int((time.monotonic() - sent_at) * 1000)
            await self.broker.halves.record_check_answer(transaction_id, number, CheckAnswer.UNKNOWN, latency_ms)
