"""Sans-I/O bookkeeping shared by :class:`~sdk.ShareConsumer` and :class:`~sdk.AsyncShareConsumer`.

Which receipts a consumer holds, when each lock runs out by the consumer's own clock,
which are due for renewal, which acknowledgements wait for the next receive, and the
requests that follow from all that (:class:`ShareCore`); the two consumer classes
only send the requests and wait.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sdk import calls
from sdk._http import Call
from sdk.calls import ShareAck
from sdk.errors import HalfmqError, IllegalStateError, ReceiptExpiredError, UnknownReceiptError
from sdk.models import AckResult, ReceivedMessage, ShareGroupInfo

logger = logging.getLogger("halfmq.sdk")

Receipted = ReceivedMessage | str
"""What the acknowledging methods take: a received message, or its receipt."""

DEFAULT_LOCK_MS = 30_000
DEFAULT_MAX_MESSAGES = 100
DEFAULT_MAX_EXTENSION = 300.0
"""Seconds after its receipt during which a held lock is extended automatically (then it may run out)."""

MAX_BROKER_WAIT_MS = 30_000  # the broker's default max_fetch_wait_ms


def receipts_of(messages: Receipted | Iterable[Receipted]) -> list[str]:
    """The receipts of one message, one receipt, or several of either."""
    if isinstance(messages, (str, ReceivedMessage)):
        messages = [messages]
    return [m if isinstance(m, str) else m.receipt for m in messages]


def failure(results: Sequence[AckResult]) -> HalfmqError | None:
    """The error for the first receipt that was not applied, naming every one that was not."""
    failed = [r for r in results if not r.ok]
    if not failed:
        return None
    cls = UnknownReceiptError if failed[0].error == UnknownReceiptError.code else ReceiptExpiredError
    return cls(f"{len(failed)} of {len(results)} receipts were not applied: " + ", ".join(
        f"{r.receipt[:16]}… {r.error}" for r in failed[:5]
    ))


class PendingAcks:
    """Acknowledgements deferred to the next receive (or ``flush``). Thread-safe."""

    def __init__(self) -> None:
        self._acks: list[ShareAck] = []
        self._guard = threading.Lock()

    def __len__(self) -> int:
        return len(self._acks)

    def __contains__(self, receipt: object) -> bool:
        with self._guard:
            return any(ack[0] == receipt for ack in self._acks)

    def add(self, acks: Iterable[ShareAck]) -> None:
        with self._guard:
            self._acks.extend(acks)

    def take(self) -> list[ShareAck]:
        """Everything deferred so far; the caller sends it (and puts it back if that fails)."""
        with self._guard:
            taken, self._acks = self._acks, []
        return taken

    def restore(self, acks: list[ShareAck]) -> None:
        with self._guard:
            self._acks[:0] = acks


def report(results: Sequence[AckResult]) -> None:
    """What becomes of deferred acknowledgements that were refused, when nobody asked: a warning."""
    failed = [r for r in results if not r.ok]
    if failed:
        logger.warning("%d deferred share-group acknowledgements were refused (%s)", len(failed),
                       ", ".join(sorted({str(r.error) for r in failed})))


@dataclass
class _Held:
    expires_at: float  # this consumer's monotonic clock
    extend_until: float  # no automatic renewal after this


class HeldLocks:
    """Receipts received and not yet acknowledged, with when their locks run out. Thread-safe."""

    def __init__(self, lock_ms: int, max_extension: float | None) -> None:
        self.lock_ms = lock_ms
        self.max_extension = max_extension
        self._held: dict[str, _Held] = {}
        self._guard = threading.Lock()

    def __len__(self) -> int:
        return len(self._held)

    def receipts(self) -> list[str]:
        with self._guard:
            return list(self._held)

    def hold(self, messages: Iterable[ReceivedMessage], asked_at: float) -> None:
        """Messages just received by a request sent at ``asked_at``: the broker locked them after
        that, so their locks last at least ``lock_ms`` from then (whatever the clocks say)."""
        limit = float("inf") if self.max_extension is None else asked_at + self.max_extension
        with self._guard:
            for message in messages:
                self._held[message.receipt] = _Held(asked_at + self.lock_ms / 1000, limit)

    def forget(self, receipts: Iterable[str]) -> None:
        """Acknowledged, released, rejected or handed to a transaction: no longer this consumer's to renew."""
        with self._guard:
            for receipt in receipts:
                self._held.pop(receipt, None)

    def holds(self, receipt: str) -> bool:
        with self._guard:
            return receipt in self._held

    def due(self, now: float) -> list[str]:
        """Locks to renew now: those with less than half their time left, still within ``max_extension``."""
        margin = self.lock_ms / 2000
        with self._guard:
            return [r for r, h in self._held.items() if h.expires_at - now < margin and now < h.extend_until]

    def renewed(self, results: Iterable[AckResult], asked_at: float) -> None:
        """After an extend sent at ``asked_at``: renewed locks last ``lock_ms`` from then, lost ones are forgotten."""
        with self._guard:
            for result in results:
                held = self._held.get(result.receipt)
                if held is None:
                    continue
                if result.ok:
                    held.expires_at = asked_at + self.lock_ms / 1000
                else:
                    del self._held[result.receipt]

    def check_interval(self) -> float:
        """How often to look for locks to renew: often enough to renew each one in its second half."""
        return max(0.05, min(1.0, self.lock_ms / 4000))


