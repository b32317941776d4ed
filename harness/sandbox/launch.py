"""Launching and reaping the local backend's bwrap processes: one bwrap per command, started by
the namespace worker inside the sandbox's mount namespace and cgroups.

Owns: `Launch` (one started bwrap and the pipe on which it reports its sandbox's init), `Pipes`
(that info pipe, and with cgroup v2 the block pipe bwrap waits on until its init is in the
sandbox's groups), and `Launcher`, the part of LocalSandbox that starts (`_start`, `_astart`),
confines (v1: born in the groups; v2: moved in by pid and rlimits set before it runs), kills
(bwrap's process group and the pid namespace's init, or the whole cgroup when the init is not
known yet), reaps, and abandons a start nobody waits for any more (interrupted or cancelled).

`Launcher` is a mixin: it expects of the class it is mixed into `name`, `limits`, `cgroups`,
`_factory`, `_layout`, `_lock`, `_procs`, `_ns_fd`, `_thread_fds` and `_check_open()` (see
LocalSandbox.__init__).

Does not cover: what a command's shell sets first (rlimits.py), reading its output or waiting on
its exit (pump.py), the mounts (mountplan.py), or the cgroups themselves (cgroups.py).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import Future
from typing import Any

from patchgym.harness.sandbox import bwrap as bw
from patchgym.harness.sandbox import mountns, rlimits
from patchgym.harness.sandbox.base import SandboxError
from patchgym.harness.sandbox.pump import readable

START_TIMEOUT_S = 30.0  # bwrap must report its child within this long


class Launch:
    """One started bwrap: the process, and the pipe on which bwrap reports its sandbox's init."""

    def __init__(self, proc: subprocess.Popen, info_fd: int) -> None:
        self.proc = proc
        self.child: int | None = None
        self._info_fd: int | None = info_fd
        self._info = b""
        self._lock = threading.Lock()

    def child_pid(self, wait_s: float = 0.0) -> int | None:
        """The host pid of the sandbox's init, read from bwrap's info pipe when first needed
        (waiting up to `wait_s` for bwrap to report it)."""
        deadline = time.monotonic() + wait_s
        with self._lock:
            while self.child is None and self._info_fd is not None:
                try:
                    chunk = os.read(self._info_fd, 4096)
                except BlockingIOError:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not readable(self._info_fd, remaining):
                        break
                    continue
                if not chunk:
                    break
                self._info += chunk
                try:
                    self.child = int(json.loads(self._info)["child-pid"])
                except (ValueError, KeyError):
                    continue
            return self.child

    def close(self) -> None:
        with self._lock:
            if self._info_fd is not None:
                os.close(self._info_fd)
                self._info_fd = None


class Pipes:
    """The pipes of one bwrap start: bwrap reports its sandbox's init on `info`; with cgroup v2 it
    waits on `block` until that init is in the sandbox's groups."""

    def __init__(self, needs_join: bool) -> None:
        self.info_r, self.info_w = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self.info_r, False)
        self.block_r, self.block_w = os.pipe2(os.O_CLOEXEC) if needs_join else (None, None)
        self.passed = (self.info_w,) if self.block_r is None else (self.info_w, self.block_r)
        self._lock = threading.Lock()

    def _close(self, *names: str) -> None:
        with self._lock:
            for name in names:
                fd = getattr(self, name)
                if fd is not None:
                    os.close(fd)
                    setattr(self, name, None)

    def close_child_ends(self) -> None:
        """Ours to close once bwrap has them (or will never get them)."""
        self._close("info_w", "block_r")

    def close_block(self) -> None:
        self._close("block_w")

    def close_info(self) -> None:
        self._close("info_r")

    def close_all(self) -> None:
        self._close("info_w", "block_r", "block_w", "info_r")


