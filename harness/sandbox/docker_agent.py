"""A command server inside a docker sandbox, so an operation costs a message, not a `docker exec`.

Every `docker exec` costs the engine a runc start (~100 ms measured here at load 11, ~50 ms idle),
and grading does eight or more operations (files written, the test command, results read). So a
sandbox whose image has python3 starts one long-lived exec at open, `python3 -c SERVER`, marked
`PATCHGYM_CMD=server`, and sends it requests over that exec's stdin; it answers on stdout.

Frames, both ways: a 4-byte big-endian length, then the body. A request's body is a JSON header,
a newline, and the payload (a command's stdin, a file's bytes). An answer's body is a 1-byte kind,
the 4-byte request id, and data: `o` output bytes of a running command, `x` its exit status (JSON),
`d` a file's bytes, `e` an errno for a file operation (JSON).

The server makes itself non-dumpable (prctl PR_SET_DUMPABLE 0) before it answers: code running
in the container (an agent's, or a patch's during grading) cannot open `/proc/<server>/fd/1` and
inject forged answers (a command's exit status, a results file's content) into the stream, nor
read its memory; without CAP_SYS_PTRACE, which no sandbox process has, /proc refuses both.

Requests: `run` (argv, env: the process starts with `PATCHGYM_CMD=<id>` so the backend's reaper
can find what it started), `read` (path, limit) and `write` (path, mode). The server runs each in
threads of its own; it never interprets a command. Killing on timeout stays with the backend (a
separate exec of its reaper), which spares the server. If the agent kills the server (`kill -9 -1`
as root in the container), the host side sees the stream end, fails what was in flight, and the
sandbox starts a new one on its next operation.

This module holds the server's source and the host side (`AgentChannel`); docker_backend.py decides
when to use it (images without python3 use one exec per operation).
"""

from __future__ import annotations

import json
import queue
import struct
import threading
from typing import Any

SERVER_ID = "server"  # its PATCHGYM_CMD: the reaper always spares it

SERVER = r'''
import ctypes, json, os, stat, struct, subprocess, sys, threading
# Not dumpable: no process in the container (none has CAP_SYS_PTRACE) may open /proc/<this>/fd/1
# and write forged answers into the stream, or read this process's memory. Refuse to serve without.
if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
    sys.exit(3)
out = sys.stdout.buffer
inp = sys.stdin.buffer
lock = threading.Lock()

def send(kind, rid, data=b""):
    body = kind + struct.pack(">I", rid) + data
    with lock:
        out.write(struct.pack(">I", len(body)) + body)
        out.flush()

def read_exact(n):
    data = b""
    while len(data) < n:
        part = inp.read(n - len(data))
        if not part:
            raise EOFError
        data += part
    return data

def run(rid, head, payload):
    env = dict(os.environ)
    env.update(head.get("env") or {})
    try:
        proc = subprocess.Popen(head["argv"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=env, cwd="/", close_fds=True)
    except OSError as exc:
        send(b"o", rid, ("patchgym: could not start the command: %s\n" % exc).encode())
        send(b"x", rid, json.dumps({"code": 126}).encode())
        return
    def feed():
        try:
            if payload:
                proc.stdin.write(payload)
        except OSError:
            pass
        finally:
            try:
                proc.stdin.close()
            except OSError:
                pass
    threading.Thread(target=feed, daemon=True).start()
    fd = proc.stdout.fileno()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        send(b"o", rid, chunk)
    send(b"x", rid, json.dumps({"code": proc.wait()}).encode())

def read(rid, head):
    path, limit = head["path"], head["limit"]
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(21, "is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise OSError(22, "not a regular file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # never blocks on a swapped-in FIFO
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(22, "not a regular file")
            if info.st_size > limit:
                raise OSError(27, "over the read limit")
            chunks, total = [], 0
            while total <= limit:
                part = os.read(fd, 1 << 20)
                if not part:
                    break
                chunks.append(part)
                total += len(part)
        finally:
            os.close(fd)
        if total > limit:
            raise OSError(27, "over the read limit")
        send(b"d", rid, b"".join(chunks))
    except OSError as exc:
        send(b"e", rid, json.dumps({"errno": exc.errno or 5}).encode())

def write(rid, head, payload):
    path = head["path"]
    try:
        if os.path.isdir(path):
            raise IsADirectoryError(21, "is a directory")
        os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(22, "not a regular file")
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, head["mode"])
        finally:
            os.close(fd)
        send(b"d", rid)
    except OSError as exc:
        send(b"e", rid, json.dumps({"errno": exc.errno or 5}).encode())

def serve(rid, head, payload):
    try:
        op = head["op"]
        if op == "run":
            run(rid, head, payload)
        elif op == "read":
            read(rid, head)
        elif op == "write":
            write(rid, head, payload)
    except Exception as exc:
        send(b"e", rid, json.dumps({"errno": 5, "message": repr(exc)}).encode())

send(b"h", 0, json.dumps({"pid": os.getpid()}).encode())
while True:
    try:
        (size,) = struct.unpack(">I", read_exact(4))
        body = read_exact(size)
    except EOFError:
        break
    newline = body.index(b"\n")
    head = json.loads(body[:newline])
    threading.Thread(target=serve, args=(head["id"], head, body[newline + 1:]), daemon=True).start()
'''


