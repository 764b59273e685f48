"""RocketMQ-style :class:`TransactionProducer` (Mode 1): half message + local transaction.

``send_message_in_transaction(msg, arg)`` stores ``msg`` as a half message
(invisible to consumers), runs ``listener.execute_local_transaction``, then commits
or rolls the half message back. When the listener answers ``UNKNOWN``, raises, or
the process dies in between, the broker's checker later asks
``listener.check_local_transaction`` - through a callback server this producer runs
and registers (re-registering as a heartbeat), or, with ``callback_port=None``,
through a background thread that polls the broker for checks.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import socket
import threading
import uuid
from enum import Enum
from typing import Any, Self, Unpack

from sdk import calls
from sdk._base import SyncBase
from sdk._callback_server import CallbackServer
from sdk._connection import ConnectionOptions
from sdk.errors import HalfmqError, IllegalStateError, ListenerNotFoundError
from sdk.message import Message, from_wire, to_wire
from sdk.transaction_listener import (
    LocalTransactionState,
    TransactionListener,
    TransactionSendResult,
)

logger = logging.getLogger("halfmq.sdk")


class _Lifecycle(Enum):
    NEW = "new"
    STARTED = "started"
    CLOSED = "closed"


def _default_instance_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _as_state(value: Any) -> LocalTransactionState:
    # Listeners written against RocketMQ examples sometimes return strings.
    if isinstance(value, LocalTransactionState):
        return value
    try:
        return LocalTransactionState(str(value).upper())
    except ValueError:
        logger.warning("transaction listener returned %r; treating it as UNKNOWN", value)
        return LocalTransactionState.UNKNOWN


def _unknown_outcome(exc: HalfmqError) -> bool:
    return exc.status is None or exc.status >= 500


class TransactionProducer(SyncBase):
    """``TransactionProducer(url, producer_group, listener, callback_host="127.0.0.1", callback_port=0)``.

    Call :meth:`start` (or use ``with``) before sending and :meth:`close` after.
    ``callback_port=0`` binds any free port; ``None`` polls for checks instead of
    serving them. ``advertised_url`` overrides the callback URL given to the broker
    (behind NAT or in containers). ``ttl_seconds`` is how long the registration
    lives without a heartbeat; heartbeats go every ``ttl_seconds / 3``.
    """

    def __init__(
        self,
        url: str,
        producer_group: str,
        listener: TransactionListener,
        callback_host: str = "127.0.0.1",
        callback_port: int | None = 0,
        *,
        instance_id: str | None = None,
        advertised_url: str | None = None,
        ttl_seconds: int = 30,
        poll_wait_ms: int = 1000,
        check_immunity_seconds: float | None = None,
        **connection: Unpack[ConnectionOptions],
    ) -> None:
        super().__init__(url, **connection)
        self.producer_group = producer_group
        self.listener = listener
        self.callback_host = callback_host
        self.callback_port = callback_port
        self.instance_id = instance_id or _default_instance_id()
        self.ttl_seconds = max(1, int(ttl_seconds))  # the broker takes whole seconds
        self.poll_wait_ms = poll_wait_ms
        self.check_immunity_seconds = check_immunity_seconds
        self._advertised_url = advertised_url
        # Per instance, never logged: it proves to our callback server that a
        # check comes from the broker we registered with.
        self._secret = secrets.token_hex(32)
        self._server: CallbackServer | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._state = _Lifecycle.NEW

    @property
    def callback_url(self) -> str | None:
        """The URL registered with the broker (``None`` in polling mode or before start)."""
        if self._server is None:
            return None
        return self._advertised_url or f"http://{self.callback_host}:{self._server.port}/halfmq/check"

    def start(self) -> Self:
        """Start the callback server and register it (or start polling); returns ``self``."""
        if self._state is not _Lifecycle.NEW:
            raise IllegalStateError(f"start() on a producer that is {self._state.value}")
        if self.callback_port is not None:
            self._server = CallbackServer(
                self.callback_host, self.callback_port, self._secret.encode(), self._answer_callback
            )
            self._server.start()
            try:
                self._register()
            except BaseException:
                self._server.close()
                super().close()
                self._state = _Lifecycle.CLOSED
                raise
            target, name = self._heartbeat_loop, "heartbeat"
        else:
            target, name = self._poll_loop, "check-poller"
        self._thread = threading.Thread(target=target, name=f"halfmq-{name}-{self.instance_id}", daemon=True)
        self._thread.start()
        self._state = _Lifecycle.STARTED
        return self

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Half message → ``execute_local_transaction(msg, arg)`` → commit or rollback.

        ``msg.transaction_id`` is used when set, else a new one is generated; a
        prepare retried after a lost answer reuses it, so the broker returns the
        same half message rather than storing a second one. The listener sees the
        message with ``message_id`` and ``transaction_id`` filled in.

        Raises the broker's error when the prepare fails (the local transaction
        then never runs), and :class:`~sdk.errors.AlreadyResolvedError` when the
        checker already resolved the half message the other way.
        """
        if self._state is not _Lifecycle.STARTED:
            raise IllegalStateError("call start() first" if self._state is _Lifecycle.NEW else "producer is closed")
        transaction_id = msg.transaction_id or uuid.uuid4().hex
        receipt = self._transport.call(
            calls.prepare_half_message(
                msg.topic, self.producer_group, to_wire(msg.value, msg.key, msg.headers), transaction_id,
                partition=msg.partition, check_immunity_seconds=self.check_immunity_seconds,
            )
        )
        half = dataclasses.replace(
            msg, message_id=receipt.message_id, transaction_id=receipt.transaction_id or transaction_id
        )
        try:
            state = _as_state(self.listener.execute_local_transaction(half, arg))
        except Exception:
            logger.exception("execute_local_transaction failed for %s; leaving it to the checker", half.transaction_id)
            state = LocalTransactionState.UNKNOWN
        self._end(receipt.message_id, state)
        assert half.transaction_id is not None
        return TransactionSendResult(receipt.message_id, half.transaction_id, state)

    def _end(self, message_id: str, state: LocalTransactionState) -> None:
        if state is LocalTransactionState.UNKNOWN:
            return
        action = "commit" if state is LocalTransactionState.COMMIT else "rollback"
        try:
            self._transport.call(calls.end_half_message(message_id, action))
        except HalfmqError as exc:
            # Like RocketMQ's one-way endTransaction: when the broker cannot be
            # reached the checker will ask us again, and we will answer the same.
            if not _unknown_outcome(exc):
                raise
            logger.warning("could not %s half message %s (%s); the checker will resolve it", action, message_id, exc)

    # --- back-checks ------------------------------------------------------------

    def _check(self, check: dict[str, Any]) -> LocalTransactionState:
        try:
            message = from_wire(check)
            return _as_state(self.listener.check_local_transaction(message))
        except Exception:
            logger.exception("check_local_transaction failed for %s", check.get("transaction_id"))
            return LocalTransactionState.UNKNOWN

    def _answer_callback(self, check: dict[str, Any]) -> str:
        return self._check(check).value

    def _register(self) -> None:
        url = self.callback_url
        assert url is not None
        self._transport.call(
            calls.register_listener(
                self.producer_group, self.instance_id, callback_url=url, ttl_seconds=self.ttl_seconds,
                secret=self._secret,
            )
        )

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.ttl_seconds / 3):
            try:
                self._register()
            except Exception:
                logger.warning("listener heartbeat failed; will retry", exc_info=True)

    def _poll_loop(self) -> None:
        while not self._stop.is_set():
            try:
                checks = self._transport.call(
                    calls.poll_checks(self.producer_group, max_wait_ms=self.poll_wait_ms, instance_id=self.instance_id)
                )
                for check in checks:
                    self._end_polled(check)
            except Exception:
                if self._stop.is_set():
                    return
                logger.warning("polling for back-checks failed; will retry", exc_info=True)
                self._stop.wait(1.0)

    def _end_polled(self, check: dict[str, Any]) -> None:
        state = self._check(check)
        try:
            self._end(str(check["message_id"]), state)
        except HalfmqError as exc:
            logger.warning("answering check for %s failed: %s", check.get("message_id"), exc)

    # --- lifecycle ------------------------------------------------------------------

    def close(self) -> None:
        """Stop serving/polling, unregister from the broker and release resources."""
        if self._state is _Lifecycle.CLOSED:
            return
        was_started = self._state is _Lifecycle.STARTED
        self._state = _Lifecycle.CLOSED
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._server is not None:
            if was_started:
                try:
                    self._transport.call(calls.unregister_listener(self.producer_group, self.instance_id))
                except ListenerNotFoundError:
                    pass
                except HalfmqError as exc:
                    logger.warning("could not unregister listener %s: %s", self.instance_id, exc)
            self._server.close()
        super().close()

    def __enter__(self) -> Self:
        return self.start()
