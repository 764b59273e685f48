"""The broker's HTTP protocol: each answer in one write, and every byte of every answer in order."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn

from app.one_write_http import FLUSH_BYTES, OneWriteHttpToolsProtocol, _JoinedTransport


class _Socket:
    """Stands in for a transport: what reached the socket, write by write (a writelines is one)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def writelines(self, chunks: list[bytes]) -> None:
        self.writes.append(b"".join(chunks))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> str:
        return f"info:{name}"


def test_the_writes_of_one_step_reach_the_socket_as_one() -> None:
    async def scenario() -> list[bytes]:
        sink = _Socket()
        joined = _JoinedTransport(sink)  # type: ignore[arg-type]
        joined.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        joined.write(b"{}")
        assert sink.writes == []  # nothing yet: the step is not over
        await asyncio.sleep(0)
        return sink.writes

    assert asyncio.run(scenario()) == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]


def test_a_close_sends_what_is_pending_first_and_a_large_answer_is_not_held() -> None:
    async def scenario() -> tuple[list[bytes], bool, list[bytes], str]:
        sink = _Socket()
        joined = _JoinedTransport(sink)  # type: ignore[arg-type]
        joined.write(b"last words")
        joined.close()
        closed_after = (list(sink.writes), sink.closed)
        big = _Socket()
        joined = _JoinedTransport(big)  # type: ignore[arg-type]
        joined.write(b"h" * 100)
        joined.write(b"b" * FLUSH_BYTES)
        return closed_after[0], closed_after[1], big.writes, joined.get_extra_info("peername")

    writes, closed, big_writes, info = asyncio.run(scenario())
    assert writes == [b"last words"] and closed
    assert big_writes == [b"h" * 100 + b"b" * FLUSH_BYTES]  # at once, without waiting for the step's end
    assert info == "info:peername"  # everything else is the transport's


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    size = int(scope["path"].rsplit("/", 1)[1])
    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", str(size).encode())]})
    await send({"type": "http.response.body", "body": body})


def test_a_real_server_answers_pipelined_and_large_requests_whole_and_in_order() -> None:
    async def scenario() -> list[bytes]:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        config = uvicorn.Config(
            _app, host="127.0.0.1", port=port, http=OneWriteHttpToolsProtocol, lifespan="off", log_level="warning"
        )
        server = uvicorn.Server(config)
        serving = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            sizes = [3, 300_000, 0, 7]
            writer.write(b"".join(f"GET /{size} HTTP/1.1\r\nhost: x\r\n\r\n".encode() for size in sizes))
            writer.write(b"GET /5 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            await writer.drain()
            received = await asyncio.wait_for(reader.read(), 10)  # to the end: the server closes after the last
            writer.close()
            return _bodies(received)
        finally:
            server.should_exit = True
            await serving

    expected = [bytes(range(256)) * (n // 256) + b"x" * (n % 256) for n in (3, 300_000, 0, 7, 5)]
    assert asyncio.run(scenario()) == expected


def _bodies(stream: bytes) -> list[bytes]:
    """The bodies of consecutive HTTP/1.1 answers with Content-Length."""
    bodies = []
    while stream:
        head, _, rest = stream.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        bodies.append(rest[:length])
        stream = rest[length:]
    return bodies
