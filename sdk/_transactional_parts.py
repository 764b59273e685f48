"""What the blocking and asyncio transactional producers share besides their I/O.

:class:`TransactionalParts` is a mixin of :class:`sdk.TransactionalProducer` and
:class:`sdk.AsyncTransactionalProducer`: the transactional id and its timeout, the
client-side state machine (:class:`~sdk._txn_state.TransactionManager`), the partitioner,
what a producer shows of them, and the InitProducerId request both send. The twins add
their lock and their waiting.
"""

from __future__ import annotations

from sdk import calls
from sdk._routing import PartitionRouter
from sdk._txn_state import TransactionManager, TransactionState
from sdk.calls import Call
from sdk.models import ProducerIdentity

DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
"""How long the broker lets a transaction stay open before aborting it (and fencing us)."""


class TransactionalParts:
    """The transactional id, its state machine and partitioner, and the properties that show them."""

    transactional_id: str
    transaction_timeout_ms: int
    _manager: TransactionManager
    _router: PartitionRouter

    def _take_transactional_id(self, transactional_id: str, transaction_timeout_ms: int) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._manager = TransactionManager(transactional_id)
        self._router = PartitionRouter()

    @property
    def state(self) -> TransactionState:
        """The client-side transaction state (for diagnostics and tests)."""
        return self._manager.state

    @property
    def producer_id(self) -> int | None:
        """Producer id obtained by ``init_transactions()`` (``None`` before)."""
        session = self._manager.session
        return session.identity.producer_id if session else None

    @property
    def producer_epoch(self) -> int | None:
        """Current epoch (``None`` before ``init_transactions()``)."""
        session = self._manager.session
        return session.identity.producer_epoch if session else None

    @property
    def transaction_id(self) -> str | None:
        """The broker's id of the open transaction, once something was written to it."""
        return self._manager.txn_id

    def _init_producer_call(self) -> Call[ProducerIdentity]:
        """InitProducerId for this transactional id: a new epoch, older instances fenced."""
        return calls.init_producer(self.transactional_id, self.transaction_timeout_ms)
