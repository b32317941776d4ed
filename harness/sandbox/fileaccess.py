"""File access in a local sandbox: `read_file` and `write_file`.

Owns: the fast path from the host beneath the overlay (`/testbed` and `/tmp`, through descriptors
opened at open time, with openat2 and no symlink following: safefs.py), the slow path inside the
sandbox when the path needs a symlink followed or lies elsewhere (a fixed script of ours run as a
command, `_run_internal`: only regular files, so a FIFO cannot block the call), the read limit, and
turning a failed in-sandbox operation into an OSError with the right errno (`os_error`).

`FileAccess` is a mixin: it expects of the class it is mixed into `name`, `limits`, `_env`,
`_closed`, `_testbed_fd`, `_tmp_fd`, `_check_open()`, `_shell()`, `_start()`, `_kill()` and
`_reap()` (LocalSandbox and launch.Launcher).

Does not cover: the diff (gitdiff.py) or commands (local.py, launch.py, pump.py).
"""

from __future__ import annotations

import errno
import os
import re
import subprocess

from patchgym.harness.sandbox import safefs
from patchgym.harness.sandbox.base import SandboxClosed, SandboxError
from patchgym.tasks.prepared import TESTBED


def sandbox_path(path: str) -> str:
    if not isinstance(path, str) or not path or "\0" in path:
        raise ValueError(f"a sandbox path must be a non-empty string without NUL bytes, got {path!r}")
    return path if path.startswith("/") else f"{TESTBED}/{path}"


def os_error(stderr: bytes, path: str) -> OSError:
    """The OSError of a file operation that failed inside the sandbox: the errno its shell's message
    names, with the system's wording once (`[Errno 30] Read-only file system: '/usr/x'`, not the
    shell's `sh: line 2: /usr/x: Read-only file system` inside it); EIO with that message cleaned of
    the shell's prefix when no errno is recognised."""
    message = stderr.decode(errors="replace").strip() or "operation failed"
    for text, code in (
        ("Read-only file system", errno.EROFS), ("Permission denied", errno.EACCES),
        ("No space left", errno.ENOSPC), ("Not a directory", errno.ENOTDIR),
        ("File too large", errno.EFBIG), ("Is a directory", errno.EISDIR),
        ("No such file or directory", errno.ENOENT), ("not a regular file", errno.EINVAL),
    ):
        if text in message:
            return OSError(code, text if code == errno.EINVAL else os.strerror(code), path)
    return OSError(errno.EIO, re.sub(r"^(?:\S*sh: (?:line )?\d+: )", "", message.splitlines()[-1]), path)


class FileAccess:
    """read_file and write_file of LocalSandbox (a mixin)."""

    def _run_internal(self, script: str, args: list[str], data: bytes | None, limit: int) -> tuple[int, bytes, bytes]:
        """Run a fixed shell script of ours in the sandbox; stdout bounded by `limit` bytes."""
        launch = self._start(
            self._shell(script, *args), env=dict(self._env), cwd="/",
            stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        try:
            out, err = launch.proc.communicate(input=data, timeout=self.limits.timeout_s or 120.0)
        except subprocess.TimeoutExpired:
            self._kill(launch)
            raise SandboxError(f"file operation in sandbox {self.name} timed out")
        finally:
            self._reap(launch)
        return launch.proc.returncode, out[:limit + 1], err[-4000:]

    def _locate(self, path: str) -> tuple[int, str] | None:
        if path == TESTBED or path.startswith(TESTBED + "/"):
            return self._testbed_fd, path[len(TESTBED) + 1 :]
        if path == "/tmp" or path.startswith("/tmp/"):
            return self._tmp_fd, path[len("/tmp/") :]
        return None

    def _read_limit(self) -> int:
        return max(self.limits.max_file_bytes or 0, self.limits.max_write_bytes or 0, 64 << 20)

    def read_file(self, path: str) -> bytes:
        try:
            return self._read_file(path)
        except OSError as exc:
            if self._closed and exc.errno == errno.EBADF:
                raise SandboxClosed(f"sandbox {self.name} was closed during the read") from exc
            raise

    def _read_file(self, path: str) -> bytes:
        self._check_open()
        path = sandbox_path(path)
        limit = self._read_limit()
        located = self._locate(path)
        if located is not None:
            try:
                return safefs.read_beneath(located[0], located[1], limit)
            except safefs.NeedsSandbox:
                pass
        # Only regular files: opening a FIFO (`ln -s /tmp/fifo x`) would block until the timeout.
        script = (
            'if [ -d "$1" ]; then exit 21; elif [ ! -e "$1" ]; then exit 2; elif [ ! -f "$1" ]; then exit 22; fi; '
            'exec head -c "$2" -- "$1"'
        )
        code, out, err = self._run_internal(script, [path, str(limit + 1)], None, limit)
        if code == 2:
            raise FileNotFoundError(errno.ENOENT, "no such file in the sandbox", path)
        if code == 21:
            raise IsADirectoryError(errno.EISDIR, "is a directory", path)
        if code == 22:
            raise OSError(errno.EINVAL, "not a regular file (fifo, socket or device)", path)
        if code != 0:
            raise os_error(err, path)
        if len(out) > limit:
            raise OSError(errno.EFBIG, f"file is over the {limit}-byte read limit", path)
        return out

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        try:
            self._write_file(path, data, mode)
        except OSError as exc:
            if self._closed and exc.errno == errno.EBADF:
                raise SandboxClosed(f"sandbox {self.name} was closed during the write") from exc
            raise

    def _write_file(self, path: str, data: bytes | str, mode: int) -> None:
        self._check_open()
        path = sandbox_path(path)
        payload = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
        if self.limits.max_file_bytes is not None and len(payload) > self.limits.max_file_bytes:
            raise OSError(errno.EFBIG, f"{len(payload)} bytes is over the {self.limits.max_file_bytes}-byte file limit", path)
        if not isinstance(mode, int) or not 0 <= mode <= 0o7777:
            raise ValueError(f"mode must be an int permission like 0o644, got {mode!r}")
        located = self._locate(path)
        if located is not None:
            try:
                safefs.write_beneath(located[0], located[1], payload, mode)
                return
            except safefs.NeedsSandbox:
                pass
        # An existing FIFO or device is refused: `cat > fifo` would block until the timeout.
        script = (
            'if [ -e "$1" ] && [ ! -f "$1" ]; then echo "not a regular file (fifo, socket or device)" >&2; exit 22; fi; '
            'mkdir -p -- "$(dirname -- "$1")" && cat > "$1" && chmod "$2" -- "$1"'
        )
        code, _, err = self._run_internal(script, [path, f"{mode:o}"], payload, 0)
        if code != 0:
            raise os_error(err, path)
