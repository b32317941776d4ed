"""Per-sandbox control groups: memory and process-count limits, limit events, kill-all, removal.

Three modes, picked once per factory by `detect()`:

* ``v2``: a cgroup2 hierarchy whose root offers the ``memory`` and ``pids`` controllers; each
  sandbox gets ``<root>/patchgym/<name>`` with ``memory.max``, ``memory.swap.max`` and ``pids.max``.
* ``v1``: the legacy ``memory`` and ``pids`` hierarchies (``/sys/fs/cgroup/{memory,pids}``); each
  sandbox gets ``patchgym/<name>`` in both, with ``memory.limit_in_bytes`` (and memsw) and
  ``pids.max``.
* ``none``: no usable hierarchy; the caller falls back to rlimits (RLIMIT_AS, RLIMIT_NPROC), which
  are weaker (RLIMIT_NPROC does not bind uid 0).

Processes enter a sandbox's groups before they run the agent's command (launch.py: with v1 the
spawning thread steps into the groups first, so bwrap is born inside; with v2 its first process is
moved in by pid while bwrap waits); everything they fork inherits the groups, which is what makes
"kill the whole tree" and "count every process" exact. Emptied groups are reused by cgroup_pool.py.
"""

from __future__ import annotations

import errno
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PARENT = "patchgym"


@dataclass(frozen=True)
class LimitEvents:
    """Counters that grow when a limit bites (compared before and after a command)."""

    oom_kills: int = 0
    pids_max_hits: int = 0


def _int_field(text: bytes, key: str) -> int:
    """The value of `key` in a flat-keyed cgroup file ("name value" per line), 0 when absent."""
    for line in text.decode(errors="replace").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def _sigkill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class SandboxCgroups:
    """The cgroups of one sandbox (one directory per hierarchy)."""

    def __init__(self, version: str, dirs: list[Path]) -> None:
        self.version = version
        self.dirs = dirs
        self._event_fds: list[tuple[str, int, str]] | None = None  # (counter, open file, key)
        self._thread_fds: list[int] | None = None
        self._files_lock = threading.Lock()
        self.limits: tuple[int | None, int | None] | None = None  # (memory, processes) as last applied

    @property
    def paths(self) -> list[str]:
        return [str(d) for d in self.dirs]

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def join(self, pid: int) -> None:
        """Move process `pid` into every group of this sandbox."""
        for procs in self.procs_files():
            with open(procs, "w") as handle:
                handle.write(str(pid))

    def thread_files(self) -> list[str]:
        """v1 only: the per-thread membership files. Writing "0" to one moves the calling thread
        alone, which the kernel does without the global lock a process move takes (that lock costs
        an RCU grace period, milliseconds, per move); children the thread forks start inside."""
        return [str(d / "tasks") for d in self.dirs]

    def rename(self, name: str) -> None:
        """Give the groups a new name in every hierarchy (the kernel renames a cgroup in place;
        open files in it stay valid). Used to hand an emptied group to the next sandbox."""
        renamed = []
        for d in self.dirs:
            target = d.parent / name
            os.rename(d, target)
            renamed.append(target)
        self.dirs = renamed

    def thread_fds(self) -> list[int]:
        """v1: `thread_files` opened for writing, once (closed by `close_files`). They are opened
        from the host's mount namespace: /sys is not mounted in a sandbox's."""
        with self._files_lock:
            if self._thread_fds is None:
                self._thread_fds = [os.open(path, os.O_WRONLY | os.O_CLOEXEC) for path in self.thread_files()]
            return self._thread_fds

    def pids(self, first_group_only: bool = False) -> set[int]:
        """The processes in the groups (`first_group_only`: as listed by the first hierarchy's)."""
        found: set[int] = set()
        for procs in self.procs_files()[:1] if first_group_only else self.procs_files():
            try:
                with open(procs) as handle:
                    found.update(int(line) for line in handle if line.strip())
            except FileNotFoundError:
                pass
        return found

    def _event_sources(self) -> list[tuple[str, Path, str]]:
        """(counter, file, key) of the limit counters: v2 has both files in its one group; v1 has
        pids.events in the pids group (dirs[0]) and memory.oom_control in the memory one (dirs[1])."""
        if self.version == "v2":
            return [("oom", self.dirs[0] / "memory.events", "oom_kill"), ("pids", self.dirs[0] / "pids.events", "max")]
        sources = [("pids", self.dirs[0] / "pids.events", "max")] if self.dirs else []
        if len(self.dirs) > 1:
            sources.append(("oom", self.dirs[1] / "memory.oom_control", "oom_kill"))
        return sources

    def events(self) -> LimitEvents:
        """The limit counters now. Read before and after every command, so the files are opened
        once and re-read with pread (opening them by path each time cost ~0.3 ms a command)."""
        with self._files_lock:
            if self._event_fds is None:
                self._event_fds = []
                for counter, path, key in self._event_sources():
                    try:
                        self._event_fds.append((counter, os.open(path, os.O_RDONLY | os.O_CLOEXEC), key))
                    except OSError:
                        pass  # a controller without this file: its counter stays 0
            counts = {"oom": 0, "pids": 0}
            for counter, fd, key in self._event_fds:
                try:
                    counts[counter] += _int_field(os.pread(fd, 4096, 0), key)
                except OSError:
                    pass
        return LimitEvents(counts["oom"], counts["pids"])

    def close_files(self) -> None:
        """Close the files `events` and `thread_fds` keep open (idempotent; `remove` calls it)."""
        with self._files_lock:
            for _, fd, _ in self._event_fds or []:
                os.close(fd)
            for fd in self._thread_fds or []:
                os.close(fd)
            self._event_fds = self._thread_fds = None

    def kill_round(self) -> bool:
        """SIGKILL every process in the groups once, without waiting for them to go. True when
        there was none. A command's pid-namespace init may still be tearing its namespace down
        after the command's result is in (bwrap reports the exit code first); waiting for it here
        cost a sandbox's close ~0.3 ms on average (measured)."""
        if self.version == "v2":
            return self.kill_all(0.0)
        # v1: the processes are born in every hierarchy's group at once (a thread steps into all of
        # them before it forks) and cannot leave, so the first group lists them all.
        found = self.pids(first_group_only=True)
        _sigkill(found)
        return not found

    def kill_all(self, deadline_s: float = 5.0) -> bool:
        """SIGKILL every process in the groups until none is left. True when they are empty."""
        if self.version == "v2":
            kill_file = self.dirs[0] / "cgroup.kill"
            if kill_file.exists():
                try:
                    kill_file.write_text("1")
                except OSError:
                    pass
        end = time.monotonic() + deadline_s
        pause = 0.0005
        while True:
            remaining = self.pids()
            if not remaining:
                return True
            _sigkill(remaining)
            if time.monotonic() > end:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.02)

    def remove(self, deadline_s: float = 5.0, remove_parent: bool = True) -> None:
        """Kill what is left and remove the groups (and the shared parent when it is empty and
        `remove_parent`: a factory keeps it while it may open more sandboxes)."""
        self.close_files()
        self.kill_all(deadline_s)
        end = time.monotonic() + deadline_s
        for d in self.dirs:
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    # EBUSY while exiting processes are still being torn down.
                    if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY) or time.monotonic() > end:
                        raise
                    self.kill_all(0.0)
                    time.sleep(0.002)
            if remove_parent:
                try:
                    d.parent.rmdir()
                except OSError:
                    pass  # other sandboxes (of any process) still use it