class AgentGone(RuntimeError):
    """The server inside the container is gone (killed by the agent, or the container is)."""


class AgentChannel:
    """The host side: send requests, route the answers to their callers by request id."""

    def __init__(self, sock: Any) -> None:
        self._sock = getattr(sock, "_sock", sock)
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._waiting: dict[int, queue.SimpleQueue] = {0: queue.SimpleQueue()}  # 0: the server's hello
        self._next = 1
        self.alive = True
        self.pid: int | None = None
        self._reader = threading.Thread(target=self._read_loop, name="patchgym-docker-agent", daemon=True)
        self._reader.start()

    # --- the docker stream: 8-byte headers (stream, 0, 0, 0, size), stdout frames only ----------
    def _read_loop(self) -> None:
        buffer = bytearray()
        try:
            while True:
                header = self._recv_exact(8)
                payload = self._recv_exact(int.from_bytes(header[4:], "big"))
                buffer += payload
                while len(buffer) >= 4:
                    size = int.from_bytes(buffer[:4], "big")
                    if len(buffer) < 4 + size:
                        break
                    body = bytes(buffer[4:4 + size])
                    del buffer[:4 + size]
                    kind, rid = body[:1], struct.unpack(">I", body[1:5])[0]
                    with self._lock:
                        target = self._waiting.get(rid)
                    if target is not None:
                        target.put((kind, body[5:]))
        except (OSError, EOFError):
            pass
        finally:
            with self._lock:
                self.alive = False
                waiting = list(self._waiting.values())
            for target in waiting:
                target.put((b"!", b""))

    def _recv_exact(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            part = self._sock.recv(size - len(data))
            if not part:
                raise EOFError
            data += part
        return bytes(data)

    def wait_ready(self, timeout: float) -> bool:
        """True once the server said hello; False if it could not start (no python3 in the image)."""
        try:
            kind, data = self._waiting[0].get(timeout=timeout)
        except queue.Empty:
            return False
        self.done(0)
        if kind != b"h":
            return False
        self.pid = int(json.loads(data)["pid"])  # in the container's pid namespace: the reaper spares it
        return True

    def request(self, head: dict[str, Any], payload: bytes = b"") -> tuple[int, "queue.SimpleQueue"]:
        """Send a request; returns its id and the queue its answers arrive on (kind, data)."""
        answers: queue.SimpleQueue = queue.SimpleQueue()
        with self._lock:
            if not self.alive:
                raise AgentGone("the sandbox's command server is gone")
            rid = self._next
            self._next += 1
            self._waiting[rid] = answers
        body = json.dumps(dict(head, id=rid)).encode() + b"\n" + payload
        try:
            with self._send_lock:
                self._sock.sendall(struct.pack(">I", len(body)) + body)
        except OSError as exc:
            self.done(rid)
            raise AgentGone(f"the sandbox's command server is gone ({exc})") from exc
        return rid, answers

    def done(self, rid: int) -> None:
        with self._lock:
            self._waiting.pop(rid, None)

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass
