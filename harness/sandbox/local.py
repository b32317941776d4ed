"""The `local` backend: bubblewrap sandboxes over a copy-on-write view of the prepared snapshot.

A factory keeps one state directory, `<state root>/f-<owner pid>-<owner start>-<n>/` with
`owner.json`, and builds once, in a private *base* mount namespace (mountns.py), what every
sandbox shares: the read-only root (the host's system paths, bwrap.root_plan, on a small tmpfs)
and a read-only /dev (a tmpfs with the usual device nodes, `_mount_dev`).

Opening a sandbox (no process is started, nothing is copied):

1. cgroups `sb-<owner pid>-<owner start>-<n>` (v2, else v1 memory+pids; see cgroups.py) with the
   memory and process limits: the emptied groups of a closed sandbox with the same limits,
   renamed, when the factory kept some (`_take_cgroups`), else new ones;
2. a mount namespace of its own, a kernel copy of the base one, with a tmpfs of `max_write_bytes`
   (the overlay's upper and work directories, /tmp and /dev/shm: all the sandbox may write, ENOSPC
   beyond), an overlayfs at root/testbed whose lower layer is the read-only `prepared.repo_dir`,
   the task's venv bound read-only, and its own devpts and /dev/shm in the shared /dev. None of
   it appears in the host's mount table, and all of it vanishes with the owning process.

Each command is one `bwrap` (bwrap.py) started inside that namespace by the namespace worker
thread, which (cgroup v1) steps into the sandbox's groups to fork it, so everything the command
starts is born inside them; with v2 bwrap waits (`--block-fd`) until its first process has been
moved in. The shell sets RLIMIT_FSIZE and no core dumps (and RLIMIT_AS/RLIMIT_NPROC when there are
no cgroups) before the command. `run` waits in the calling thread; `arun` on the event loop (the
output through the loop's reader, the exit through a pidfd). On timeout bwrap's process group and
the command's pid-namespace init get SIGKILL (the whole tree dies with its namespace). Output is
stdout and stderr merged through one pipe, kept within `max_output_bytes` (head and tail).
Processes a command leaves in the background die when it ends (its pid namespace goes with it).
Closing kills every process in the sandbox's cgroups and drops the namespace; the emptied groups
go back to the factory (removed at its shutdown, or by the next factory if the owner died).

Files are read and written from the host beneath the overlay with openat2 and no symlink
following (safefs.py), or inside the sandbox when the path needs a symlink. The diff is computed on
the host with trusted git state only (gitdiff.py).
"""

from __future__ import annotations

import asyncio
import atexit
import errno
import itertools
import json
import math
import os
import resource
import select
import shutil
import signal
import stat
import subprocess
import threading
import time
import weakref
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from patchgym.harness.sandbox import bwrap as bw
from patchgym.harness.sandbox import cgroups as cg
from patchgym.harness.sandbox import gitdiff, linux, mountns, owners, safefs
from patchgym.harness.sandbox.base import (
    CommandResult,
    Limits,
    Sandbox,
    SandboxClosed,
    SandboxError,
    SandboxFactory,
)
from patchgym.harness.sandbox.output import CappedOutput
from patchgym.tasks.prepared import TESTBED, VENV_MOUNT, PreparedTask

SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
_SEQUENCE = itertools.count(1)
_START_TIMEOUT_S = 30.0  # bwrap must report its child within this long
SPARE_CGROUPS = 64  # emptied cgroups a factory keeps for its next sandboxes
_READ_CHUNK = 1 << 16
DIFF_GIT_DIR = "/patchgym/diff/git"  # where the diff's git sees the snapshot's trusted .git (read-only)
DIFF_SCRATCH = "/patchgym/diff/scratch"  # ... and its scratch index and objects


def _readable(fd: int, timeout_s: float) -> bool:
    """Wait until `fd` is readable (or hung up). poll(), not select(): a server holding more than
    1024 descriptors (hundreds of episodes) gets descriptor numbers select() cannot take."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0, math.ceil(timeout_s * 1000))))  # rounded up: never give up early


def _wait_until(proc: subprocess.Popen, deadline: float | None) -> bool:
    """Wait for `proc` to exit, until `deadline` (monotonic; None: no limit). True when it exited.

    With a deadline, Popen.wait polls with sleeps that start at 0.5 ms and double; bwrap usually
    exits a little after its output closes, so most commands paid one such sleep. A pidfd becomes
    readable the moment the process exits."""
    if deadline is None or proc.returncode is not None:
        proc.wait()
        return True
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (kernel < 5.3): Popen's own polling
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        if not _readable(pidfd, max(0.0, deadline - time.monotonic())):
            return False
    finally:
        os.close(pidfd)
    proc.wait()
    return True


async def _await_exit(proc: subprocess.Popen, deadline: float | None) -> bool:
    """`_wait_until` for asyncio: the loop watches a pidfd. True when the process exited."""
    if proc.poll() is not None:
        return True
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return await asyncio.to_thread(_wait_until, proc, deadline)
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()
    loop.add_reader(pidfd, lambda: exited.done() or exited.set_result(None))
    try:
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        finished, _ = await asyncio.wait({exited}, timeout=remaining)
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    if not finished:
        return False
    proc.wait()
    return True


def default_state_root() -> Path:
    home = os.environ.get("PATCHGYM_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "patchgym")
    return Path(home) / "sandboxes"


def _escape_overlay_path(path: str) -> str:
    # overlayfs splits its options on "," and lowerdir on ":"; both may be escaped with "\".
    return path.replace("\\", "\\\\").replace(",", "\\,").replace(":", "\\:")


def _validate_limits(limits: Limits) -> Limits:
    for name in ("memory_bytes", "max_processes", "max_file_bytes", "max_output_bytes", "max_write_bytes"):
        value = getattr(limits, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            raise ValueError(f"Limits.{name} must be a positive integer or None, got {value!r}")
    if limits.timeout_s is not None and not _finite_positive(limits.timeout_s):
        raise ValueError(f"Limits.timeout_s must be a positive finite number (None: no limit), got {limits.timeout_s!r}")
    if limits.max_write_bytes is not None and limits.max_write_bytes < 1024 * 1024:
        raise ValueError(f"Limits.max_write_bytes must be at least 1 MiB, got {limits.max_write_bytes}")
    return limits


def _finite_positive(value: object) -> bool:
    # inf passed a plain `> 0` check and then broke poll()'s millisecond conversion (OverflowError).
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _sandbox_path(path: str) -> str:
    if not isinstance(path, str) or not path or "\0" in path:
        raise ValueError(f"a sandbox path must be a non-empty string without NUL bytes, got {path!r}")
    return path if path.startswith("/") else f"{TESTBED}/{path}"


class _Launch:
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
                    if remaining <= 0 or not _readable(self._info_fd, remaining):
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


class _Command:
    """A checked command, ready to start: its argv, Popen options, stdin, deadline and the
    sandbox's limit counters before it."""

    def __init__(self, argv: list[str], options: dict[str, Any], stdin_data: bytes | None,
                 timeout: float | None, events_before: Any) -> None:
        self.argv, self.options, self.stdin_data, self.events_before = argv, options, stdin_data, events_before
        self.started = time.monotonic()
        self.deadline = None if timeout is None else self.started + timeout