class CgroupManager:
    """Creates sandbox cgroups under one parent per hierarchy."""

    def __init__(self, version: str, roots: list[Path]) -> None:
        self.version = version  # "v2", "v1" or "none"
        self.roots = roots  # hierarchy mount points (v2: one; v1: pids then memory)

    def thread_home(self) -> list[str]:
        """v1: the `tasks` files of the groups the calling thread is in now (to move it back)."""
        if self.version != "v1":
            return []
        where: dict[str, str] = {}
        for line in Path("/proc/thread-self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(","):
                where[controller] = path
        return [str(root / where.get(kind, "/").lstrip("/") / "tasks") for root, kind in zip(self.roots, ("pids", "memory"))]

    @property
    def description(self) -> str:
        if self.version == "v2":
            return f"cgroup v2 (memory, pids) at {self.roots[0]}/{PARENT}"
        if self.version == "v1":
            return "cgroup v1 (" + ", ".join(f"{r.name} at {r}/{PARENT}" for r in self.roots) + ")"
        return "no usable cgroup hierarchy"

    def parents(self) -> list[Path]:
        return [root / PARENT for root in self.roots]

    def _make_parent(self, parent: Path) -> None:
        parent.mkdir(exist_ok=True)
        if self.version == "v2":
            control = parent / "cgroup.subtree_control"
            if "memory" not in control.read_text() or "pids" not in control.read_text():
                control.write_text("+memory +pids")

    def create(self, name: str, memory_bytes: int | None, max_processes: int | None) -> SandboxCgroups:
        if self.version == "none":
            raise RuntimeError("no cgroup hierarchy to create groups in")
        dirs: list[Path] = []
        try:
            for parent in self.parents():
                for attempt in range(5):
                    self._make_parent(parent)
                    try:
                        (parent / name).mkdir()
                        break
                    except FileNotFoundError:
                        # Another process removed the (empty) parent between our two mkdirs.
                        if attempt == 4:
                            raise
                dirs.append(parent / name)
            group = SandboxCgroups(self.version, dirs)
            self._apply_limits(group, memory_bytes, max_processes)
            group.limits = (memory_bytes, max_processes)
            return group
        except BaseException:
            SandboxCgroups(self.version, dirs).remove(1.0)
            raise

    def _apply_limits(self, group: SandboxCgroups, memory_bytes: int | None, max_processes: int | None) -> None:
        # v1: the first directory is in the pids hierarchy, the second in the memory one.
        for index, d in enumerate(group.dirs):
            sets_pids = self.version == "v2" or index == 0
            sets_memory = self.version == "v2" or index == 1
            if max_processes is not None and sets_pids:
                (d / "pids.max").write_text(str(max_processes))
            if memory_bytes is not None and sets_memory:
                if self.version == "v2":
                    (d / "memory.max").write_text(str(memory_bytes))
                    swap = d / "memory.swap.max"
                    if swap.exists():
                        swap.write_text("0")
                else:
                    (d / "memory.limit_in_bytes").write_text(str(memory_bytes))
                    memsw = d / "memory.memsw.limit_in_bytes"
                    if memsw.exists():
                        memsw.write_text(str(memory_bytes))

    def existing(self) -> list[str]:
        """Names of the sandbox groups that exist now (in any of the hierarchies)."""
        names: set[str] = set()
        for parent in self.parents():
            try:
                names.update(p.name for p in parent.iterdir() if p.is_dir())
            except FileNotFoundError:
                pass
        return sorted(names)

    def group(self, name: str) -> SandboxCgroups:
        """The groups of an existing sandbox by name (to reap it)."""
        return SandboxCgroups(self.version, [p / name for p in self.parents() if (p / name).is_dir()])


def _cgroup_mounts(mountinfo: str) -> list[tuple[str, str, set[str]]]:
    """(mount point, fstype, super options) of every cgroup/cgroup2 mount in a mountinfo text."""
    found = []
    for line in mountinfo.splitlines():
        pre, sep, post = line.partition(" - ")
        if not sep:
            continue
        fields, post_fields = pre.split(" "), post.split(" ")
        fstype = post_fields[0]
        if fstype in ("cgroup", "cgroup2"):
            options = set(post_fields[2].split(",")) if len(post_fields) > 2 else set()
            found.append((fields[4], fstype, options))
    return found


def _usable(root: Path, version: str) -> bool:
    """Can we create groups under `root` (without leaving anything behind to find out)?"""
    if (root / PARENT).is_dir():
        return os.access(root / PARENT, os.W_OK)
    if version == "v2":
        return os.access(root / "cgroup.subtree_control", os.W_OK) and os.access(root, os.W_OK)
    return os.access(root, os.W_OK) and (root / "cgroup.procs").exists()


def detect(mountinfo: str | None = None, prefer: str | None = None) -> CgroupManager:
    """The best usable hierarchy on this machine: v2 with memory+pids, else v1, else none.

    `prefer` ("v2", "v1" or "none") forces a mode when it is usable (tests use "none")."""
    if mountinfo is None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    mounts = _cgroup_mounts(mountinfo)
    candidates: list[CgroupManager] = []
    for point, fstype, _ in mounts:
        if fstype != "cgroup2":
            continue
        try:
            controllers = (Path(point) / "cgroup.controllers").read_text().split()
        except OSError:
            continue
        if {"memory", "pids"} <= set(controllers) and _usable(Path(point), "v2"):
            candidates.append(CgroupManager("v2", [Path(point)]))
            break
    v1_pids = next((Path(p) for p, t, o in mounts if t == "cgroup" and "pids" in o), None)
    v1_memory = next((Path(p) for p, t, o in mounts if t == "cgroup" and "memory" in o), None)
    if v1_pids and v1_memory and _usable(v1_pids, "v1") and _usable(v1_memory, "v1"):
        candidates.append(CgroupManager("v1", [v1_pids, v1_memory]))
    candidates.append(CgroupManager("none", []))
    if prefer:
        for candidate in candidates:
            if candidate.version == prefer:
                return candidate
    return candidates[0]