class Launcher:
    """Starting, confining, killing and reaping a sandbox's commands (a mixin of LocalSandbox)."""

    def _submit_start(
        self,
        command: list[str],
        *,
        env: dict[str, str],
        cwd: str,
        stdin: Any,
        stdout: Any,
        stderr: Any,
        binds: tuple[tuple[str, str, bool], ...] = (),
        caps: tuple[str, ...] = (),
    ) -> "tuple[Future[Launch], Pipes]":
        """Queue the start of `command` (already wrapped by `_shell`) on the namespace worker,
        inside the sandbox's cgroups (`binds` and `caps`: for our own trusted commands only, see
        `diff`). The worker takes the sandbox's lock to spawn, so a `close` comes either before
        (the start is refused) or after (it finds the process and kills it); it enters the
        namespace through a duplicate of its descriptor, which `close` cannot pull away.

        With cgroup v1 or none, bwrap starts without waiting on us: it is born in the groups
        (`_spawn_in_groups`) and the shell sets the rlimits. With v2 the sandbox's first process
        is moved into its group by pid: bwrap waits (`--block-fd`) until `_join` has done that."""
        needs_join = self.cgroups is not None and self.cgroups.version == "v2"
        pipes = Pipes(needs_join)
        argv = bw.bwrap_argv(
            self._factory.bwrap_path(), self._layout, command, env=env, cwd=cwd,
            info_fd=pipes.info_w, block_fd=pipes.block_r, new_session=bw.has_controlling_terminal(),
            binds=binds, caps=caps, own_ipc=self.cgroups is not None,
        )

        def spawn() -> Launch:
            with self._lock:
                self._check_open()
                proc = self._spawn_in_groups(
                    argv, stdin=stdin, stdout=stdout, stderr=stderr, env={},
                    pass_fds=pipes.passed, process_group=0,  # not setsid: ~7 ms slower exit (measured)
                )
                launch = Launch(proc, pipes.info_r)
                self._procs[proc.pid] = launch
                return launch

        try:
            with self._lock:
                self._check_open()
                ns_fd = os.dup(self._ns_fd)
            try:
                return mountns.worker().submit_in(ns_fd, spawn, close_fd=True), pipes
            except BaseException:
                os.close(ns_fd)
                raise
        except BaseException:
            pipes.close_all()
            raise

    def _start(self, command: list[str], **options: Any) -> "Launch":
        """Start `command` and return once it runs (see `_submit_start`)."""
        future, pipes = self._submit_start(command, **options)
        try:
            launch = future.result()
        except BaseException:
            self._abandon_when_done(future, pipes)  # interrupted while queued or spawning, or it failed
            raise
        pipes.close_child_ends()
        if pipes.block_w is None:
            return launch
        try:
            launch.child = self._read_child_pid(pipes.info_r, launch.proc)
            self._join(launch.child, pipes)
            return launch
        except BaseException:
            pipes.close_block()
            self._kill_and_reap(launch)
            raise

    async def _astart(self, command: list[str], **options: Any) -> "Launch":
        """`_start` for asyncio: the event loop waits for the worker instead of a thread."""
        future, pipes = self._submit_start(command, **options)
        try:
            launch = await asyncio.wrap_future(future)
        except BaseException:
            self._abandon_when_done(future, pipes)  # cancelled while queued or spawning, or it failed
            raise
        pipes.close_child_ends()
        if pipes.block_w is None:
            return launch
        try:
            launch.child = await asyncio.to_thread(self._read_child_pid, pipes.info_r, launch.proc)
            self._join(launch.child, pipes)
            return launch
        except BaseException:
            pipes.close_block()
            await asyncio.to_thread(self._kill_and_reap, launch)
            raise

    def _abandon_when_done(self, future: "Future[Launch]", pipes: "Pipes") -> None:
        """A start nobody waits for any more: once the worker is done with it (the pipes are its
        until then), close them, and kill and reap whatever it started."""
        future.add_done_callback(lambda done: self._abandon(done, pipes))  # runs now if already done

    def _abandon(self, future: "Future[Launch]", pipes: "Pipes") -> None:
        pipes.close_child_ends()
        pipes.close_block()
        if future.cancelled() or future.exception() is not None:
            pipes.close_info()
            return
        threading.Thread(target=self._kill_and_reap, args=(future.result(),), daemon=True).start()

    def _kill_and_reap(self, launch: "Launch") -> None:
        self._kill(launch)
        self._reap(launch)

    def _join(self, child: int, pipes: "Pipes") -> None:
        """v2: the sandbox's first process into its groups, its rlimits set, then let bwrap go on."""
        self._confine(child)
        assert pipes.block_w is not None
        os.write(pipes.block_w, b"1")
        pipes.close_block()

    def _spawn_in_groups(self, argv: list[str], **popen: Any) -> subprocess.Popen:
        """On the namespace worker thread: start bwrap already inside the sandbox's cgroups.

        With cgroup v1 the thread steps into the groups, forks, and steps back, so bwrap and all
        it forks are born inside; with v2 the sandbox's first process is moved in by pid in
        `_confine` (before it runs anything)."""
        if self.cgroups is None:
            return rlimits.spawn_with_ipc_limits(argv, self.limits.memory_bytes, self._factory.worker_ipc_fd(), **popen)
        if not self._thread_fds:
            return subprocess.Popen(argv, **popen)
        home_fds = self._factory.worker_home_fds(on_worker=True)
        # Opened beforehand: /sys is not mounted in the sandbox's namespace.
        try:
            for fd in self._thread_fds:
                os.pwrite(fd, b"0", 0)
            return subprocess.Popen(argv, **popen)
        except OSError as exc:
            if exc.errno == errno.EAGAIN:
                raise SandboxError(f"sandbox {self.name} is at its process limit: cannot start a command") from exc
            raise
        finally:
            for fd in home_fds:
                os.pwrite(fd, b"0", 0)

    def _read_child_pid(self, info_r: int, proc: subprocess.Popen) -> int:
        data = b""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                return int(json.loads(data)["child-pid"])
            except (ValueError, KeyError):
                pass
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SandboxError(f"bwrap did not start within {START_TIMEOUT_S:.0f}s")
            if readable(info_r, remaining):
                try:
                    chunk = os.read(info_r, 4096)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                data += chunk
        # bwrap exited before it made the sandbox: its message is on stdout/stderr.
        message = ""
        try:
            out, err = proc.communicate(timeout=5)
            message = b"".join(x for x in (out, err) if x).decode(errors="replace").strip()
        except subprocess.TimeoutExpired:
            pass
        self._check_open()
        raise SandboxError(f"bwrap failed to start the sandbox: {message or f'exit code {proc.returncode}'}")

    def _confine(self, child: int) -> None:
        """Cgroups and rlimits for the sandbox's first process, before it runs anything."""
        limits = self.limits
        if self.cgroups is not None and self.cgroups.version != "v1":
            try:
                self.cgroups.join(child)
            except OSError as exc:
                self._check_open()
                raise SandboxError(f"cannot move the sandbox into its cgroups: {exc}") from exc
        rlimits.set_rlimits(child, limits, self.cgroups is not None)

    def _kill(self, launch: "Launch") -> None:
        """SIGKILL one command: bwrap's process group and its sandbox's init (the pid namespace,
        so every process of that command, dies with it). When the init is not known yet, also
        every process in the sandbox's cgroups (other commands running at the same time included;
        `close` kills those anyway)."""
        proc = launch.proc
        for kill in (lambda: os.killpg(proc.pid, signal.SIGKILL), lambda: os.kill(proc.pid, signal.SIGKILL)):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass
        child = launch.child_pid(wait_s=0.5)
        if child is not None:
            try:
                os.kill(child, signal.SIGKILL)  # the pid namespace's init: everything inside dies with it
            except ProcessLookupError:
                pass
        if self.cgroups is not None and child is None:
            self.cgroups.kill_all(2.0)

    def _reap(self, launch: "Launch") -> int:
        try:
            code = launch.proc.wait()
        finally:
            launch.close()
            with self._lock:
                self._procs.pop(launch.proc.pid, None)
        return code
