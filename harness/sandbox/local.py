"""The `local` backend: bubblewrap sandboxes over a copy-on-write view of the prepared snapshot.

A factory keeps one state directory, `<state root>/f-<owner pid>-<owner start>-<n>/` with
`owner.json`, and builds once, in a private *base* mount namespace (mountns.py), what every
sandbox shares: the read-only root (the host's system paths, bwrap.root_plan, on a small tmpfs)
and a read-only /dev (a tmpfs with the usual device nodes, mountplan.mount_dev).

Opening a sandbox (no process is started, nothing is copied):

1. cgroups `sb-<owner pid>-<owner start>-<n>` (v2, else v1 memory+pids; see cgroups.py) with the
   memory and process limits: the emptied groups of a closed sandbox with the same limits,
   renamed, when the factory kept some (cgroup_pool.py), else new ones;
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
following (safefs.py), or inside the sandbox when the path needs a symlink (fileaccess.py). The
diff runs inside the sandbox: git as a bwrap like any command, in its cgroups, with the snapshot's
trusted `.git` bound in read-only and a scratch index, seeing nothing of the host (gitdiff.py).

This module keeps `LocalSandbox` (checking a command, running it, the diff, close) and
`LocalSandboxFactory` (state directory, base namespace, open, shutdown). The seams live beside it:
mountplan.py (what is mounted where), launch.py (starting, confining, killing and reaping bwrap),
pump.py (output, stdin and exit within a deadline), rlimits.py (limits checked, per-process
rlimits), cgroup_pool.py (emptied cgroups reused), fileaccess.py (read_file, write_file).
"""

from __future__ import annotations
from __future__ import annotations

import asyncio
import atexit
import itertools
import os
import shutil
import subprocess
import threading
import time
import weakref
from functools import partial
from pathlib import Path
from typing import Any

from patchgym.harness.sandbox import bwrap as bw
from patchgym.harness.sandbox import cgroups as cg
from patchgym.harness.sandbox import gitdiff, linux, mountns, owners, pump, rlimits
from patchgym.harness.sandbox.base import (
    CommandResult,
    Limits,
    Sandbox,
    SandboxClosed,
    SandboxError,
    SandboxFactory,
)
from patchgym.harness.sandbox.cgroup_pool import CgroupPool
from patchgym.harness.sandbox.fileaccess import FileAccess, sandbox_path
from patchgym.harness.sandbox.launch import Launch, Launcher
from patchgym.harness.sandbox.mountplan import DIFF_GIT_DIR, DIFF_SCRATCH, mount_sandbox, mount_system_root
from patchgym.harness.sandbox.output import CappedOutput
from patchgym.tasks.prepared import TESTBED, PreparedTask

_SEQUENCE = itertools.count(1)


