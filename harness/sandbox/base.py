"""The sandbox interface every backend implements (local bubblewrap, docker, modal).

A sandbox is opened for a `PreparedTask`: the repository appears at `/testbed` (a copy-on-write
view of the prepared snapshot at `base_commit`), the task's environment at `/patchgym/venv`
(read-only), with no network. Commands run with a timeout; the whole process tree dies when the
timeout hits. Output is capped, with a notice of what was cut. `close()` is idempotent, and a sandbox
never outlives the process that opened it (backends clean up after crashed owners on start).

All methods are blocking and thread-safe; `arun` and friends are the asyncio forms (by default they
run the blocking call in a worker thread, so an event loop is never blocked; a backend may do
better: the local one's `arun` runs on the event loop itself, with no thread per command).
Backends are found by name in the package's table (`patchgym.harness.sandbox.get_factory`).
"""

from __future__ import annotations

import abc
import asyncio
from dataclasses import dataclass, field
from typing import Any

from patchgym.tasks.prepared import TESTBED, PreparedTask


class SandboxError(RuntimeError):
    """The sandbox itself failed (could not start, vanished): an infrastructure error, not the agent's."""


class SandboxClosed(SandboxError):
    """A call on a sandbox that is already closed."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandbox. None means the backend's default is not tightened."""

    timeout_s: float = 120.0  # wall time per command
    memory_bytes: int = 2 * 1024**3  # memory of all processes in the sandbox
    # processes/threads alive at once (1024: an honest stress test keeping 300 threads alive was
    # `process_limit_hit` under 256, fpAH; `environment.processes` raises it for a task)
    max_processes: int = 1024
    max_file_bytes: int = 256 * 1024**2  # largest single file a process may write
    max_output_bytes: int = 1024 * 1024  # stdout+stderr returned per command (head and tail kept)
    max_write_bytes: int = 1024**3  # total size of what the sandbox may write (its upper layer and /tmp)


@dataclass(frozen=True)
class CommandResult:
    exit_code: int  # -N when killed by signal N; 124 style codes are NOT used: see timed_out
    output: str  # stdout and stderr interleaved as the process wrote them, capped
    timed_out: bool
    duration_s: float
    truncated_bytes: int = 0  # how much output was cut (the notice is also inside `output`)
    stdout: str | None = None  # separate streams, when the backend keeps them apart
    stderr: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. {"oom_killed": True, "pids_limited": True}

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Sandbox(abc.ABC):
    """One isolated workspace over one prepared task."""

    backend: str = "abstract"
    #: What this backend guarantees, in words (shown by `patchgym ... --help` and docs).
    guarantees: str = ""

    def __init__(self, prepared: PreparedTask, limits: Limits | None = None) -> None:
        self.prepared = prepared
        self.limits = limits or Limits()

    # --- blocking API -------------------------------------------------------------------------
    @abc.abstractmethod
    def run(
        self,
        command: str,
        *,
        timeout_s: float | None = None,
        env: dict[str, str] | None = None,
        cwd: str = TESTBED,
        stdin: str | None = None,
    ) -> CommandResult:
        """Run `command` with `bash -lc`-like semantics (`bash -c`), inside the sandbox."""

    @abc.abstractmethod
    def read_file(self, path: str) -> bytes:
        """Read a file inside the sandbox (absolute, or relative to /testbed). FileNotFoundError if absent."""

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write a file inside the sandbox, creating parent directories."""

    @abc.abstractmethod
    def diff(self) -> str:
        """Unified diff (git format, binary-safe) of /testbed against base_commit: new, deleted,
        binary and mode changes included; files ignored by the repository stay out."""

    @abc.abstractmethod
    def close(self) -> None:
        """Kill everything in the sandbox and remove what it wrote. Idempotent."""

    @property
    @abc.abstractmethod
    def closed(self) -> bool: ...

    # --- conveniences -------------------------------------------------------------------------
    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def arun(self, command: str, **kwargs: Any) -> CommandResult:
        return await asyncio.to_thread(self.run, command, **kwargs)

    async def aread_file(self, path: str) -> bytes:
        return await asyncio.to_thread(self.read_file, path)

    async def awrite_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        await asyncio.to_thread(self.write_file, path, data, mode)

    async def adiff(self) -> str:
        return await asyncio.to_thread(self.diff)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)


class SandboxFactory(abc.ABC):
    """Opens sandboxes of one backend. One per process is enough; it is thread-safe."""

    backend: str = "abstract"

    @abc.abstractmethod
    def open(self, prepared: PreparedTask, limits: Limits | None = None, *, network: bool = False) -> Sandbox:
        """Open a sandbox. `network=True` only for trusted setup steps, never for agents or grading."""

    def close_all(self) -> None:
        """Close every sandbox this factory opened and has not closed yet."""

    async def aopen(self, prepared: PreparedTask, limits: Limits | None = None, *, network: bool = False) -> Sandbox:
        return await asyncio.to_thread(self.open, prepared, limits, network=network)


# The name-to-backend table lives in the package (harness/sandbox/__init__.py), which imports the
# backends lazily; it is re-exported here for the callers that import it from base.
from patchgym.harness.sandbox import get_factory  # noqa: E402,F401
