"""The Kafka listener: frames in, one handler per request, frames out, in order.

As in Kafka, a connection's requests are answered one at a time in the order they came
(a client pipelines; the broker does not reorder). A frame is a 4-byte size, the request
header (v1, or v2 for flexible versions) and the request; the answer is the size, the
response header (v0, or v1 for flexible versions; ApiVersions always v0) and the response.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import struct
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from app.auth.authority import Authority
from app.handle import BrokerHandle
from app.kafka import handlers  # noqa: F401 - importing it registers every API in the table
from app.kafka.brokers import ClusterView
from app.kafka.protocol import Api, table
from app.kafka.session import Session
from app.metrics import KAFKA_CONNECTIONS, KAFKA_REQUEST_SECONDS, KAFKA_REQUESTS
from half_store.domain.errors import BrokerError
from half_store.settings import Settings

log = logging.getLogger("app.kafka")

_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hhi")
API_VERSIONS = 18
# Kafka's socket.request.max.bytes default: a larger frame closes the connection.
MAX_FRAME_BYTES = 100 * 1024 * 1024
# Before SASL has authenticated a connection (with HALFMQ_AUTH=token) only ApiVersions and the
# SASL requests are served, all tiny: a larger frame closes the connection unread, so a client
# without a token cannot make the broker buffer anything big.
MAX_UNAUTHENTICATED_FRAME_BYTES = 64 * 1024


class UnsupportedVersion(Exception):
    """A request in a version this broker does not serve: the connection closes, as in Kafka."""


class KafkaListener:
    def __init__(self, broker: BrokerHandle, settings: Settings, authority: Authority, cluster: ClusterView) -> None:
        self.broker = broker
        self.settings = settings
        self.authority = authority
        self.cluster = cluster
        self.apis = table()
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the port (useful with port 0 in tests)."""
        self._server = await asyncio.start_server(
            self._serve, host, port, reuse_port=True, limit=MAX_FRAME_BYTES, backlog=1024
        )
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(BaseException):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        session = Session(self.broker, self.settings, self.authority, self.cluster, peer=str(peer))
        KAFKA_CONNECTIONS.inc()
        try:
            while True:
                try:
                    (size,) = _SIZE.unpack(await reader.readexactly(4))
                    largest = MAX_FRAME_BYTES if session.authenticated else MAX_UNAUTHENTICATED_FRAME_BYTES
                    if not 0 < size <= largest:
                        log.warning("kafka client %s sent a frame of %d bytes; closing", peer, size)
                        return
                    # A request must arrive whole in time once it has begun, as an HTTP body must.
                    async with asyncio.timeout(self.settings.body_timeout_seconds):
                        frame = await reader.readexactly(size)
                except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
                    return
                answer = await self.answer(session, frame)
                if answer is None:
                    continue  # acks=0 produce: no response
                writer.write(answer)
                await writer.drain()
        except UnsupportedVersion as error:
            log.info("closing kafka connection from %s: %s", peer, error)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            KAFKA_CONNECTIONS.dec()
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def answer(self, session: Session, frame: bytes) -> bytes | None:
        """The response frame for one request frame (None: the request wants no response)."""
        if len(frame) < _KEY_VERSION.size:
            raise UnsupportedVersion("a request shorter than its header")
        key, version, correlation_id = _KEY_VERSION.unpack_from(frame)
        found = self.apis.get(key)
        if found is None or not found.min_version <= version <= found.max_version:
            if key == API_VERSIONS:  # KIP-511: tell a newer client what we have, in v0
                return _frame(correlation_id, False, _versions_v0(self.apis, ErrorCode.unsupported_version))
            raise UnsupportedVersion(f"api {key} v{version} is not served")
        request_type = load_request_schema(key, version)
        header, used = entity_reader(request_type.__header_schema__)(frame, 0)
        session.client_id = header.client_id
        try:
            request, _ = entity_reader(request_type)(frame, used)
        except Exception as error:
            raise UnsupportedVersion(f"api {key} v{version}: malformed request ({error})") from error
        started = time.perf_counter()
        response = await self._handle(session, found, request)
        KAFKA_REQUESTS.labels(found.name).inc()
        KAFKA_REQUEST_SECONDS.labels(found.name).observe(time.perf_counter() - started)
        if response is None:
            return None
        flexible = bool(request_type.__flexible__) and key != API_VERSIONS
        return _frame(correlation_id, flexible, response)

    async def _handle(self, session: Session, found: Api, request: Any) -> Any:
        if not session.authenticated and not found.before_auth:
            raise UnsupportedVersion(f"{found.name} before SASL authentication")
        try:
            return await found.handler(session, request)
        except BrokerError as error:
            # Handlers answer the errors their response can carry; one that escapes (the
            # database down mid-request) closes the connection, and the client retries elsewhere.
            raise UnsupportedVersion(f"{found.name} failed: {error.code} {error}") from error


def _frame(correlation_id: int, flexible_header: bool, response: Any) -> bytes:
    buffer = io.BytesIO()
    buffer.write(_SIZE.pack(0))
    buffer.write(_SIZE.pack(correlation_id))
    if flexible_header:
        buffer.write(b"\x00")  # the response header's tagged fields: none
    entity_writer(type(response))(buffer, response)
    data = buffer.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    return bytes(data)


def _versions_v0(apis: dict[int, Api], error: ErrorCode) -> Any:
    from kio.index import load_payload_module

    module = load_payload_module(API_VERSIONS, 0, EntityType.response)
    keys = tuple(module.ApiVersion(api_key=a.key, min_version=a.min_version, max_version=a.max_version) for a in apis.values())
    return module.ApiVersionsResponse(error_code=error, api_keys=keys)


@asynccontextmanager
async def kafka_listener(
    broker: BrokerHandle, settings: Settings, authority: Authority, cluster: ClusterView, host: str, port: int
) -> AsyncIterator[KafkaListener]:
    listener = KafkaListener(broker, settings, authority, cluster)
    await listener.start(host, port)
    try:
        yield listener
    finally:
        await listener.close()
