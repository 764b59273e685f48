"""The Spark source's wire (``sdk._stdlib_transport``) against a real HTTP server on a socket.

What a client of it would notice: answers arrive whole and decoded, connections are
reused and a closed one is replaced, and every failure is the httpx error the SDK's retry
loop decides on.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from sdk._http import NO_RETRY, Call, Transport
from sdk._stdlib_transport import StdlibTransport
from sdk.errors import BrokerUnavailableError, HalfmqError
from tests.support.broker_process import free_port

LARGE = bytes(range(256)) * 20_000  # 5 MB, as an Arrow page of 5,000 messages


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    connections = 0  # one handler per accepted connection

    def setup(self) -> None:
        Handler.connections += 1
        super().setup()

    def log_message(self, format: str, *args: object) -> None:  # keep the test output quiet
        pass

    def _answer(self, status: int, body: bytes, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/echo"):
            headers = {name.lower(): value for name, value in self.headers.items()}
            self._answer(200, json.dumps({"path": self.path, "headers": headers}).encode())
        elif self.path == "/large":
            self._answer(200, LARGE, Content_Type="application/vnd.apache.arrow.stream")
        elif self.path == "/gzip":
            self._answer(200, gzip.compress(b'{"zipped": true}'), Content_Encoding="gzip")
        elif self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (b'{"in": ', b'"pieces"}'):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/short":  # promises more than it sends, then hangs up
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"only this")
            self.close_connection = True
        elif self.path == "/slow":
            time.sleep(1.0)
            self._answer(200, b"{}")
        elif self.path == "/close":
            self._answer(200, b"{}", Connection="close")
            self.close_connection = True
        elif self.path == "/missing":
            self._answer(404, b'{"error": {"code": "TOPIC_NOT_FOUND", "message": "no such topic"}}')

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self._answer(200, json.dumps({"received": json.loads(body)}).encode())


@pytest.fixture
def server() -> Iterator[str]:
    Handler.connections = 0
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def client(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, transport=StdlibTransport(), timeout=5.0) as client:
        yield client


def test_answers_arrive_whole_with_their_headers_and_the_query(client: httpx.Client) -> None:
    echoed = client.get("/echo", params={"offset": 5, "isolation": "read_committed"}, headers={"X-Tag": "a"}).json()
    assert echoed["path"] == "/echo?offset=5&isolation=read_committed"
    assert echoed["headers"]["x-tag"] == "a" and echoed["headers"]["host"].startswith("127.0.0.1:")
    large = client.get("/large")
    assert large.status_code == 200 and large.content == LARGE
    assert large.headers["content-type"] == "application/vnd.apache.arrow.stream"
    assert client.post("/post", json={"offsets": [1, 2]}).json() == {"received": {"offsets": [1, 2]}}


def test_gzip_and_chunked_answers_are_decoded(client: httpx.Client) -> None:
    assert client.get("/gzip").json() == {"zipped": True}
    assert client.get("/chunked").json() == {"in": "pieces"}


def test_one_connection_serves_request_after_request(client: httpx.Client) -> None:
    for _ in range(5):
        client.get("/echo")
    assert Handler.connections == 1


def test_a_connection_the_server_closed_is_replaced(client: httpx.Client) -> None:
    assert client.get("/close").status_code == 200  # the server hangs up after answering
    assert client.get("/echo").status_code == 200
    assert Handler.connections == 2


def test_threads_share_the_pool_and_each_gets_its_own_answer(client: httpx.Client) -> None:
    def ask(n: int) -> str:
        return str(client.get("/echo", params={"n": n}).json()["path"])

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(ask, range(64))) == [f"/echo?n={n}" for n in range(64)]


def test_failures_are_the_httpx_errors_the_retry_loop_knows(server: str) -> None:
    closed_port = free_port()  # nothing listens there
    with httpx.Client(transport=StdlibTransport(), timeout=5.0) as client:
        with pytest.raises(httpx.ConnectError):
            client.get(f"http://127.0.0.1:{closed_port}/")
        with pytest.raises(httpx.RemoteProtocolError):
            client.get(f"{server}/short")
        with pytest.raises(httpx.ReadTimeout):
            client.get(f"{server}/slow", timeout=httpx.Timeout(5.0, read=0.2))
        with pytest.raises(httpx.UnsupportedProtocol):
            client.get("ftp://127.0.0.1/")


def test_the_sdk_transport_keeps_its_errors_on_this_wire(server: str) -> None:
    closed_port = free_port()  # nothing listens there
    on_wire = Transport(server, retry=NO_RETRY, wire=StdlibTransport())
    with pytest.raises(HalfmqError) as missing:
        on_wire.call(Call("GET", "/missing", parse=lambda body: body))
    assert (missing.value.status, missing.value.code) == (404, "TOPIC_NOT_FOUND")
    on_wire.close()
    nobody = Transport(f"http://127.0.0.1:{closed_port}", retry=NO_RETRY, wire=StdlibTransport())
    with pytest.raises(BrokerUnavailableError, match="ConnectError"):
        nobody.call(Call("GET", "/", parse=lambda body: body))
    nobody.close()
