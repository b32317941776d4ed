"""A lean HTTP/1.1 client connection pool for the sync client, usable as an httpx transport too.

`EnvClient` sends many small requests (a step every few seconds per rollout) to one server, and the
bundled loop waits on each. httpx's default transport (httpcore and h11, pure Python), its request
and response models, and the standard library's header parser together cost about 0.8 ms a
request on top of the round trip, and httpcore writes a request's headers and body in two sends,
which wakes the server twice (bench/serve/RESULTS.md). `Http11Pool` does only what this client
needs:

* one `sendall` per request (headers and body together), TCP_NODELAY set;
* responses with Content-Length, chunked, or read-until-close bodies; 1xx answers skipped;
  keep-alive unless the server says `Connection: close` (or speaks HTTP/1.0);
* a keep-alive pool per (scheme, host, port), at most `max_connections` requests in flight;
* an idle connection whose peer has closed it (uvicorn closes idle keep-alive connections after a
  few seconds) is dropped before reuse; if a reused connection turns out closed while sending or
  before any byte of the answer, the request goes once more on a new connection: a server closes
  only idle connections, so it never saw the first attempt;
* timeouts for connect, write, read and waiting for a free slot; failures raise httpx's
  exceptions (`ConnectError`, `ConnectTimeout`, `ReadTimeout`, `WriteTimeout`,
  `RemoteProtocolError`, `PoolTimeout`), so callers handle one family of errors.

`EnvClient` calls `Http11Pool.request` directly; `Http11Transport` wraps the same pool as an httpx
transport. Plain HTTP and HTTPS (default certificate checks); no proxies, no HTTP/2: pass another
httpx transport to `EnvClient(transport=...)` when those are needed.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
from dataclasses import dataclass
from typing import Any

import httpx

DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_LINE = 65536  # a status or header line longer than this is refused
MAX_HEADERS = 200


class _PeerClosed(Exception):
    """The connection was found closed before any byte of the answer arrived."""


@dataclass
class Timeouts:
    connect: float | None = 30.0
    read: float | None = None
    write: float | None = None
    pool: float | None = None


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str, default: str | None = None) -> str | None:
        name = name.lower()
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return default


class _Connection:
    """One keep-alive socket, with the buffered reader every read of it goes through."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = sock.makefile("rb")

    def idle_and_open(self) -> bool:
        """False when the peer has closed it (or sent something unasked): it is readable while idle."""
        poller = select.poll()
        try:
            poller.register(self.sock, select.POLLIN | select.POLLERR | select.POLLHUP)
            return not poller.poll(0)
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        for thing in (self.reader, self.sock):
            try:
                thing.close()
            except OSError:
                pass