Received = tuple[list[ReceivedMessage], list[AckResult]]
ACK_KINDS = ("ACCEPT", "RELEASE", "REJECT")


@dataclass(frozen=True)
class ReceiveRequest:
    """A receive about to be sent: the call, the deferred acknowledgements it carries, when it left."""

    call: Call[Received]
    acks: list[ShareAck]
    asked_at: float


class ShareCore:
    """What a share consumer knows and decides, whichever way it waits for the broker."""

    def __init__(
        self,
        group: str,
        topic: str,
        *,
        max_messages: int,
        lock_ms: int,
        ordered: bool,
        max_extension: float | None,
        on_acknowledged: Callable[[list[AckResult]], None],
        tag: str | None = None,
    ) -> None:
        self.tag = tag
        self.group = group
        self.topic = topic
        self.max_messages = max_messages
        self.lock_ms = lock_ms
        self.ordered = ordered
        self.held = HeldLocks(lock_ms, max_extension)
        self.pending = PendingAcks()
        self.on_acknowledged = on_acknowledged
        self.closed = False

    def check_open(self) -> None:
        if self.closed:
            raise IllegalStateError("share consumer is closed")

    def receive(self, max_messages: int | None, timeout: float) -> ReceiveRequest:
        """The next receive, carrying every deferred acknowledgement."""
        self.check_open()
        acks = self.pending.take()
        call = calls.share_receive(
            self.group, self.topic, max_messages=max_messages or self.max_messages, lock_ms=self.lock_ms,
            max_wait_ms=min(int(max(0.0, timeout) * 1000), MAX_BROKER_WAIT_MS), ordered=self.ordered, acks=acks,
            tag=self.tag,
        )
        return ReceiveRequest(call, acks, time.monotonic())

    def received(self, request: ReceiveRequest, answer: Received) -> list[ReceivedMessage]:
        messages, results = answer
        self.held.forget(receipt for receipt, _, _ in request.acks)
        self.held.hold(messages, request.asked_at)
        if results:
            self.on_acknowledged(results)
        return messages

    def not_received(self, request: ReceiveRequest) -> None:
        """The receive failed: its acknowledgements wait for the next one."""
        self.pending.restore(request.acks)

    def acknowledgements(self, messages: Receipted | Iterable[Receipted], kind: str, delay_ms: int) -> list[ShareAck]:
        if kind not in ACK_KINDS:
            raise ValueError(f"kind must be ACCEPT, RELEASE or REJECT, not {kind!r}")
        return [(r, kind, delay_ms if kind == "RELEASE" else None) for r in receipts_of(messages)]

    def defer(self, messages: Receipted | Iterable[Receipted], kind: str, delay_ms: int) -> None:
        self.pending.add(self.acknowledgements(messages, kind, delay_ms))

    def settle(self, messages: list[ReceivedMessage], failed: set[str]) -> None:
        """After ``process``: ACCEPT what its handler took, RELEASE what it failed on, with the next receive;
        a message the handler acknowledged itself is left as it is."""
        settled = [
            (m.receipt, "RELEASE" if m.receipt in failed else "ACCEPT", None)
            for m in messages
            if self.held.holds(m.receipt) and m.receipt not in self.pending
        ]
        self.pending.add(settled)

    def send(self, acks: list[ShareAck]) -> Call[list[AckResult]] | None:
        """The request that acknowledges ``acks`` now (None: nothing to send); their locks are no longer renewed."""
        self.check_open()
        if not acks:
            return None
        self.held.forget(receipt for receipt, _, _ in acks)
        return calls.share_acks(self.group, acks)

    def extend(self, messages: Receipted | Iterable[Receipted], lock_ms: int | None) -> Call[list[AckResult]] | None:
        self.check_open()
        receipts = receipts_of(messages)
        return calls.share_extend(self.group, receipts, lock_ms or self.lock_ms) if receipts else None

    def release_held(self) -> Call[list[AckResult]] | None:
        """On close: give back what is still held, so the group gets it now rather than when the locks run out."""
        held = self.held.receipts()
        return calls.share_acks(self.group, [(r, "RELEASE", None) for r in held]) if held else None

    def describe(self) -> Call[ShareGroupInfo]:
        return calls.describe_share_group(self.group)
