"""A real HTTP callback server standing in for a producer's transaction listener."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

Answer = Callable[[dict[str, Any]], str | None]


class CallbackServer:
    """Answers each check with ``answer(check)`` (None: reply 500) and records what it received."""

    def __init__(self, answer: Answer, delay: float = 0.0) -> None:
        self.answer = answer
        self.delay = delay
        self.received: list[tuple[dict[str, Any], dict[str, str], bytes]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real listener would

            def do_POST(self) -> None:  # http.server's naming
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                check = json.loads(raw)
                server.received.append((check, dict(self.headers), raw))
                if server.delay:
                    threading.Event().wait(server.delay)
                state = server.answer(check)
                body = json.dumps({"state": state}).encode() if state else b"boom"
                self.send_response(200 if state else 500)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/check"

    def checked_ids(self) -> list[str]:
        return [check["message_id"] for check, _, _ in self.received]

    def start(self) -> CallbackServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> CallbackServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