class Http11Pool:
    """Keep-alive connections to HTTP/1.1 servers. Thread-safe: many rollout threads can share one."""

    def __init__(self, *, max_connections: int = 512, ssl_context: ssl.SSLContext | None = None) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_connections)
        self._ssl_context = ssl_context
        self._closed = False

    def request(
        self,
        method: str,
        scheme: str,
        host: str,
        port: int,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes = b"",
        timeouts: Timeouts | None = None,
        *,
        for_request: httpx.Request | None = None,
    ) -> Answer:
        """Send one request (`target`: the path and query, `headers` without Host, which is added)
        and read its answer."""
        if self._closed:
            raise RuntimeError("the HTTP pool is closed")
        if scheme not in DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}: http or https", request=for_request)
        timeouts = timeouts or Timeouts()
        key = (scheme, host, port)
        host_header = host.encode("idna") if port == DEFAULT_PORTS[scheme] else b"%s:%d" % (host.encode("idna"), port)
        lines = [b"%s %s HTTP/1.1" % (method.encode("ascii"), target), b"Host: " + host_header]
        lines += [b"%s: %s" % pair for pair in headers]
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append(b"Content-Length: %d" % len(body))
        payload = b"\r\n".join(lines) + b"\r\n\r\n" + body
        if not self._slots.acquire(timeout=timeouts.pool):
            raise httpx.PoolTimeout("no connection became free within the pool timeout", request=for_request)
        try:
            for attempt in range(2):
                connection, reused = self._checkout(key, timeouts.connect, for_request)
                try:
                    answer, keep = self._exchange(connection, method, payload, timeouts)
                except _PeerClosed as exc:
                    connection.close()
                    if reused and attempt == 0:
                        continue  # closed by the server while idle: it never saw the request
                    raise httpx.RemoteProtocolError(f"the server closed the connection without answering ({exc})",
                                                    request=for_request) from None
                except socket.timeout:
                    connection.close()
                    raise httpx.ReadTimeout(f"no answer within the read timeout ({timeouts.read} s)",
                                            request=for_request) from None
                except (OSError, ValueError) as exc:
                    connection.close()
                    raise httpx.RemoteProtocolError(f"bad answer from the server: {type(exc).__name__}: {exc}",
                                                    request=for_request) from exc
                if keep:
                    self._checkin(key, connection)
                else:
                    connection.close()
                return answer
            raise AssertionError("unreachable")  # pragma: no cover
        finally:
            self._slots.release()

    # --- the pool ---------------------------------------------------------------------------------
    def _checkout(self, key: tuple[str, str, int], connect_timeout: float | None,
                  for_request: httpx.Request | None) -> tuple[_Connection, bool]:
        while True:
            with self._lock:
                pool = self._idle.get(key)
                connection = pool.pop() if pool else None
            if connection is None:
                return self._connect(key, connect_timeout, for_request), False
            if connection.idle_and_open():
                return connection, True
            connection.close()

    def _checkin(self, key: tuple[str, str, int], connection: _Connection) -> None:
        with self._lock:
            if not self._closed:
                self._idle.setdefault(key, []).append(connection)
                return
        connection.close()

    def _connect(self, key: tuple[str, str, int], timeout: float | None, for_request: httpx.Request | None) -> _Connection:
        scheme, host, port = key
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except socket.timeout:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out", request=for_request) from None
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}", request=for_request) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                context = self._ssl_context or ssl.create_default_context()
                sock = context.wrap_socket(sock, server_hostname=host)
        except socket.timeout:
            sock.close()
            raise httpx.ConnectTimeout(f"the TLS handshake with {host}:{port} timed out", request=for_request) from None
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}", request=for_request) from None
        return _Connection(sock)

    # --- one exchange -----------------------------------------------------------------------------
    @staticmethod
    def _exchange(connection: _Connection, method: str, payload: bytes, timeouts: Timeouts) -> tuple[Answer, bool]:
        sock, reader = connection.sock, connection.reader
        sock.settimeout(timeouts.write)
        try:
            sock.sendall(payload)
        except socket.timeout:
            raise httpx.WriteTimeout(f"the request could not be sent within {timeouts.write} s") from None
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError) as exc:
            raise _PeerClosed(type(exc).__name__) from None
        sock.settimeout(timeouts.read)
        while True:
            try:
                line = reader.readline(MAX_LINE + 1)
            except (ConnectionResetError, ConnectionAbortedError) as exc:
                raise _PeerClosed(type(exc).__name__) from None
            if not line:
                raise _PeerClosed("end of stream")
            version, status, headers = _status_and_headers(line, reader)
            if not 100 <= status < 200 or status == 101:
                break
        keep = version == b"HTTP/1.1"
        length: int | None = None
        chunked = False
        for name, value in headers:
            lowered = name.lower()
            if lowered == "connection":
                tokens = {token.strip().lower() for token in value.split(",")}
                keep = "keep-alive" in tokens if version != b"HTTP/1.1" else "close" not in tokens
            elif lowered == "transfer-encoding":
                chunked = value.lower().replace(" ", "").endswith("chunked")
            elif lowered == "content-length":
                if not value.strip().isdigit():
                    raise ValueError(f"bad Content-Length {value!r}")
                length = int(value)
        if method == "HEAD" or status in (204, 304):
            body = b""
        elif chunked:
            body = _read_chunked(reader)
        elif length is not None:
            body = reader.read(length)
            if len(body) != length:
                raise ValueError(f"the body ended after {len(body)} of {length} bytes")
        else:
            body = reader.read()
            keep = False
        return Answer(status, headers, body), keep

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pools, self._idle = list(self._idle.values()), {}
        for pool in pools:
            for connection in pool:
                connection.close()


def _status_and_headers(line: bytes, reader: Any) -> tuple[bytes, int, list[tuple[str, str]]]:
    if len(line) > MAX_LINE:
        raise ValueError("status line too long")
    parts = line.rstrip(b"\r\n").split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP/1.x status line: {line[:80]!r}")
    headers: list[tuple[str, str]] = []
    while True:
        raw = reader.readline(MAX_LINE + 1)
        if len(raw) > MAX_LINE:
            raise ValueError("header line too long")
        if raw in (b"\r\n", b"\n"):
            break
        if not raw:
            raise ValueError("the answer ended inside its headers")
        name, sep, value = raw.decode("latin-1").partition(":")
        if not sep:
            raise ValueError(f"bad header line {raw[:80]!r}")
        headers.append((name.strip(), value.strip()))
        if len(headers) > MAX_HEADERS:
            raise ValueError("too many headers")
    return parts[0], int(parts[1]), headers


def _read_chunked(reader: Any) -> bytes:
    chunks = []
    while True:
        size_line = reader.readline(MAX_LINE + 1)
        if not size_line:
            raise ValueError("the chunked body ended early")
        size = int(size_line.split(b";", 1)[0].strip() or b"x", 16)
        if size == 0:
            while reader.readline(MAX_LINE + 1) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        chunk = reader.read(size)
        if len(chunk) != size:
            raise ValueError("the chunked body ended early")
        chunks.append(chunk)
        reader.readline(MAX_LINE + 1)  # the CRLF after the chunk


class Http11Transport(httpx.BaseTransport):
    """`Http11Pool` as an httpx transport (for httpx clients; `EnvClient` uses the pool directly)."""

    def __init__(self, *, max_connections: int = 512, ssl_context: ssl.SSLContext | None = None) -> None:
        self.pool = Http11Pool(max_connections=max_connections, ssl_context=ssl_context)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        extensions = request.extensions.get("timeout", {})
        timeouts = Timeouts(extensions.get("connect"), extensions.get("read"), extensions.get("write"), extensions.get("pool"))
        headers = [(name, value) for name, value in request.headers.raw if name.lower() not in (b"host", b"content-length")]
        answer = self.pool.request(
            request.method, url.scheme, url.host, url.port or DEFAULT_PORTS.get(url.scheme, 0), url.raw_path,
            headers, request.read(), timeouts, for_request=request,
        )
        return httpx.Response(answer.status, headers=answer.headers, content=answer.body, request=request,
                              extensions={"http_version": b"HTTP/1.1"})

    def close(self) -> None:
        self.pool.close()
