"""RocketMQ-style transaction listener API (Mode 1): the user's half of a half message."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from enum import Enum
from typing import Any

from sdk.message import Message


class LocalTransactionState(Enum):
    """Outcome of the local transaction: ``COMMIT``, ``ROLLBACK`` or ``UNKNOWN`` (ask later)."""

    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"


class TransactionListener(abc.ABC):
    """Runs the local transaction for a half message, and answers the broker's back-checks.

    Both methods may run on background threads (the callback server or the check
    poller call :meth:`check_local_transaction`), so they must be thread-safe.
    """

    @abc.abstractmethod
    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        """Run the local transaction that goes with ``message`` and say how it ended.

        Called right after the half message is stored; ``message.transaction_id``
        is set, so record it with the local change (same database transaction) and
        :meth:`check_local_transaction` can find it later. Return ``UNKNOWN`` or raise
        when you cannot tell yet: the broker will ask again after its transaction
        timeout.
        """

    @abc.abstractmethod
    def check_local_transaction(self, message: Message) -> LocalTransactionState:
        """The broker asks: did the local transaction for ``message`` commit?

        Look ``message.transaction_id`` up in your local state. ``UNKNOWN`` (or an
        exception) counts as one check; after the broker's ``check_max`` checks it
        discards the half message.
        """


@dataclass(frozen=True)
class TransactionSendResult:
    """What ``send_message_in_transaction`` did: the half message and the local outcome.

    ``local_state`` is ``UNKNOWN`` when the listener said so or raised; the half
    message is then resolved later by a back-check.
    """

    message_id: str
    transaction_id: str
    local_state: LocalTransactionState
