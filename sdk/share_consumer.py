"""The blocking :class:`ShareConsumer`: a share group's consumer (queue semantics, per-message acks).

Many consumers of one share group split a topic message by message (RocketMQ 5's
SimpleConsumer, Kafka's share groups)::

    with ShareConsumer(url, "billing", "invoices") as consumer:
        for message in consumer:          # each one locked for this consumer
            bill(message.value)
            consumer.ack(message)         # or release(message) / reject(message)

or ``consumer.process(handler)``: ACCEPT when the handler returns, RELEASE when it
raises. While a message is held (received, not acknowledged yet) a background thread
renews its lock, so slow work does not lose it; ``auto_extend=False`` turns that off.

``ack`` / ``release`` / ``reject`` send their request at once and return its results.
``acknowledge(messages, kind)`` instead defers it to the next ``receive`` (or ``flush``,
or ``close``), which carries it, as Kafka's share consumer does: a loop of receive and
acknowledge then costs one request and one commit per batch. ``process`` works that way.
The bookkeeping is :class:`sdk._share_core.ShareCore`, shared with the asyncio twin.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Unpack

from sdk._base import SyncBase
from sdk._connection import ConnectionOptions
from sdk._http import Call
from sdk._share_core import (
    DEFAULT_LOCK_MS,
    DEFAULT_MAX_EXTENSION,
    DEFAULT_MAX_MESSAGES,
    Receipted,
    ShareCore,
    receipts_of,
    report,
)
from sdk.calls import ShareAck
from sdk.models import AckResult, ReceivedMessage, ShareGroupInfo

logger = logging.getLogger("halfmq.sdk")


class ShareConsumer(SyncBase):
    """``ShareConsumer(url, group, topic)``: receive, then ``ack`` / ``release`` / ``reject`` each message.

    ``lock_ms``: how long a received message stays hidden from the rest of the group
    without an acknowledgement. ``ordered=True``: per-key order (no later message of a
    key while one is locked; every consumer of the group should set it). ``max_extension``:
    seconds after its receipt during which a held lock is renewed automatically (None:
    as long as the consumer is open). ``on_acknowledged`` is called with the results of
    deferred acknowledgements when they come back (by default refusals are logged).
    Thread-safe.
    """

    def __init__(
        self,
        url: str,
        group: str,
        topic: str,
        *,
        max_messages: int = DEFAULT_MAX_MESSAGES,
        lock_ms: int = DEFAULT_LOCK_MS,
        ordered: bool = False,
        tag: str | None = None,
        auto_extend: bool = True,
        max_extension: float | None = DEFAULT_MAX_EXTENSION,
        on_acknowledged: Callable[[list[AckResult]], None] = report,
        **connection: Unpack[ConnectionOptions],
    ) -> None:
        super().__init__(url, **connection)
        self.core = ShareCore(
            group, topic, max_messages=max_messages, lock_ms=lock_ms, ordered=ordered, max_extension=max_extension,
            on_acknowledged=on_acknowledged, tag=tag,
        )
        self._stopping = threading.Event()
        self._keeper = threading.Thread(target=self._keep_locks, name="halfmq-share-locks", daemon=True)
        if auto_extend:
            self._keeper.start()

    @property
    def group(self) -> str:
        """The share group this consumer takes messages for."""
        return self.core.group

    @property
    def topic(self) -> str:
        """The topic it receives from."""
        return self.core.topic

    # --- receiving ---------------------------------------------------------------------

    def receive(self, max_messages: int | None = None, timeout: float = 1.0) -> list[ReceivedMessage]:
        """Up to ``max_messages`` messages, each locked for this consumer; waits up to ``timeout`` seconds for some.

        Deferred acknowledgements go with it; their results reach ``on_acknowledged``.
        """
        request = self.core.receive(max_messages, timeout)
        try:
            answer = self._transport.call(request.call)
        except Exception:
            self.core.not_received(request)
            raise
        return self.core.received(request, answer)

    def __iter__(self) -> Iterator[ReceivedMessage]:
        """Yield messages one by one until :meth:`close`; acknowledge each."""
        while not self.core.closed:
            yield from self.receive(timeout=1.0)

    def process(
        self, handler: Callable[[ReceivedMessage], Any], *, max_messages: int | None = None, timeout: float = 1.0
    ) -> int:
        """Receive one batch and run ``handler`` on each message (its lock renewed meanwhile).

        A message whose handler returned is accepted, one whose handler raised is released
        for another try (the exception is logged); a message the handler acknowledged itself
        is left as it is. The acknowledgements are deferred: the next ``receive`` or
        ``process`` carries them (``flush`` or ``close`` sends them at once). Returns how
        many messages were received.
        """
        messages = self.receive(max_messages, timeout)
        failed = set()
        for message in messages:
            try:
                handler(message)
            except Exception:
                logger.exception("share-group handler failed on %s/%s@%s; releasing it",
                                 message.topic, message.partition, message.offset)
                failed.add(message.receipt)
        self.core.settle(messages, failed)
        return len(messages)

    # --- acknowledging -------------------------------------------------------------------

    def ack(self, messages: Receipted | Iterable[Receipted]) -> list[AckResult]:
        """ACCEPT: done, never delivered to the group again."""
        return self._send(self.core.acknowledgements(messages, "ACCEPT", 0))

    def release(self, messages: Receipted | Iterable[Receipted], delay_ms: int = 0) -> list[AckResult]:
        """RELEASE: deliverable again (after ``delay_ms``), to any consumer of the group."""
        return self._send(self.core.acknowledgements(messages, "RELEASE", delay_ms))

    def reject(self, messages: Receipted | Iterable[Receipted]) -> list[AckResult]:
        """REJECT: straight to the group's dead-letter topic ``DLQ.{group}``."""
        return self._send(self.core.acknowledgements(messages, "REJECT", 0))

    def acknowledge(self, messages: Receipted | Iterable[Receipted], kind: str = "ACCEPT", delay_ms: int = 0) -> None:
        """ACCEPT (or ``kind`` RELEASE / REJECT) with the next receive; the locks are renewed until then."""
        self.core.defer(messages, kind, delay_ms)

    def flush(self) -> list[AckResult]:
        """Send the deferred acknowledgements now; their results."""
        acks = self.core.pending.take()
        try:
            return self._send(acks)
        except Exception:
            self.core.pending.restore(acks)
            raise

    def extend(self, messages: Receipted | Iterable[Receipted], lock_ms: int | None = None) -> list[AckResult]:
        """Renew the locks to ``lock_ms`` (default: the consumer's) from now; the receipts stay valid."""
        asked_at = time.monotonic()
        results = self._call(self.core.extend(messages, lock_ms))
        self.core.held.renewed(results, asked_at)
        return results

    def forget(self, messages: Receipted | Iterable[Receipted]) -> None:
        """Stop renewing these locks (e.g. once handed to a transaction with ``send_acks_to_transaction``)."""
        self.core.held.forget(receipts_of(messages))

    def _send(self, acks: list[ShareAck]) -> list[AckResult]:
        return self._call(self.core.send(acks))

    def _call(self, call: Call[list[AckResult]] | None) -> list[AckResult]:
        return [] if call is None else self._transport.call(call)

    # --- the rest --------------------------------------------------------------------------

    def describe(self) -> ShareGroupInfo:
        """The group's messages per topic: available, locked, accepted, dead-lettered."""
        return self._transport.call(self.core.describe())

    def _keep_locks(self) -> None:
        while not self._stopping.wait(self.core.held.check_interval()):
            due = self.core.held.due(time.monotonic())
            if not due:
                continue
            try:
                self.extend(due)
            except Exception:  # the locks may run out; the next round tries again
                logger.warning("could not renew %d share-group locks", len(due), exc_info=True)

    def close(self) -> None:
        """Send the deferred acknowledgements, release the messages still held (so others get them
        now), stop renewing locks and close connections."""
        if self.core.closed:
            return
        try:
            if len(self.core.pending):
                self.core.on_acknowledged(self.flush())
        except Exception:  # their locks run out and the messages come back: nothing is lost
            logger.warning("could not send %d deferred acknowledgements", len(self.core.pending), exc_info=True)
        self._stopping.set()
        if self._keeper.is_alive():
            self._keeper.join(5)
        release = self.core.release_held()
        self.core.closed = True
        if release is not None:
            try:
                self._transport.call(release)
            except Exception:  # best effort: the locks run out by themselves
                logger.warning("could not release the held share-group messages on close", exc_info=True)
        super().close()

