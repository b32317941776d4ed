"""The sync client's HTTP/1.1 pool (env/http11.py) against a scripted socket server: keep-alive,
stale connections, body framings, timeouts and broken answers."""

from __future__ import annotations

import socket
import threading
import time
from typing import Callable

import httpx
import pytest

from patchgym.env.http11 import Http11Pool, Http11Transport, Timeouts

Handler = Callable[[socket.socket, bytes], bool]  # (connection, request bytes) -> keep the connection open?


class ScriptedServer:
    """Accepts connections; for each request it reads (up to the blank line plus Content-Length)
    it calls `handler`. Records how many connections were accepted and every request seen."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self.open: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self.open.append(conn)
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                head, _, rest = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(rest) < length:
                    rest += conn.recv(65536)
                request, buffer = head + b"\r\n\r\n" + rest[:length], rest[length:]
                self.requests.append(request)
                if not self.handler(conn, request):
                    conn.close()
                    return
        except OSError:
            return

    def close(self) -> None:
        self.sock.close()
        for conn in self.open:
            try:
                conn.close()
            except OSError:
                pass


def reply(body: bytes = b'{"ok": true}', status: str = "200 OK", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 " + status.encode() + b"\r\nContent-Length: %d\r\n" % len(body) + extra + b"\r\n" + body


@pytest.fixture()
def pool():
    made = Http11Pool(max_connections=4)
    yield made
    made.close()


def get(pool: Http11Pool, server: ScriptedServer, target: bytes = b"/x", **kwargs) -> object:  # noqa: ANN003
    return pool.request("GET", "http", "127.0.0.1", server.port, target, [], b"", Timeouts(read=5), **kwargs)


def test_keep_alive_reuses_one_connection_and_sends_each_request_whole(pool) -> None:  # noqa: ANN001
    server = ScriptedServer(lambda conn, req: conn.sendall(reply()) or True)
    try:
        for _ in range(5):
            answer = get(pool, server)
            assert answer.status == 200 and answer.body == b'{"ok": true}'
        posted = pool.request("POST", "http", "127.0.0.1", server.port, b"/p?q=1", [(b"X-A", b"b")], b'{"k": 1}', Timeouts(read=5))
        assert posted.status == 200
        assert server.connections == 1
        request = server.requests[-1]
        assert request.startswith(b"POST /p?q=1 HTTP/1.1\r\n")
        assert b"\r\nHost: 127.0.0.1:%d\r\n" % server.port in request and b"\r\nX-A: b\r\n" in request
        assert b"\r\nContent-Length: 8\r\n" in request and request.endswith(b'\r\n\r\n{"k": 1}')
    finally:
        server.close()


def test_a_connection_the_server_closed_while_idle_is_replaced(pool) -> None:  # noqa: ANN001
    server = ScriptedServer(lambda conn, req: conn.sendall(reply()) or True)
    try:
        assert get(pool, server).status == 200
        for conn in server.open:  # the server drops its idle keep-alive connection
            conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        time.sleep(0.05)
        assert get(pool, server).status == 200
        assert server.connections == 2
    finally:
        server.close()


def test_a_reused_connection_closed_before_answering_is_retried_once_on_a_new_one(pool) -> None:  # noqa: ANN001
    answered = []

    def handler(conn: socket.socket, req: bytes) -> bool:
        if len(answered) == 1 and server.connections == 1:
            return False  # closes the reused connection without an answer (an idle-close race)
        answered.append(req)
        conn.sendall(reply())
        return True

    server = ScriptedServer(handler)
    try:
        assert get(pool, server).status == 200
        assert get(pool, server).status == 200
        assert server.connections == 2 and len(answered) == 2
    finally:
        server.close()


def test_a_fresh_connection_closed_without_an_answer_is_an_error_not_a_retry(pool) -> None:  # noqa: ANN001
    server = ScriptedServer(lambda conn, req: False)
    try:
        with pytest.raises(httpx.RemoteProtocolError, match="without answering"):
            get(pool, server)
        assert server.connections == 1
    finally:
        server.close()


@pytest.mark.parametrize(
    "raw, body, keeps",
    [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5;x=y\r\npedia\r\n0\r\nT: 1\r\n\r\n", b"Wikipedia", True),
        (b"HTTP/1.1 100 Continue\r\n\r\n" + reply(b"after"), b"after", True),
        (reply(b"bye", extra=b"Connection: close\r\n"), b"bye", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", b"ok", False),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b"", True),
    ],
)
def test_body_framings(pool, raw: bytes, body: bytes, keeps: bool) -> None:  # noqa: ANN001
    server = ScriptedServer(lambda conn, req: conn.sendall(raw) or True)
    try:
        assert get(pool, server).body == body
        get(pool, server)
        assert server.connections == (1 if keeps else 2)
    finally:
        server.close()


def test_a_body_until_close(pool) -> None:  # noqa: ANN001
    server = ScriptedServer(lambda conn, req: conn.sendall(b"HTTP/1.1 200 OK\r\n\r\nstreamed to the end") and False)
    try:
        assert get(pool, server).body == b"streamed to the end"
    finally:
        server.close()


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", "status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "ended after 5 of 10"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "bad header line"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000 + b"\r\n\r\n", "too long"),
    ],
)
def test_broken_answers_are_protocol_errors(pool, raw: bytes, message: str) -> None:  # noqa: ANN001
    server = ScriptedServer(lambda conn, req: conn.sendall(raw) and False)
    try:
        with pytest.raises(httpx.RemoteProtocolError, match=message):
            get(pool, server)
    finally:
        server.close()


def test_timeouts_and_refused_connections(pool) -> None:  # noqa: ANN001
    server = ScriptedServer(lambda conn, req: time.sleep(2) or True)
    try:
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            pool.request("GET", "http", "127.0.0.1", server.port, b"/slow", [], b"", Timeouts(read=0.2))
        assert time.monotonic() - started < 1.5
    finally:
        server.close()
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with pytest.raises(httpx.ConnectError, match="cannot connect"):
        pool.request("GET", "http", "127.0.0.1", port, b"/", [], b"", Timeouts(connect=2))
    with pytest.raises(httpx.UnsupportedProtocol):
        pool.request("GET", "ftp", "127.0.0.1", port, b"/", [], b"", Timeouts())


def test_the_pool_bounds_requests_in_flight() -> None:
    server = ScriptedServer(lambda conn, req: time.sleep(0.5) or conn.sendall(reply()) or True)
    small = Http11Pool(max_connections=1)
    try:
        holder = threading.Thread(target=lambda: small.request("GET", "http", "127.0.0.1", server.port, b"/", [], b"", Timeouts(read=5)))
        holder.start()
        time.sleep(0.1)
        with pytest.raises(httpx.PoolTimeout):
            small.request("GET", "http", "127.0.0.1", server.port, b"/", [], b"", Timeouts(read=5, pool=0.1))
        holder.join()
    finally:
        small.close()
        server.close()


def test_as_an_httpx_transport() -> None:
    server = ScriptedServer(lambda conn, req: conn.sendall(reply(b'{"n": 3}', extra=b"Content-Type: application/json\r\n")) or True)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", transport=Http11Transport()) as client:
            response = client.post("/a/b", json={"x": "\u00e9"}, params={"q": "1 2"})
            assert response.status_code == 200 and response.json() == {"n": 3}
            assert response.headers["content-type"] == "application/json"
        request = server.requests[-1]
        assert request.startswith(b"POST /a/b?q=1+2 HTTP/1.1\r\n")
        assert request.count(b"Host:") + request.count(b"host:") == 1
        assert request.endswith('{"x":"\u00e9"}'.encode())
    finally:
        server.close()
