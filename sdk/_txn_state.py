"""The transactional producer's client-side state machine (pure: no I/O, no clock).

Modelled on aiokafka's ``TransactionManager``: an enum of states, one transition
table consulted by :func:`is_transition_valid`, and a manager that turns every
invalid call into an error that says what to do instead. The blocking and the
asyncio :class:`TransactionalProducer` drive the same manager.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from enum import Enum

from sdk._routing import SequenceSession, outcome_unknown
from sdk.calls import TopicPartition
from sdk.errors import FencedMemberEpochError, HalfmqError, IllegalStateError, ProducerFencedError
from sdk.models import ProducerIdentity


class TransactionState(Enum):
    """Where a transactional producer is in its life."""

    UNINITIALIZED = "UNINITIALIZED"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING = "COMMITTING"
    ABORTING = "ABORTING"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"
    CLOSED = "CLOSED"


S = TransactionState

_VALID_SOURCES: dict[TransactionState, frozenset[TransactionState]] = {
    S.UNINITIALIZED: frozenset(),
    S.READY: frozenset({S.UNINITIALIZED, S.COMMITTING, S.ABORTING}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    # COMMITTING/ABORTING → themselves: the end request failed with an unknown
    # outcome and is being sent again (both are idempotent on the broker).
    S.COMMITTING: frozenset({S.IN_TRANSACTION, S.COMMITTING}),
    S.ABORTING: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.ABORTING}),
    # COMMITTING → ABORTABLE_ERROR: the broker refused to commit offsets staged by a group
    # member it has since fenced; the transaction is still open and must be aborted.
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.COMMITTING}),
    S.FATAL_ERROR: frozenset(set(TransactionState) - {S.CLOSED}),
    S.CLOSED: frozenset(TransactionState),
}


def is_transition_valid(source: TransactionState, target: TransactionState) -> bool:
    """Whether the state machine may move from ``source`` to ``target``."""
    return source in _VALID_SOURCES[target]


class TransactionManager:
    """State, producer identity, sequence numbers and the open broker transaction.

    The broker-side transaction is created lazily (like Kafka's client, which only
    tells the coordinator at the first partition it writes): :meth:`begin` is local,
    the producer creates it at the first ``send`` or ``send_offsets_to_transaction``,
    and a transaction that wrote nothing commits or aborts without a request.
    """

    def __init__(self, transactional_id: str) -> None:
        self.transactional_id = transactional_id
        self.state = S.UNINITIALIZED
        self.session: SequenceSession | None = None
        self.txn_id: str | None = None
        self.fatal_error: HalfmqError | None = None
        self.abortable_error: BaseException | None = None
        # Set when a write's outcome is unknown: its sequence number may be taken,
        # so abort must start a new epoch (which restarts the numbering) rather
        # than reuse it. See SequenceSession.
        self.needs_epoch_bump = False

    # --- transitions ----------------------------------------------------------------

    def transition_to(self, target: TransactionState) -> None:
        """Move to ``target`` or raise the error that explains why the call is wrong now."""
        if not is_transition_valid(self.state, target):
            raise self._illegal(target)
        self.state = target

    def _illegal(self, target: TransactionState) -> HalfmqError:
        if self.state is S.FATAL_ERROR and self.fatal_error is not None:
            return self.fatal_error
        if self.state is S.CLOSED:
            return IllegalStateError("the producer is closed")
        if self.state is S.UNINITIALIZED:
            return IllegalStateError("call init_transactions() first")
        if self.state is S.ABORTABLE_ERROR:
            return IllegalStateError(
                f"the current transaction failed ({self.abortable_error!s}); call abort_transaction()"
            )
        if self.state is S.COMMITTING:
            return IllegalStateError(
                "the last commit_transaction() did not finish; call commit_transaction() again"
            )
        if self.state is S.ABORTING:
            return IllegalStateError("the last abort_transaction() did not finish; call abort_transaction() again")
        if self.state is S.IN_TRANSACTION and target is S.IN_TRANSACTION:
            return IllegalStateError("a transaction is already open; commit or abort it first")
        if self.state is S.READY and target in (S.COMMITTING, S.ABORTING):
            verb = "commit_transaction" if target is S.COMMITTING else "abort_transaction"
            return IllegalStateError(f"{verb}() without an open transaction; call begin_transaction() first")
        if self.state is S.READY and target is S.READY:
            return IllegalStateError("init_transactions() was already called")
        return IllegalStateError(f"cannot go from {self.state.value} to {target.value}")

    # --- the producer's operations --------------------------------------------------

    def initialized(self, identity: ProducerIdentity) -> None:
        """InitProducerId answered: a new epoch, sequence numbers restart at 0."""
        self.transition_to(S.READY)
        self.session = SequenceSession(identity)
        self.txn_id = None
        self.needs_epoch_bump = False
        self.abortable_error = None

    def begin(self) -> None:
        """``begin_transaction()``: local only, see the class docstring."""
        self.transition_to(S.IN_TRANSACTION)
        self.txn_id = None

    def require_in_transaction(self, operation: str) -> None:
        """Raise unless ``operation`` (``send`` …) may run now: inside an open transaction."""
        if self.state is S.IN_TRANSACTION:
            return
        if self.state is S.READY:
            raise IllegalStateError(f"{operation}() outside a transaction; call begin_transaction() first")
        raise self._illegal(S.IN_TRANSACTION)

    @property
    def identity(self) -> ProducerIdentity:
        """The current producer id and epoch (only valid after init)."""
        assert self.session is not None, "not initialised"
        return self.session.identity

    def base_sequence(self, tp: TopicPartition) -> int:
        """The sequence number the next batch to ``tp`` starts at."""
        assert self.session is not None
        return self.session.base_sequence(tp)

    def acknowledge(self, tp: TopicPartition, base: int, count: int) -> None:
        """A batch was written: the next one to ``tp`` starts after it."""
        assert self.session is not None
        self.session.acknowledge(tp, base, count)

    def begin_commit(self) -> bool:
        """Start (or resend) a commit; True when a broker request is needed."""
        self.transition_to(S.COMMITTING)
        return self.txn_id is not None

    def begin_abort(self) -> bool:
        """Start (or resend) an abort; True when a broker request is needed."""
        self.transition_to(S.ABORTING)
        return self.txn_id is not None

    def completed(self) -> None:
        """The commit or abort is done on the broker: ready for the next transaction."""
        self.transition_to(S.READY)
        self.txn_id = None
        self.abortable_error = None

    @contextlib.contextmanager
    def failures_recorded(self) -> Iterator[None]:
        """Around a request: a failure is recorded (:meth:`failed`) and raised on as it is, or,
        for fencing, as the explanatory error, caused by it."""
        try:
            yield
        except Exception as exc:
            failure = self.failed(exc)
            if failure is exc:
                raise
            raise failure from exc

    def failed(self, exc: BaseException) -> BaseException:
        """Record a failed request, move to the state it implies, return what to raise.

        That is ``exc`` itself, except for fencing, which becomes the same
        explanatory :class:`ProducerFencedError` every later call raises.

        Fencing is fatal. Inside a transaction any failure makes it abort-only (a
        commit must never silently miss a message). A commit or abort the broker
        refused with a 4xx is over (e.g. the transaction timed out); one whose
        outcome is unknown stays in progress so the caller can send it again.
        """
        if isinstance(exc, ProducerFencedError):
            self.fatal_error = ProducerFencedError(
                f"producer for transactional id {self.transactional_id!r} was fenced: a newer instance "
                f"called init_transactions() or its transaction timed out ({exc.message}); create a new producer"
            )
            self.state = S.FATAL_ERROR
            return self.fatal_error
        unknown = outcome_unknown(exc)
        if self.state is S.COMMITTING and isinstance(exc, FencedMemberEpochError):
            self.abortable_error = exc
            self.transition_to(S.ABORTABLE_ERROR)
            return exc
        if self.state in (S.IN_TRANSACTION, S.ABORTABLE_ERROR):
            self.needs_epoch_bump = self.needs_epoch_bump or unknown
            self.abortable_error = exc
            self.transition_to(S.ABORTABLE_ERROR)
        elif self.state in (S.COMMITTING, S.ABORTING) and not unknown:
            self.completed()
        return exc

    def close(self) -> None:
        """No further use; every call raises :class:`IllegalStateError`."""
        self.transition_to(S.CLOSED)