class _Pipes:
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


class LocalSandbox(Sandbox):
    backend = "local"
    guarantees = (
        "bubblewrap with every namespace unshared (no network unless opened for trusted setup), "
        "all capabilities dropped, no nested user namespaces, no access to the owner's terminal "
        "(its own session whenever the owner has one), read-only root and system paths, "
        "/testbed a copy-on-write overlay of the read-only snapshot, private /tmp; nothing else of "
        "the host. Memory and process count limited by cgroups where available (else rlimits), file "
        "size by RLIMIT_FSIZE, total writes by a tmpfs of max_write_bytes, wall time by SIGKILL of "
        "every process in the sandbox. Processes die with the command that started them and with "
        "the owning process; mounts vanish with the owner; a later factory removes the rest."
    )

    def __init__(
        self,
        factory: "LocalSandboxFactory",
        prepared: PreparedTask,
        limits: Limits,
        *,
        name: str,
        home: Path,
        ns_fd: int,
        testbed_fd: int,
        tmp_fd: int,
        cgroups: cg.SandboxCgroups | None,
        network: bool,
    ) -> None:
        super().__init__(prepared, limits)
        self.name = name
        self.home = home  # the factory's directory: mount points (same paths in every sandbox's namespace) and scratch
        self.network = network
        self._factory = factory
        self._ns_fd = ns_fd
        self._testbed_fd = testbed_fd
        self._tmp_fd = tmp_fd
        self.cgroups = cgroups
        self._layout = bw.Layout(root=str(home / "root"), network=network, dev=str(home / "dev"))
        self.testbed_dir = str(home / "root" / "testbed")  # /testbed, as seen in the sandbox's mount namespace
        self._env = factory.base_env(prepared.venv_dir is not None)
        self._lock = threading.Lock()
        self._procs: dict[int, _Launch] = {}
        self._closed = False
        self._thread_fds: list[int] = cgroups.thread_fds() if cgroups is not None and cgroups.version == "v1" else []

    # --- processes --------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosed(f"sandbox {self.name} is closed")

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
    ) -> "tuple[Future[_Launch], _Pipes]":
        """Queue the start of `command` (already wrapped by `_shell`) on the namespace worker,
        inside the sandbox's cgroups (`binds` and `caps`: for our own trusted commands only, see
        `diff`). The worker takes the sandbox's lock to spawn, so a `close` comes either before
        (the start is refused) or after (it finds the process and kills it); it enters the
        namespace through a duplicate of its descriptor, which `close` cannot pull away.

        With cgroup v1 or none, bwrap starts without waiting on us: it is born in the groups
        (`_spawn_in_groups`) and the shell sets the rlimits. With v2 the sandbox's first process
        is moved into its group by pid: bwrap waits (`--block-fd`) until `_join` has done that."""
        needs_join = self.cgroups is not None and self.cgroups.version == "v2"
        pipes = _Pipes(needs_join)
        argv = bw.bwrap_argv(
            self._factory.bwrap_path(), self._layout, command, env=env, cwd=cwd,
            info_fd=pipes.info_w, block_fd=pipes.block_r, new_session=bw.has_controlling_terminal(),
            binds=binds, caps=caps, own_ipc=self.cgroups is not None,
        )

        def spawn() -> _Launch:
            with self._lock:
                self._check_open()
                proc = self._spawn_in_groups(
                    argv, stdin=stdin, stdout=stdout, stderr=stderr, env={},
                    pass_fds=pipes.passed, process_group=0,  # not setsid: ~7 ms slower exit (measured)
                )
                launch = _Launch(proc, pipes.info_r)
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

    def _start(self, command: list[str], **options: Any) -> "_Launch":
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

    async def _astart(self, command: list[str], **options: Any) -> "_Launch":
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

    def _abandon_when_done(self, future: "Future[_Launch]", pipes: "_Pipes") -> None:
        """A start nobody waits for any more: once the worker is done with it (the pipes are its
        until then), close them, and kill and reap whatever it started."""
        future.add_done_callback(lambda done: self._abandon(done, pipes))  # runs now if already done

    def _abandon(self, future: "Future[_Launch]", pipes: "_Pipes") -> None:
        pipes.close_child_ends()
        pipes.close_block()
        if future.cancelled() or future.exception() is not None:
            pipes.close_info()
            return
        threading.Thread(target=self._kill_and_reap, args=(future.result(),), daemon=True).start()

    def _kill_and_reap(self, launch: "_Launch") -> None:
        self._kill(launch)
        self._reap(launch)

    def _join(self, child: int, pipes: "_Pipes") -> None:
        """v2: the sandbox's first process into its groups, its rlimits set, then let bwrap go on."""
        self._confine(child)
        assert pipes.block_w is not None
        os.write(pipes.block_w, b"1")
        pipes.close_block()

    def _shell(self, script: str, *args: str) -> list[str]:
        """The shell command line for `script`, with the per-process limits set first (soft and
        hard, so the script cannot raise them: it has no CAP_SYS_RESOURCE)."""
        limits = self.limits
        unit = 1024 if SHELL.endswith("bash") else 512  # ulimit -f counts KiB in bash, 512 B blocks in POSIX sh
        steps = ["ulimit -c 0"]
        if limits.max_file_bytes is not None:
            steps.append(f"ulimit -f {-(-limits.max_file_bytes // unit)}")
        if self.cgroups is None:
            if limits.memory_bytes is not None:
                steps.append(f"ulimit -v {limits.memory_bytes // 1024}")
            if limits.max_processes is not None:
                steps.append(f"ulimit -{'u' if SHELL.endswith('bash') else 'p'} {limits.max_processes}")
        prefix = " && ".join(steps) + ' || { echo "patchgym: cannot set the sandbox limits" >&2; exit 125; }\n'
        # On a line of its own before the script, so the script keeps `bash -c` semantics.
        return [SHELL, "-c", prefix + script, *( ["sh", *args] if args else [])]

    def _spawn_in_groups(self, argv: list[str], **popen: Any) -> subprocess.Popen:
        """On the namespace worker thread: start bwrap already inside the sandbox's cgroups.

        With cgroup v1 the thread steps into the groups, forks, and steps back, so bwrap and all
        it forks are born inside; with v2 the sandbox's first process is moved in by pid in
        `_confine` (before it runs anything)."""
        if self.cgroups is None:
            return self._spawn_with_ipc_limits(argv, **popen)
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

    def _spawn_with_ipc_limits(self, argv: list[str], **popen: Any) -> subprocess.Popen:
        """Without cgroups (rlimits only): SysV shared memory and message queues live in the IPC
        namespace, outside any process's RLIMIT_AS once detached, so a command could hoard memory
        in them. The worker thread makes the command's IPC namespace itself, sets its
        kernel.shmall/shmmax to `memory_bytes` and shrinks its message queues, spawns bwrap into
        it (`own_ipc=False`: bwrap makes none) and returns to the host's. The namespace ends with
        the command's last process; inside, /proc is read-only and no capability can change it."""
        host_ipc = self._factory.worker_ipc_fd()
        linux.unshare(linux.CLONE_NEWIPC)  # this thread only
        try:
            memory = self.limits.memory_bytes
            settings = {"msgmni": 16, "msgmnb": 65536}
            if memory is not None:
                settings.update(shmmax=memory, shmall=max(1, memory // resource.getpagesize()))
            for name, value in settings.items():
                # ipc sysctls apply to the IPC namespace of the thread that writes them
                with open(f"/proc/sys/kernel/{name}", "w") as handle:
                    handle.write(str(value))
            return subprocess.Popen(argv, **popen)
        finally:
            linux.setns(host_ipc, linux.CLONE_NEWIPC)

    def _read_child_pid(self, info_r: int, proc: subprocess.Popen) -> int:
        data = b""
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            try:
                return int(json.loads(data)["child-pid"])
            except (ValueError, KeyError):
                pass
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SandboxError(f"bwrap did not start within {_START_TIMEOUT_S:.0f}s")
            if _readable(info_r, remaining):
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
        try:
            if limits.max_file_bytes is not None:
                resource.prlimit(child, resource.RLIMIT_FSIZE, (limits.max_file_bytes, limits.max_file_bytes))
            resource.prlimit(child, resource.RLIMIT_CORE, (0, 0))
            if self.cgroups is None:
                if limits.memory_bytes is not None:
                    resource.prlimit(child, resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
                if limits.max_processes is not None:
                    resource.prlimit(child, resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))
        except (OSError, ValueError) as exc:
            raise SandboxError(f"cannot set the sandbox's rlimits: {exc}") from exc

    def _kill(self, launch: "_Launch") -> None:
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

    def _reap(self, launch: "_Launch") -> int:
        try:
            code = launch.proc.wait()
        finally:
            launch.close()
            with self._lock:
                self._procs.pop(launch.proc.pid, None)
        return code

    # --- the interface ----------------------------------------------------------------------
    def _command(
        self, command: str, timeout_s: float | None, env: dict[str, str] | None, cwd: str, stdin: str | None
    ) -> "_Command":
        """Check a command's arguments (ValueError naming what is wrong) and assemble what starts it."""
        self._check_open()
        if not isinstance(command, str) or "\0" in command:
            raise ValueError(f"command must be a string without NUL bytes, got {command!r:.80}")
        timeout = self.limits.timeout_s if timeout_s is None else timeout_s
        if timeout is not None and not _finite_positive(timeout):
            raise ValueError(f"timeout_s must be a positive finite number, got {timeout!r}")
        full_env = dict(self._env)
        for key, value in (env or {}).items():
            if not isinstance(key, str) or not key or "=" in key or "\0" in key:
                raise ValueError(f"environment variable names must be non-empty, without '=' or NUL: {key!r}")
            if not isinstance(value, str) or "\0" in value:
                raise ValueError(f"environment variable {key} must be a string without NUL, got {value!r:.80}")
            full_env[key] = value
        stdin_data = stdin.encode("utf-8", "surrogateescape") if isinstance(stdin, str) else stdin
        options = dict(
            env=full_env, cwd=_sandbox_path(cwd),
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        return _Command(self._shell(command), options, stdin_data, timeout,
                        self.cgroups.events() if self.cgroups is not None else None)

    def _result(self, job: "_Command", launch: "_Launch", output: CappedOutput, timed_out: bool) -> CommandResult:
        exit_code = self._reap(launch)
        duration = time.monotonic() - job.started
        extra: dict[str, Any] = {}
        if job.events_before is not None and self.cgroups is not None:
            after = self.cgroups.events()
            if after.oom_kills > job.events_before.oom_kills:
                extra["oom_killed"] = True
            if after.pids_max_hits > job.events_before.pids_max_hits:
                extra["pids_limited"] = True
        if self._closed:
            raise SandboxClosed(f"sandbox {self.name} was closed while the command ran")
        return CommandResult(
            exit_code=exit_code, output=output.render(), timed_out=timed_out, duration_s=duration,
            truncated_bytes=output.cut, extra=extra,
        )

    def run(
        self,
        command: str,
        *,
        timeout_s: float | None = None,
        env: dict[str, str] | None = None,
        cwd: str = TESTBED,
        stdin: str | None = None,
    ) -> CommandResult:
        job = self._command(command, timeout_s, env, cwd, stdin)
        launch = self._start(job.argv, **job.options)
        output = CappedOutput(self.limits.max_output_bytes or (1 << 62))
        timed_out = self._pump(launch, output, job.stdin_data, job.deadline)
        if not timed_out and not _wait_until(launch.proc, job.deadline):
            # The output may close before the command ends (`exec >&-; sleep 100`): the deadline
            # still holds for the wait.
            timed_out = True
            self._kill(launch)
        return self._result(job, launch, output, timed_out)

    async def arun(
        self,
        command: str,
        *,
        timeout_s: float | None = None,
        env: dict[str, str] | None = None,
        cwd: str = TESTBED,
        stdin: str | None = None,
    ) -> CommandResult:
        """`run` on the event loop itself: the namespace worker starts bwrap, and the loop reads
        the output and learns of the exit (a pidfd) without a thread of its own per command.
        Only killing, rare, goes to a thread."""
        job = self._command(command, timeout_s, env, cwd, stdin)
        launch = await self._astart(job.argv, **job.options)
        output = CappedOutput(self.limits.max_output_bytes or (1 << 62))
        try:
            timed_out = await self._apump(launch, output, job.stdin_data, job.deadline)
            if not timed_out and not await _await_exit(launch.proc, job.deadline):
                timed_out = True
                await asyncio.to_thread(self._kill, launch)
        except BaseException:  # cancelled: the command must not outlive its caller
            threading.Thread(target=self._kill_and_reap, args=(launch,), daemon=True).start()
            raise
        if timed_out:
            await asyncio.to_thread(launch.proc.wait)  # killed: its teardown must not hold up the loop
        return self._result(job, launch, output, timed_out)

    async def _apump(self, launch: "_Launch", output: CappedOutput, stdin_data: bytes | None, deadline: float | None) -> bool:
        """`_pump` with the event loop's readiness callbacks. True on timeout."""
        loop = asyncio.get_running_loop()
        proc = launch.proc
        assert proc.stdout is not None
        out_fd = proc.stdout.fileno()
        os.set_blocking(out_fd, False)
        eof: asyncio.Future[None] = loop.create_future()
        pending = memoryview(stdin_data or b"")
        in_fd: int | None = None

        def on_output() -> None:
            try:
                chunk = os.read(out_fd, _READ_CHUNK)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if chunk:
                output.feed(chunk)
            else:
                loop.remove_reader(out_fd)
                if not eof.done():
                    eof.set_result(None)

        def on_input() -> None:
            nonlocal pending, in_fd
            try:
                written = os.write(in_fd, pending[:_READ_CHUNK])  # type: ignore[arg-type]
                pending = pending[written:]
            except BlockingIOError:
                return
            except OSError:
                pending = pending[:0]
            if not pending:
                loop.remove_writer(in_fd)  # type: ignore[arg-type]
                proc.stdin.close()  # type: ignore[union-attr]
                in_fd = None

        if proc.stdin is not None:
            if pending:
                in_fd = proc.stdin.fileno()
                os.set_blocking(in_fd, False)
                loop.add_writer(in_fd, on_input)
            else:
                proc.stdin.close()
        loop.add_reader(out_fd, on_output)
        try:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            finished, _ = await asyncio.wait({eof}, timeout=remaining)
            if finished:
                return False
            loop.remove_reader(out_fd)
            await asyncio.to_thread(self._kill, launch)
            await asyncio.to_thread(self._drain, out_fd, output)
            return True
        finally:
            loop.remove_reader(out_fd)
            if in_fd is not None:
                loop.remove_writer(in_fd)
            if proc.stdin is not None and not proc.stdin.closed:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            proc.stdout.close()

    def _pump(self, launch: "_Launch", output: CappedOutput, stdin_data: bytes | None, deadline: float | None) -> bool:
        """Copy output into `output` (and `stdin_data` in) until EOF or the deadline. True on timeout."""
        proc = launch.proc
        assert proc.stdout is not None
        out_fd = proc.stdout.fileno()
        in_fd = proc.stdin.fileno() if proc.stdin is not None else None
        pending = memoryview(stdin_data or b"")
        if in_fd is not None:
            os.set_blocking(in_fd, False)
            if not pending:
                proc.stdin.close()  # type: ignore[union-attr]
                in_fd = None
        poller = select.poll()
        poller.register(out_fd, select.POLLIN)
        if in_fd is not None:
            poller.register(in_fd, select.POLLOUT)
        timed_out = False
        try:
            while True:
                wait_ms = None
                if deadline is not None:
                    wait_ms = max(0, int((deadline - time.monotonic()) * 1000) + 1)
                events = poller.poll(wait_ms)
                if not events and deadline is not None and time.monotonic() >= deadline:
                    timed_out = True
                    self._kill(launch)
                    self._drain(out_fd, output)
                    return True
                done = False
                for fd, event in events:
                    if fd == out_fd:
                        chunk = os.read(out_fd, _READ_CHUNK) if event & (select.POLLIN | select.POLLHUP) else b""
                        if chunk:
                            output.feed(chunk)
                        elif event & (select.POLLHUP | select.POLLERR | select.POLLIN):
                            done = True
                    elif fd == in_fd:
                        try:
                            written = os.write(in_fd, pending[:_READ_CHUNK])
                            pending = pending[written:]
                        except (BrokenPipeError, OSError):
                            pending = pending[:0]
                        if not pending:
                            poller.unregister(in_fd)
                            proc.stdin.close()  # type: ignore[union-attr]
                            in_fd = None
                if done:
                    return timed_out
        finally:
            if in_fd is not None and proc.stdin is not None and not proc.stdin.closed:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            proc.stdout.close()

    @staticmethod
    def _drain(fd: int, output: CappedOutput, limit_s: float = 2.0) -> None:
        """After a kill: take what is left in the pipe (bounded in time)."""
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            if not _readable(fd, max(0.0, end - time.monotonic())):
                return
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except BlockingIOError:  # (non-blocking when it comes from arun)
                continue
            if not chunk:
                return
            output.feed(chunk)

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
        path = _sandbox_path(path)
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
            raise _os_error(err, path)
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
        path = _sandbox_path(path)
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
            raise _os_error(err, path)

    def diff(self) -> str:
        """git runs inside the sandbox (a bwrap like any command, in its cgroups), seeing the
        trusted `.git` and its scratch directory bound in and nothing of the host: an embedded
        `sub/.git` (`gitdir: /host/repo/.git`) that git follows then finds nothing there. It keeps
        CAP_DAC_READ_SEARCH so files the agent made unreadable (chmod 000) are still diffed. It has
        the sandbox's per-command timeout (`Limits.timeout_s`)."""
        self._check_open()
        launches: list[_Launch] = []

        def spawn(argv: list[str], *, env: dict[str, str], cwd: str, binds: Any = (), **streams: Any) -> subprocess.Popen:
            launch = self._start(argv, env=env, cwd=cwd, binds=binds, caps=("CAP_DAC_READ_SEARCH",), **streams)
            launches.append(launch)
            return launch.proc

        try:
            return gitdiff.diff_worktree(
                Path(self.prepared.repo_dir), TESTBED, self.prepared.base_commit, self.home, spawn=spawn,
                confined=gitdiff.Confinement(git_dir=DIFF_GIT_DIR, scratch=DIFF_SCRATCH),
                # Bounded like a command: a FIFO planted as an embedded repository's HEAD
                # (`sub/.git/HEAD`) blocks git's read of it until then.
                timeout_s=self.limits.timeout_s or 600.0,
            )
        except gitdiff.DiffError as exc:
            self._check_open()
            raise SandboxError(f"diff of sandbox {self.name} failed: {exc}") from exc
        finally:
            for launch in launches:
                self._reap(launch)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            launches = list(self._procs.values())
        errors: list[str] = []
        for launch in launches:
            self._kill(launch)
        if self.cgroups is not None:
            self.cgroups.kill_round()  # not waiting: the groups go to the factory, which checks again before reuse
        for fd in (self._testbed_fd, self._tmp_fd):
            os.close(fd)
        # The mounts live only in this namespace: dropping the last reference frees them all.
        os.close(self._ns_fd)
        if self.cgroups is not None:
            try:
                self._factory._release_cgroups(self.cgroups)
            except OSError as exc:
                errors.append(f"cgroup removal: {exc}")
        self._factory._forget(self)
        if errors:
            raise SandboxError(f"closing sandbox {self.name} left something behind: {'; '.join(errors)}")


def _remove_tree(path: Path, errors: list[str]) -> None:
    def onerror(func: Any, failed: str, exc_info: Any) -> None:
        errors.append(f"{failed}: {exc_info[1]}")

    shutil.rmtree(path, onerror=onerror)


def _os_error(stderr: bytes, path: str) -> OSError:
    message = stderr.decode(errors="replace").strip() or "operation failed"
    for text, code in (
        ("Read-only file system", errno.EROFS), ("Permission denied", errno.EACCES),
        ("No space left", errno.ENOSPC), ("Not a directory", errno.ENOTDIR),
        ("File too large", errno.EFBIG), ("Is a directory", errno.EISDIR),
    ):
        if text in message:
            return OSError(code, message, path)
    return OSError(errno.EIO, message, path)


_FACTORIES: "weakref.WeakSet[LocalSandboxFactory]" = weakref.WeakSet()


@atexit.register
def _close_everything_at_exit() -> None:
    for factory in list(_FACTORIES):
        try:
            factory.shutdown()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


class LocalSandboxFactory(SandboxFactory):
    """Opens bubblewrap sandboxes. Options:

    state_root: where sandbox state lives (default `$PATCHGYM_HOME/sandboxes`,
        PATCHGYM_HOME defaulting to ~/.cache/patchgym);
    bwrap: path of the bwrap executable (default: found on PATH);
    cgroups: force "v2", "v1" or "none" (default: the best usable);
    reap: remove what sandboxes of dead owners left, now (default True);
    system_paths: the host paths every sandbox sees read-only (default:
        `patchgym.tasks.hostfs.readonly_system_paths()`).

    State: one directory per factory, `<state_root>/f-<pid>-<start>-<n>/` with `owner.json`, the
    mount points `root/`, `rw/` and `dev/` (empty on the host: what is mounted there exists only inside each
    sandbox's mount namespace) and the diff scratch space. The system part of every sandbox's root
    is assembled once, in a base mount namespace, that each sandbox's namespace is a copy of.
    """

    backend = "local"

    def __init__(
        self,
        state_root: str | os.PathLike[str] | None = None,
        *,
        bwrap: str | None = None,
        cgroups: str | None = None,
        reap: bool = True,
        system_paths: list[str] | None = None,
    ) -> None:
        if cgroups not in (None, "v2", "v1", "none"):
            raise ValueError(f"cgroups must be 'v2', 'v1', 'none' or None, got {cgroups!r}")
        self.state_root = Path(state_root) if state_root is not None else default_state_root()
        self._bwrap_option = bwrap
        self._bwrap = bw.find_bwrap(bwrap)
        self.cgroup_manager = cg.detect(prefer=cgroups) if os.geteuid() == 0 else cg.CgroupManager("none", [])
        self.root_plan = bw.root_plan(system_paths)
        self._lock = threading.Lock()
        self._sandboxes: dict[str, LocalSandbox] = {}
        self._home: Path | None = None
        self._base_ns: int | None = None
        self._worker_home: list[int] | None = None
        self._worker_ipc: int | None = None
        self._spare_cgroups: list[cg.SandboxCgroups] = []
        self._base_envs: dict[bool, dict[str, str]] = {}
        self._real_paths: dict[str, Path] = {}  # prepared repositories, resolved once (~0.05 ms each)
        self.reaped: list[str] = []
        if reap and os.geteuid() == 0:
            self.reaped = self.reap()
        _FACTORIES.add(self)

    @property
    def enforcement(self) -> str:
        """Which mechanism enforces which limit, in words."""
        if self.cgroup_manager.version == "none":
            memory = "memory_bytes and max_processes by rlimits (RLIMIT_AS per process; RLIMIT_NPROC, not enforced for uid 0)"
        else:
            memory = f"memory_bytes and max_processes by {self.cgroup_manager.description}"
        return (
            f"{memory}; max_file_bytes by RLIMIT_FSIZE; core dumps off; max_write_bytes by the size of "
            "the sandbox's tmpfs (overlay upper layer and /tmp); timeout by SIGKILL of the command's bwrap "
            "and of its pid namespace (every process it started); close by SIGKILL of every process in "
            "the sandbox's cgroups"
        )

    @property
    def home(self) -> Path | None:
        """This factory's state directory (created on the first open)."""
        return self._home

    def base_env(self, has_venv: bool) -> dict[str, str]:
        """The environment commands start from (bwrap.base_env), computed once per factory."""
        env = self._base_envs.get(has_venv)
        if env is None:
            env = self._base_envs[has_venv] = bw.base_env(has_venv)
        return env

    def bwrap_path(self) -> str:
        if self._bwrap is None:
            raise SandboxError(_bwrap_missing_message(self._bwrap_option))
        return self._bwrap

    def _preflight(self) -> None:
        self.bwrap_path()
        if os.geteuid() != 0:
            raise SandboxError(
                "the local sandbox backend needs root: it mounts an overlay and a tmpfs per sandbox and "
                "creates cgroups. Run as root (CI containers usually are), or use the docker or modal backend."
            )

    def worker_home_fds(self, on_worker: bool = False) -> list[int]:
        """v1: open `tasks` files of the cgroups the namespace worker thread belongs in (opened in
        the host's namespace, from a thread that is not the worker, on the first open)."""
        if self._worker_home is None:
            if on_worker:
                raise SandboxError("internal: the worker's cgroups were not looked up before its first spawn")
            with self._lock:
                if self._worker_home is None:
                    paths = mountns.worker().run_here(self.cgroup_manager.thread_home)
                    self._worker_home = [os.open(path, os.O_WRONLY | os.O_CLOEXEC) for path in paths]
        return self._worker_home

    def worker_ipc_fd(self) -> int:
        """The host's IPC namespace, for the namespace worker to return to (opened with the base
        namespace, by the thread that opened the first sandbox: every thread is in it but the
        worker, and the worker only between two of its own system calls)."""
        if self._worker_ipc is None:
            raise SandboxError("internal: the host's IPC namespace was not opened before the first spawn")
        return self._worker_ipc

    def reap(self) -> list[str]:
        """Remove what sandboxes whose owner process died left behind. Returns their names."""
        return owners.reap(self.state_root, self.cgroup_manager)

    def _base(self) -> tuple[Path, int]:
        """The factory's directory and base mount namespace (made on first use)."""
        with self._lock:
            if self._home is None or self._base_ns is None:
                owner = owners.Owner.me()
                home = self.state_root / owners.factory_dir_name(owner, next(_SEQUENCE))
                self.state_root.mkdir(parents=True, exist_ok=True)
                home.mkdir(mode=0o700)
                for sub in ("root", "rw", "dev"):
                    (home / sub).mkdir()
                owners.write_record(home, owner)
                linux.raise_open_file_limit()  # each open sandbox holds ~7 descriptors
                try:
                    self._base_ns, _ = mountns.worker().create(lambda: _mount_system_root(home, self.root_plan))
                    if self.cgroup_manager.version == "none" and self._worker_ipc is None:
                        self._worker_ipc = os.open("/proc/self/ns/ipc", os.O_RDONLY | os.O_CLOEXEC)
                except BaseException:
                    _remove_tree(home, [])
                    raise
                self._home = home
            return self._home, self._base_ns

    def open(self, prepared: PreparedTask, limits: Limits | None = None, *, network: bool = False) -> LocalSandbox:
        self._preflight()
        limits = _validate_limits(limits or Limits())
        repo_dir = Path(prepared.repo_dir)
        if not repo_dir.is_dir():
            raise SandboxError(f"the prepared repository {repo_dir} does not exist (prepare the task first)")
        venv_dir = Path(prepared.venv_dir) if prepared.venv_dir is not None else None
        if venv_dir is not None and not venv_dir.is_dir():
            raise SandboxError(f"the prepared environment {venv_dir} does not exist")
        name = owners.sandbox_name(owners.Owner.me(), next(_SEQUENCE))
        group: cg.SandboxCgroups | None = None
        try:
            home, base_ns = self._base()
            if self.cgroup_manager.version == "v1":
                self.worker_home_fds()
            if self.cgroup_manager.version != "none":
                group = self._take_cgroups(name, limits)
            lower = self._real_paths.get(str(repo_dir))
            if lower is None:  # absolute, links resolved: the worker thread has a cwd of its own
                lower = self._real_paths[str(repo_dir)] = Path(os.path.realpath(repo_dir))
            ns_fd, (testbed_fd, tmp_fd) = mountns.worker().create(
                lambda: _mount_sandbox(home, lower, venv_dir, limits), copy_of=base_ns
            )
        except BaseException as exc:
            if group is not None:
                try:
                    group.remove(remove_parent=False)
                except OSError:
                    pass
            if isinstance(exc, (SandboxError, ValueError)):
                raise
            raise SandboxError(f"cannot open a sandbox for {prepared.instance_id}: {exc}") from exc
        sandbox = LocalSandbox(
            self, prepared, limits, name=name, home=home, ns_fd=ns_fd, testbed_fd=testbed_fd,
            tmp_fd=tmp_fd, cgroups=group, network=network,
        )
        with self._lock:
            self._sandboxes[name] = sandbox
        return sandbox

    def _take_cgroups(self, name: str, limits: Limits) -> cg.SandboxCgroups:
        """Groups for a new sandbox: ones a closed sandbox of this factory left, with the same
        limits and no process left in them, renamed to `name`; else new ones. Reuse skips a mkdir
        and an rmdir in each hierarchy and the limit writes (about 0.35 ms of the 1 ms an open
        and close cost, measured)."""
        wanted = (limits.memory_bytes, limits.max_processes)
        with self._lock:
            candidates = [group for group in self._spare_cgroups if group.limits == wanted]
        for group in candidates:
            with self._lock:
                if group not in self._spare_cgroups:
                    continue  # another thread took it
                self._spare_cgroups.remove(group)
            # Processes killed at close may still be exiting: such a group waits for a later open.
            if not group.kill_round():
                with self._lock:
                    self._spare_cgroups.append(group)
                continue
            try:
                group.rename(name)
                return group
            except OSError:
                group.remove(remove_parent=False)
        return self.cgroup_manager.create(name, limits.memory_bytes, limits.max_processes)

    def _release_cgroups(self, group: cg.SandboxCgroups) -> None:
        """After a sandbox closed (every process in its groups killed): keep the groups for a later
        open, renamed so that nothing carries the closed sandbox's name; when the factory keeps
        enough already, remove them. Their counters only ever grow, and commands compare them
        before and after."""
        with self._lock:
            keep = self._home is not None and len(self._spare_cgroups) < SPARE_CGROUPS
        if keep:
            try:
                group.rename(owners.sandbox_name(owners.Owner.me(), next(_SEQUENCE)))
            except OSError:
                pass
            else:
                with self._lock:
                    self._spare_cgroups.append(group)
                return
        group.remove(remove_parent=False)

    def _forget(self, sandbox: LocalSandbox) -> None:
        with self._lock:
            self._sandboxes.pop(sandbox.name, None)

    def open_sandboxes(self) -> list[LocalSandbox]:
        with self._lock:
            return list(self._sandboxes.values())

    def close_all(self) -> None:
        errors = []
        for sandbox in self.open_sandboxes():
            try:
                sandbox.close()
            except SandboxError as exc:
                errors.append(str(exc))
        if errors:
            raise SandboxError("; ".join(errors))

    def shutdown(self) -> None:
        """Close every sandbox and remove the factory's own state (its directory, the base
        namespace, the shared cgroup parents when empty). Idempotent; run at interpreter exit."""
        self.close_all()
        with self._lock:
            spares, self._spare_cgroups = self._spare_cgroups, []
        for group in spares:
            try:
                group.remove(remove_parent=False)
            except OSError:
                pass  # what is left is reaped by the next factory (its owner is dead by then)
        with self._lock:
            if self._base_ns is not None:
                os.close(self._base_ns)
                self._base_ns = None
            if self._home is not None:
                _remove_tree(self._home, [])
                self._home = None
            for fd in self._worker_home or []:
                os.close(fd)
            self._worker_home = None
            if self._worker_ipc is not None:
                os.close(self._worker_ipc)
                self._worker_ipc = None
        for parent in self.cgroup_manager.parents():
            try:
                parent.rmdir()
            except OSError:
                pass  # still used by sandboxes of other factories or processes


def _bwrap_missing_message(option: str | None) -> str:
    if option:
        return f"the bwrap executable {option!r} does not exist or is not executable; " + bw.INSTALL_HINT
    return bw.INSTALL_HINT


def _mount_system_root(home: Path, plan: list[bw.RootEntry]) -> None:
    """In the factory's base mount namespace: a small tmpfs at home/root holding read-only binds of
    the system paths (or symlinks) and the mount points a sandbox adds, then made read-only."""
    # Pseudo filesystems (sysfs and the cgroup tree, devpts, mqueue, ...) are of no use to the
    # namespaces copied from this one, and each mount costs every bwrap start: detach them here.
    for point in _pseudo_mounts():
        try:
            linux.umount(point, linux.MNT_DETACH)
        except OSError:
            pass
    root = home / "root"
    flags = linux.MS_NOSUID | linux.MS_NODEV
    size_options = "size=64m,nr_inodes=65536,mode=0755"
    linux.mount("patchgym-root", str(root), "tmpfs", flags, size_options)
    for entry in plan:
        target = root / entry.path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if entry.kind == "symlink":
            os.symlink(entry.source, target)
            continue
        if entry.kind == "copy":
            if os.path.isdir(entry.source):
                shutil.copytree(entry.source, target, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(entry.source, target)
            continue
        if entry.kind == "dir":
            target.mkdir(exist_ok=True)
        else:
            target.touch()
        _bind_readonly(entry.source, str(target))
    for sub in ("testbed", "tmp", "proc", "dev", VENV_MOUNT.lstrip("/"), DIFF_GIT_DIR.lstrip("/"), DIFF_SCRATCH.lstrip("/")):
        (root / sub).mkdir(parents=True, exist_ok=True)
    # The superblock, not just this mount, becomes read-only: bwrap's bind of it at / and its
    # per-mount remounts (nosuid, nodev) cannot make it writable again.
    linux.mount(None, str(root), None, linux.MS_REMOUNT | linux.MS_RDONLY | flags, size_options)
    _mount_dev(home / "dev")


PSEUDO_FILESYSTEMS = {
    "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "debugfs", "tracefs", "securityfs", "pstore",
    "bpf", "configfs", "fusectl", "binfmt_misc", "hugetlbfs", "efivarfs", "rpc_pipefs",
}


def _pseudo_mounts() -> list[str]:
    """Mount points of pseudo filesystems in this mount namespace, deepest first."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
        for line in handle:
            fields, _, post = line.partition(" - ")
            if post.split(" ")[0] in PSEUDO_FILESYSTEMS:
                points.append(linux._unescape_mountinfo(fields.split(" ")[4]))
    return sorted(points, key=len, reverse=True)


def _mount_sandbox(home: Path, repo_dir: Path, venv_dir: Path | None, limits: Limits) -> tuple[int, int]:
    """In a sandbox's own mount namespace (a copy of the base one):

    rw/            tmpfs of max_write_bytes: the overlay's upper and work directories, /tmp, /dev/shm
    root/testbed   overlayfs: lower = the read-only prepared repository, upper on rw/
    root/tmp       rw/tmp
    root/patchgym/venv   the task's environment, read-only
    dev/pts, dev/shm     the sandbox's devpts and /dev/shm (`_mount_sandbox_dev`)
    """
    rw, root = f"{home}/rw", f"{home}/root"  # strings, not Paths: this runs for every open
    size = limits.max_write_bytes or (1 << 40)
    inodes = max(4096, size // 4096)
    flags = linux.MS_NOSUID | linux.MS_NODEV
    linux.mount("patchgym-sandbox", rw, "tmpfs", flags, f"size={size},nr_inodes={inodes},mode=0755")
    for sub in ("upper", "work", "tmp", "shm"):
        os.mkdir(f"{rw}/{sub}")
    os.chmod(f"{rw}/tmp", 0o1777)
    os.chmod(f"{rw}/shm", 0o1777)
    options = (
        f"lowerdir={_escape_overlay_path(str(repo_dir))},"
        f"upperdir={_escape_overlay_path(rw + '/upper')},workdir={_escape_overlay_path(rw + '/work')}"
    )
    linux.mount("patchgym-overlay", f"{root}/testbed", "overlay", flags, options)
    linux.mount(f"{rw}/tmp", f"{root}/tmp", None, linux.MS_BIND)
    if venv_dir is not None:
        _bind_readonly(str(venv_dir), root + VENV_MOUNT)
    _mount_sandbox_dev(home / "dev", Path(rw) / "shm")
    testbed_fd = os.open(f"{root}/testbed", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    tmp_fd = os.open(f"{rw}/tmp", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    return testbed_fd, tmp_fd


DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"}


def _mount_dev(dev: Path) -> None:
    """In the factory's base namespace: the /dev every sandbox gets, instead of bwrap's `--dev` (a
    tmpfs of its own, writable and as large as half the host's memory: `/dev/x` and `/dev/shm/*`
    escaped max_write_bytes, and without cgroups any limit). A tmpfs holding the usual device nodes
    (made with the host's device numbers and modes) and empty `pts` and `shm` mount points, its superblock then
    made read-only. Each sandbox adds its own devpts and /dev/shm (`_mount_sandbox_dev`); bwrap
    binds the tree at /dev (`--dev-bind`, its other binds are nodev)."""
    linux.mount("patchgym-dev", str(dev), "tmpfs", linux.MS_NOSUID, "size=64k,nr_inodes=64,mode=0755")
    for name in DEVICES:
        # Nodes of the host's devices rather than binds of them: the same files to open, and no
        # mount for every bwrap start to copy and remount (six fewer per command).
        host = os.stat(f"/dev/{name}")
        os.mknod(dev / name, stat.S_IFCHR | stat.S_IMODE(host.st_mode), host.st_rdev)
        os.chmod(dev / name, stat.S_IMODE(host.st_mode))  # mknod's mode went through the umask
    for name, target in DEV_LINKS.items():
        os.symlink(target, dev / name)
    for sub in ("pts", "shm"):
        (dev / sub).mkdir()
    linux.mount(None, str(dev), None, linux.MS_REMOUNT | linux.MS_RDONLY | linux.MS_NOSUID, "size=64k,nr_inodes=64,mode=0755")


def _mount_sandbox_dev(dev: Path, shm: Path) -> None:
    """In a sandbox's namespace: a devpts instance of its own (no other sandbox's ptys) and
    /dev/shm on the sandbox's write-limited tmpfs."""
    linux.mount("devpts", str(dev / "pts"), "devpts", linux.MS_NOSUID | linux.MS_NOEXEC,
                "newinstance,ptmxmode=0666,mode=0620")
    linux.mount(str(shm), str(dev / "shm"), None, linux.MS_BIND)


def _bind_readonly(source: str, target: str) -> None:
    linux.mount(source, target, None, linux.MS_BIND | linux.MS_REC)
    linux.mount(None, target, None, linux.MS_BIND | linux.MS_REMOUNT | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV)
