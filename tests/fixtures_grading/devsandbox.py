"""A stand-in sandbox for the grading tests while (or where) the local backend is unavailable.

It implements the `Sandbox` interface with real bubblewrap (the argument list of
patchgym.harness.sandbox.bwrap: no network, read-only system, private /tmp) over a plain copy of
the prepared repository, with per-command timeouts that kill the whole tree. It has no memory or
process limits, so the resource-bomb integrity tests require the real `local` backend.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from patchgym.harness.sandbox.base import CommandResult, Limits, Sandbox, SandboxClosed, SandboxFactory
from patchgym.harness.sandbox.bwrap import Layout, base_env, bwrap_argv, find_bwrap
from patchgym.tasks.prepared import TESTBED, PreparedTask


class DevSandbox(Sandbox):
    backend = "dev-bwrap"

    def __init__(self, prepared: PreparedTask, limits: Limits | None = None) -> None:
        super().__init__(prepared, limits)
        self._root = Path(tempfile.mkdtemp(prefix="pg-devsandbox-"))
        self._testbed = self._root / "testbed"
        self._tmp = self._root / "tmp"
        self._tmp.mkdir()
        shutil.copytree(prepared.repo_dir, self._testbed, symlinks=True)
        self._closed = False
        self._lock = threading.Lock()

    def _host(self, path: str) -> Path:
        if not path.startswith("/"):
            path = f"{TESTBED}/{path}"
        if path == TESTBED or path.startswith(TESTBED + "/"):
            return self._testbed / path[len(TESTBED) + 1 :]
        if path.startswith("/tmp/"):
            return self._tmp / path[len("/tmp/") :]
        raise PermissionError(f"{path} is outside /testbed and /tmp")

    def run(self, command: str, *, timeout_s: float | None = None, env: dict[str, str] | None = None,
            cwd: str = TESTBED, stdin: str | None = None) -> CommandResult:
        if self._closed:
            raise SandboxClosed("closed")
        full_env = base_env(self.prepared.venv_dir is not None)
        full_env.update(env or {})
        layout = Layout(testbed=str(self._testbed), tmp=str(self._tmp),
                        venv=str(self.prepared.venv_dir) if self.prepared.venv_dir else None)
        argv = bwrap_argv(find_bwrap() or "bwrap", layout, ["bash", "-c", command], env=full_env, cwd=cwd)
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        timeout = timeout_s if timeout_s is not None else self.limits.timeout_s
        try:
            out, _ = proc.communicate((stdin or "").encode(), timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            timed_out = True
        cap = self.limits.max_output_bytes
        truncated = max(0, len(out) - cap)
        if truncated:
            out = out[: cap // 2] + b"\n[... output cut ...]\n" + out[-cap // 2 :]
        return CommandResult(exit_code=proc.returncode, output=out.decode("utf-8", errors="replace"),
                             timed_out=timed_out, duration_s=time.monotonic() - started, truncated_bytes=truncated)

    def read_file(self, path: str) -> bytes:
        return self._host(path).read_bytes()

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        target = self._host(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)
        target.chmod(mode)

    def diff(self) -> str:
        return self.run("git add -A -N . && git diff --binary " + self.prepared.base_commit).output

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                shutil.rmtree(self._root, ignore_errors=True)

    @property
    def closed(self) -> bool:
        return self._closed


class DevSandboxFactory(SandboxFactory):
    backend = "dev-bwrap"

    def open(self, prepared: PreparedTask, limits: Limits | None = None, *, network: bool = False) -> Sandbox:
        return DevSandbox(prepared, limits)