def default_state_root() -> Path:
    home = os.environ.get("PATCHGYM_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "patchgym")
    return Path(home) / "sandboxes"


class _Command:
    """A checked command, ready to start: its argv, Popen options, stdin, deadline and the
    sandbox's limit counters before it."""

    def __init__(self, argv: list[str], options: dict[str, Any], stdin_data: bytes | None,
                 timeout: float | None, events_before: Any) -> None:
        self.argv, self.options, self.stdin_data, self.events_before = argv, options, stdin_data, events_before
        self.started = time.monotonic()
        self.deadline = None if timeout is None else self.started + timeout


class LocalSandbox(Launcher, FileAccess, Sandbox):
    """A bubblewrap sandbox over one prepared task (see the module docstring); opened by the factory."""

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
        self._procs: dict[int, Launch] = {}
        self._closed = False
        self._thread_fds: list[int] = cgroups.thread_fds() if cgroups is not None and cgroups.version == "v1" else []

    # --- processes (starting, confining, killing, reaping: launch.Launcher) -------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosed(f"sandbox {self.name} is closed")

    def _shell(self, script: str, *args: str) -> list[str]:
        """The shell command line for `script`, the per-process limits set first (rlimits.py)."""
        return rlimits.shell_argv(self.limits, self.cgroups is not None, script, *args)

    # --- the interface ----------------------------------------------------------------------
    def _command(
        self, command: str, timeout_s: float | None, env: dict[str, str] | None, cwd: str, stdin: str | None
    ) -> "_Command":
        """Check a command's arguments (ValueError naming what is wrong) and assemble what starts it."""
        self._check_open()
        if not isinstance(command, str) or "\0" in command:
            raise ValueError(f"command must be a string without NUL bytes, got {command!r:.80}")
        timeout = self.limits.timeout_s if timeout_s is None else timeout_s
        if timeout is not None and not rlimits.finite_positive(timeout):
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
            env=full_env, cwd=sandbox_path(cwd),
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        return _Command(self._shell(command), options, stdin_data, timeout,
                        self.cgroups.events() if self.cgroups is not None else None)

    def _result(self, job: "_Command", launch: "Launch", output: CappedOutput, timed_out: bool) -> CommandResult:
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
        timed_out = pump.pump(launch.proc, output, job.stdin_data, job.deadline, partial(self._kill, launch))
        if not timed_out and not pump.wait_until(launch.proc, job.deadline):
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
            timed_out = await pump.apump(launch.proc, output, job.stdin_data, job.deadline, partial(self._kill, launch))
            if not timed_out and not await pump.await_exit(launch.proc, job.deadline):
                timed_out = True
                await asyncio.to_thread(self._kill, launch)
        except BaseException:  # cancelled: the command must not outlive its caller
            threading.Thread(target=self._kill_and_reap, args=(launch,), daemon=True).start()
            raise
        if timed_out:
            await asyncio.to_thread(launch.proc.wait)  # killed: its teardown must not hold up the loop
        return self._result(job, launch, output, timed_out)

    # --- read_file, write_file: fileaccess.FileAccess; the diff and close ---------------------
    def diff(self) -> str:
        """git runs inside the sandbox (a bwrap like any command, in its cgroups), seeing the
        trusted `.git` and its scratch directory bound in and nothing of the host: an embedded
        `sub/.git` (`gitdir: /host/repo/.git`) that git follows then finds nothing there. It keeps
        CAP_DAC_READ_SEARCH so files the agent made unreadable (chmod 000) are still diffed. It has
        the sandbox's per-command timeout (`Limits.timeout_s`)."""
        self._check_open()
        launches: list[Launch] = []

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
                self._factory.release_cgroups(self.cgroups)
            except OSError as exc:
                errors.append(f"cgroup removal: {exc}")
        self._factory.forget(self)
        if errors:
            raise SandboxError(f"closing sandbox {self.name} left something behind: {'; '.join(errors)}")


def _remove_tree(path: Path, errors: list[str]) -> None:
    def onerror(func: Any, failed: str, exc_info: Any) -> None:
        errors.append(f"{failed}: {exc_info[1]}")

    shutil.rmtree(path, onerror=onerror)


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
        self.cgroup_pool = CgroupPool(self.cgroup_manager, _SEQUENCE)
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
                    self._base_ns, _ = mountns.worker().create(lambda: mount_system_root(home, self.root_plan))
                    if self.cgroup_manager.version == "none" and self._worker_ipc is None:
                        self._worker_ipc = os.open("/proc/self/ns/ipc", os.O_RDONLY | os.O_CLOEXEC)
                except BaseException:
                    _remove_tree(home, [])
                    raise
                self._home = home
            return self._home, self._base_ns

    def open(self, prepared: PreparedTask, limits: Limits | None = None, *, network: bool = False) -> LocalSandbox:
        self._preflight()
        limits = rlimits.validate_limits(limits or Limits())
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
                group = self.cgroup_pool.take(name, limits.memory_bytes, limits.max_processes)
            lower = self._real_paths.get(str(repo_dir))
            if lower is None:  # absolute, links resolved: the worker thread has a cwd of its own
                lower = self._real_paths[str(repo_dir)] = Path(os.path.realpath(repo_dir))
            ns_fd, (testbed_fd, tmp_fd) = mountns.worker().create(
                lambda: mount_sandbox(home, lower, venv_dir, limits), copy_of=base_ns
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

    def release_cgroups(self, group: cg.SandboxCgroups) -> None:
        """A closed sandbox's emptied groups: kept for a later open while the factory is alive."""
        with self._lock:
            alive = self._home is not None
        self.cgroup_pool.release(group, keep=alive)

    def forget(self, sandbox: LocalSandbox) -> None:
        """A sandbox closed: no longer one of `open_sandboxes()`."""
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
        self.cgroup_pool.drain()
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
