"""The gRPC listener: ``apache.rocketmq.v2.MessagingService`` on ``HALFMQ_HOST:HALFMQ_GRPC_PORT``.

Each RPC is one method of a small module (route, send, transactions, receive, assignment,
telemetry) that maps it onto the broker's services. Here, around every call: the caller
is authenticated from the headers before its payload is looked at, a refusal or failure
becomes the answer's RocketMQ status (never a gRPC error: the clients read statuses),
and the call is counted by method and status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeAlias

import grpc

from app.auth.authority import Authority
from app.handle import BrokerHandle
from app.metrics import ROCKETMQ_RPC_LATENCY, ROCKETMQ_RPCS
from app.presence import Presence
from app.rocketmq.assignment import Assignments
from app.rocketmq.checks import TransactionChecks
from app.rocketmq.context import CallContext
from app.rocketmq.protocol import SERVICE_NAME, enum_name, message_class, new, service_descriptor
from app.rocketmq.receive import Receiving
from app.rocketmq.route import Routes
from app.rocketmq.send import Sending
from app.rocketmq.sessions import Sessions
from app.rocketmq.signature import Signatures
from app.rocketmq.status import RocketMQError, status, status_of
from app.rocketmq.telemetry import Telemetry
from app.rocketmq.transactions import Transactions
from half_store.domain.broker_records import BrokerRecord
from half_store.domain.errors import BrokerError
from half_store.domain.message_limits import MessageLimits
from half_store.domain.rocketmq_records import ClientSessionRecord
from half_store.settings import Settings

log = logging.getLogger(__name__)

Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
Unary = Callable[[Any, CallContext], Awaitable[Any]]
# What halfmq does not serve: RocketMQ 5's pull consumer and offset calls (its share groups
# have no offsets to pull from), message recall and lite topics.
UNSUPPORTED = frozenset(
    {"PullMessage", "UpdateOffset", "GetOffset", "QueryOffset", "RecallMessage", "SyncLiteSubscription"}
)
_MAX_MESSAGE_OVERHEAD = 1024 * 1024  # gRPC frames carry a message's headers and properties too


class RocketMQListener:
    def __init__(self, broker: BrokerHandle, authority: Authority, settings: Settings, presence: Presence) -> None:
        self.settings = settings
        self.presence = presence
        self.sessions = Sessions(settings.grpc_session_timeout_seconds)
        self.signatures = Signatures(authority)
        self.addresses: list[str] = []  # the advertised addresses QueryRoute answers, once started
        self.checks = TransactionChecks(broker, self.sessions, settings)
        routes = Routes(broker, self.sessions, self.addresses)
        sending = Sending(broker, MessageLimits(settings.max_message_bytes, settings.max_header_count, settings.max_header_bytes))
        receiving = Receiving(broker, settings)
        transactions = Transactions(broker, self.checks)
        self._unary: dict[str, Unary] = {
            "QueryRoute": routes.query_route,
            "Heartbeat": routes.heartbeat,
            "NotifyClientTermination": routes.notify_client_termination,
            "SendMessage": sending.send_message,
            "EndTransaction": transactions.end_transaction,
            "AckMessage": receiving.ack_message,
            "ChangeInvisibleDuration": receiving.change_invisible_duration,
            "ForwardMessageToDeadLetterQueue": receiving.forward_message_to_dead_letter_queue,
            "QueryAssignment": Assignments(broker, self.addresses).query_assignment,
        }
        self._receive = receiving.receive_message
        self._telemetry = Telemetry(self.sessions, settings).telemetry
        self._server: grpc.aio.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        limit = self.settings.max_message_bytes + _MAX_MESSAGE_OVERHEAD
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", -1),
                # A client gone without closing (a host lost, a network cut) ends its Telemetry
                # stream within about 40 s, so back-checks stop going to a session nobody reads.
                ("grpc.keepalive_time_ms", 30_000),
                ("grpc.keepalive_timeout_ms", 10_000),
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
            ]
        )
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, self._handlers()),))
        self.port = server.add_insecure_port(f"{self.settings.host}:{self.settings.grpc_port}")
        await server.start()
        self._server = server
        self.advertised_address = self.settings.grpc_advertised_address or f"127.0.0.1:{self.port}"
        self.addresses.append(self.advertised_address)
        self.presence.grpc_address = self.advertised_address
        self.presence.rocketmq_sessions = self._session_records
        self.presence.watch(self._route_to)
        await self.presence.announce()
        self._tasks = [asyncio.create_task(self.checks.run())]
        log.info("RocketMQ gRPC listener on %s:%d (advertised %s)", self.settings.host, self.port, self.advertised_address)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for session in self.sessions:
            self.sessions.remove(session.client_id)  # ends the Telemetry streams
        if self._server is not None:
            await self._server.stop(grace=1.0)
        self.presence.grpc_address = None  # this process's row no longer offers RocketMQ
        self.presence.rocketmq_sessions = lambda: ()

    def _session_records(self) -> tuple[ClientSessionRecord, ...]:
        """This listener's client sessions for its process's heartbeat (the lapsed ones dropped first)."""
        self.sessions.expire()
        return self.sessions.records()

    def _route_to(self, live: list[BrokerRecord]) -> None:
        """QueryRoute's addresses: the live processes' RocketMQ listeners (this one always among them)."""
        addresses = {broker.grpc_address for broker in live if broker.grpc_address} | {self.advertised_address}
        self.addresses[:] = sorted(addresses)

    # -- calls ------------------------------------------------------------------------------------

    def _handlers(self) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        for method in service_descriptor().methods:
            request_class = message_class(method.input_type.name)
            output = method.output_type.name
            options = {
                "request_deserializer": request_class.FromString,
                "response_serializer": message_class(output).SerializeToString,
            }
            if method.name == "Telemetry":
                handlers[method.name] = grpc.stream_stream_rpc_method_handler(self._stream(method.name), **options)
            elif method.name in ("ReceiveMessage", "PullMessage"):
                handlers[method.name] = grpc.unary_stream_rpc_method_handler(self._streaming(method.name, output), **options)
            else:
                handlers[method.name] = grpc.unary_unary_rpc_method_handler(self._call(method.name, output), **options)
        return handlers

    async def _context(self, context: Context) -> CallContext:
        headers = {key: value for key, value in context.invocation_metadata() or () if isinstance(value, str)}
        principal = await self.signatures.principal(headers)
        return CallContext.of(headers, principal, self.signatures.authority)

    def _call(self, name: str, output: str) -> Callable[[Any, Context], Awaitable[Any]]:
        handler = self._unary.get(name)

        async def call(request: Any, context: Context) -> Any:
            started = time.monotonic()
            try:
                ctx = await self._context(context)
                if handler is None:
                    raise RocketMQError("UNSUPPORTED", f"halfmq does not serve {name} (docs/rocketmq.md)")
                response = await handler(request, ctx)
            except Exception as error:  # noqa: BLE001 - every failure is answered as a status
                response = new(output, status=_failed(name, error))
            _count(name, response.status.code, started)
            return response

        return call

    def _streaming(self, name: str, output: str) -> Callable[[Any, Context], AsyncIterator[Any]]:
        async def call(request: Any, context: Context) -> AsyncIterator[Any]:
            started = time.monotonic()
            code = None
            try:
                ctx = await self._context(context)
                if name != "ReceiveMessage":
                    raise RocketMQError("UNSUPPORTED", f"halfmq does not serve {name} (docs/rocketmq.md)")
                async for response in self._receive(request, ctx):
                    if response.HasField("status"):
                        code = response.status.code
                    yield response
            except Exception as error:  # noqa: BLE001 - every failure is answered as a status
                failed = _failed(name, error)
                code = failed.code
                yield new(output, status=failed)
            _count(name, code, started)

        return call

    def _stream(self, name: str) -> Callable[[AsyncIterator[Any], Context], AsyncIterator[Any]]:
        async def call(requests: AsyncIterator[Any], context: Context) -> AsyncIterator[Any]:
            started = time.monotonic()
            try:
                ctx = await self._context(context)
            except Exception as error:  # noqa: BLE001 - refused: one status, then the stream ends
                failed = _failed(name, error)
                _count(name, failed.code, started)
                yield new("TelemetryCommand", status=failed)
                return
            _count(name, status().code, started)
            async for command in self._telemetry(requests, ctx):
                yield command

        return call


def _failed(name: str, error: BaseException) -> Any:
    if not isinstance(error, BrokerError | RocketMQError):
        log.exception("RocketMQ %s failed", name, exc_info=error)
    return status_of(error)


def _count(name: str, code: int | None, started: float) -> None:
    ROCKETMQ_RPCS.labels(name, enum_name("Code", code) if code is not None else "NONE").inc()
    ROCKETMQ_RPC_LATENCY.labels(name).observe(time.monotonic() - started)


@asynccontextmanager
async def rocketmq_listener(
    broker: BrokerHandle, authority: Authority, settings: Settings, presence: Presence
) -> AsyncIterator[RocketMQListener]:
    """The listener while the broker serves (the app does not come here when ``HALFMQ_GRPC_PORT`` is 0)."""
    listener = RocketMQListener(broker, authority, settings, presence)
    await listener.start()
    try:
        yield listener
    finally:
        await listener.stop()
