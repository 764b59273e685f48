"""A raw Kafka-protocol connection for tests: one kio request in, its kio response out.

For what no installed client sends (a chosen API version, a request to a broker that is
not the coordinator): the test builds the request with kio's dataclasses and reads the
answer the real broker process gives.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

_SIZE = struct.Struct(">i")


class KafkaWire:
    def __init__(self, address: str, timeout: float = 20.0) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def call(self, request: Any) -> Any:
        """Send ``request`` (a kio request of some version) and read its response of the same version."""
        from kio.index import load_payload_module
        from kio.static.constants import EntityType

        self.correlation_id += 1
        header_type = request.__header_schema__
        header = header_type(
            **{
                name: value
                for name, value in {
                    "request_api_key": request.__api_key__,
                    "request_api_version": request.__version__,
                    "correlation_id": self.correlation_id,
                    "client_id": "halfmq-tests",
                }.items()
                if name in header_type.__dataclass_fields__
            }
        )
        body = io.BytesIO()
        entity_writer(header_type)(body, header)
        entity_writer(type(request))(body, request)
        self.sock.sendall(_SIZE.pack(len(body.getvalue())) + body.getvalue())
        frame = self._read(_SIZE.unpack(self._read(4))[0])
        response_type = load_payload_module(request.__api_key__, request.__version__, EntityType.response)
        response_class = getattr(response_type, type(request).__name__.removesuffix("Request") + "Response")
        header_reader = entity_reader(response_class.__header_schema__)
        response_header, used = header_reader(frame, 0)
        assert response_header.correlation_id == self.correlation_id
        response, _ = entity_reader(response_class)(frame, used)
        return response

    def _read(self, size: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            chunk = self.sock.recv(size - len(chunks))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            chunks += chunk
        return bytes(chunks)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> KafkaWire:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
