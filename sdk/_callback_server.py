"""The HTTP server a :class:`~sdk.TransactionProducer` runs so the broker can back-check it.

A stdlib ``ThreadingHTTPServer`` on a background thread: no extra dependency, and
each check runs on its own thread so one slow ``check_local_transaction`` does not
hold up the others. Every request must carry
``X-Halfmq-Signature: sha256=<hex HMAC-SHA256(secret, raw body)>``; anything else
is refused with 401 before the body is even parsed, so only the broker this
producer registered with (which alone knows the per-instance secret) can make it
run user code.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

logger = logging.getLogger("halfmq.sdk")

SIGNATURE_HEADER = "X-Halfmq-Signature"
MAX_BODY_BYTES = 16 * 1024 * 1024  # a 4 MiB message, base64-inflated, plus headers

CheckAnswerer = Callable[[dict[str, Any]], str]
"""Takes a decoded check request, returns ``"COMMIT" | "ROLLBACK" | "UNKNOWN"``."""


def sign(secret: bytes, body: bytes) -> str:
    """The signature header value the broker sends for ``body``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def signature_valid(secret: bytes, body: bytes, header: str | None) -> bool:
    """Constant-time check of a ``sha256=<hex>`` signature header."""
    return header is not None and hmac.compare_digest(sign(secret, body), header.strip())


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a hung listener must not keep the process alive
    secret: bytes
    answer: CheckAnswerer


class _CheckHandler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "halfmq-sdk-callback"

    def do_POST(self) -> None:  # http.server's naming
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._reply(411, {"error": {"code": "LENGTH_REQUIRED", "message": "Content-Length required"}})
            return
        if not 0 <= length <= MAX_BODY_BYTES:
            self._reply(413, {"error": {"code": "MESSAGE_TOO_LARGE", "message": "check body too large"}})
            return
        body = self.rfile.read(length)
        if not signature_valid(self.server.secret, body, self.headers.get(SIGNATURE_HEADER)):
            logger.warning("refused a back-check with a missing or bad signature from %s", self.client_address[0])
            self._reply(401, {"error": {"code": "INVALID_SIGNATURE", "message": "bad or missing signature"}})
            return
        try:
            check = json.loads(body)
            if not isinstance(check, dict):
                raise ValueError("check body must be a JSON object")
        except ValueError as exc:
            self._reply(400, {"error": {"code": "INVALID_REQUEST", "message": str(exc)}})
            return
        self._reply(200, {"state": self.server.answer(check)})

    def do_GET(self) -> None:  # http.server's naming
        self._reply(200, {"status": "ok"})

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # http.server's signature
        logger.debug("callback server: " + format, *args)


class CallbackServer:
    """Serves back-checks on ``host:port`` (0 = any free port) until :meth:`close`."""

    def __init__(self, host: str, port: int, secret: bytes, answer: CheckAnswerer) -> None:
        self._server = _Server((host, port), _CheckHandler)
        self._server.secret = secret
        self._server.answer = answer
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
            name=f"halfmq-callback-{self.port}", daemon=True,
        )

    @property
    def host(self) -> str:
        """The address the server is bound to."""
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        """The port the server is bound to (the real one when 0 was asked for)."""
        return int(self._server.server_address[1])

    def start(self) -> None:
        """Start serving on the background thread."""
        self._thread.start()

    def close(self) -> None:
        """Stop serving and release the socket."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()
