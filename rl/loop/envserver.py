"""The environment a run talks to: a URL it is given, or a bundled `patchgym serve` it starts.

Owns `EnvServer`: with `url = "bundled"` it starts `python -m patchgym.main serve` as a subprocess
on loopback with `--port 0` (a free port), serving only the run's tasks, waits for the line
`patchgym: serving N task(s) at http://HOST:PORT` (task preparation happens before it), and stops
it (SIGTERM, then SIGKILL) when the run ends; with `--parent-pid` it also shuts itself down when
this process dies without stopping it (a run killed outright). Its stderr goes to `RUN_DIR/envserver.log`. The loop
then reaches it over real HTTP through `patchgym.env.client`, as any trainer would; this module
does not import the environment at all (rl/ may only use its client).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Sequence

SERVING = re.compile(r"serving (\d+) task\(s\) at (http://\S+)")


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


class EnvServerError(RuntimeError):
    """The bundled environment server did not start; the message quotes its log."""


class EnvServer:
    """A context manager that yields the environment's base URL."""

    def __init__(
        self,
        url: str,
        *,
        tasks: str = "bundled",
        task_ids: Sequence[str] = (),
        log_path: Path | None = None,
        token: str | None = None,
        max_episodes: int = 64,
        max_turns: int | None = None,
        start_timeout_s: float = 900.0,
    ) -> None:
        self.url = url
        self.tasks = tasks
        self.task_ids = list(dict.fromkeys(task_ids))
        self.log_path = log_path
        self.token = token
        self.max_episodes = max_episodes
        self.max_turns = max_turns
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[str] | None = None
        self.base_url: str | None = None if url == "bundled" else url

    def __enter__(self) -> str:
        if self.url != "bundled":
            return self.url
        # SIGTERM to this process must still stop the server (it runs in its own session): turn it
        # into SystemExit so `__exit__` runs. Only in the main thread, where signals are delivered.
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _exit_on_sigterm)
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "patchgym.main", "serve", "--tasks", self.tasks, "--host", "127.0.0.1",
               "--port", "0", "--max-episodes", str(self.max_episodes), "--log-level", "warning"]
        for task_id in self.task_ids:
            cmd += ["--id", task_id]
        if self.max_turns is not None:
            cmd += ["--max-turns", str(self.max_turns)]
        return cmd + ["--parent-pid", str(os.getpid())]  # it shuts down if this process dies

    def start(self) -> str:
        env = dict(os.environ)
        if self.token:
            env["PATCHGYM_TOKEN"] = self.token
        log = open(self.log_path, "a") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            self.command(), stdout=subprocess.PIPE, stderr=log, text=True, env=env, start_new_session=True,
        )
        found: list[str] = []

        def read() -> None:
            assert self.proc and self.proc.stdout
            for line in self.proc.stdout:
                match = SERVING.search(line)
                if match and not found:
                    found.append(match.group(2))
            # keep draining so the server never blocks on a full pipe

        reader = threading.Thread(target=read, name="envserver-stdout", daemon=True)
        reader.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not found:
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                raise EnvServerError(f"the bundled environment server exited with {code} before serving{self._tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise EnvServerError(f"the bundled environment server did not start within {self.start_timeout_s:.0f} s{self._tail()}")
            time.sleep(0.05)
        self.base_url = found[0]
        return self.base_url

    def _tail(self) -> str:
        if not self.log_path or not Path(self.log_path).exists():
            return ""
        lines = Path(self.log_path).read_text(errors="replace").splitlines()[-15:]
        return (":\n" + "\n".join(lines)) if lines else ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=5)
