"""What the container backends (docker, modal) share: the command wrapper, owner labels, a
process-wide creation rate limiter, and moving trees in and out as tar archives safely.

A container backend cannot reach into the sandbox's filesystem the way the local one does, so:

* a command runs as `bash -c <wrapper>`: the wrapper sets the per-process limits (file size, no
  core dumps), merges stderr into stdout, changes to the working directory and exports the
  environment before the agent's command, which keeps `bash -c` semantics on a line of its own;
* the repository goes in as a tar stream of the prepared snapshot, and the diff is taken on the
  host from a tar stream of /testbed, extracted with `extract_tree` (no absolute or `..` names, no
  writes through symlinks: the archive is agent-controlled) and diffed with trusted git state
  (gitdiff.py), exactly like the local backend.
"""

from __future__ import annotations

import io
import os
import shlex
import socket
import stat
import tarfile
import threading
import time
from pathlib import Path
from typing import IO, Any, Callable, Iterable

from patchgym.harness.sandbox import gitdiff, linux, safefs
from patchgym.harness.sandbox.base import Limits, Sandbox, SandboxClosed, SandboxError, SandboxFactory
from patchgym.tasks.prepared import TESTBED

LABEL = "patchgym"
OWNER_LABEL = "patchgym.owner"  # "<host>:<pid>:<start time>"
TASK_LABEL = "patchgym.task"
SANDBOX_LABEL = "patchgym.sandbox"


def owner_label() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{linux.process_start_time(pid)}"


def labels(instance_id: str, sandbox_name: str) -> dict[str, str]:
    return {LABEL: "1", OWNER_LABEL: owner_label(), TASK_LABEL: instance_id, SANDBOX_LABEL: sandbox_name}


def owner_is_dead(owner: str, host: str | None = None, alive: Callable[[int, int], bool] = linux.process_alive) -> bool:
    """True when `owner` (an OWNER_LABEL value) names a process of this host that is gone.
    Owners on other hosts are never judged dead from here."""
    host = host or socket.gethostname()
    try:
        owner_host, pid, start = owner.rsplit(":", 2)
        pid_i, start_i = int(pid), int(start)
    except ValueError:
        return False
    return owner_host == host and not alive(pid_i, start_i)


def select_orphans(items: Iterable[tuple[str, dict[str, str]]], host: str | None = None,
                   alive: Callable[[int, int], bool] = linux.process_alive) -> list[str]:
    """Ids of the (id, labels) items that patchgym created for an owner that died on this host."""
    return [item_id for item_id, item_labels in items
            if item_labels.get(LABEL) == "1" and owner_is_dead(item_labels.get(OWNER_LABEL, ""), host, alive)]


def wrap_command(command: str, limits: Limits, *, cwd: str = TESTBED, env: dict[str, str] | None = None) -> str:
    """The bash script a container backend runs for `command` (see the module docstring)."""
    lines = ["exec 2>&1", "ulimit -c 0"]
    if limits.max_file_bytes is not None:
        lines.append(f"ulimit -f {-(-limits.max_file_bytes // 1024)}")
    for key, value in (env or {}).items():
        if not key.replace("_", "a").isalnum() or key[0].isdigit():
            raise ValueError(f"environment variable name {key!r} is not a valid shell name")
        lines.append(f"export {key}={shlex.quote(value)}")
    lines.append(f"cd {shlex.quote(cwd)} || exit 1")
    return "\n".join(lines) + "\n" + command


class RateLimiter:
    """At most `rate` acquisitions per second with bursts of `burst`, across all threads."""

    def __init__(self, rate: float, burst: int = 1, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"rate must be > 0 and burst >= 1, got rate={rate}, burst={burst}")
        self.rate, self.burst = rate, burst
        self._clock, self._sleep = clock, sleep
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Wait for a slot; returns how long it waited."""
        waited = 0.0
        while True:
            with self._lock:
                now = self._clock()
                self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
                self._last = now
                if self._tokens >= 1 - 1e-9:  # tolerate float rounding of the refill
                    self._tokens = max(0.0, self._tokens - 1)
                    return waited
                pause = max((1 - self._tokens) / self.rate, 1e-4)
            self._sleep(pause)
            waited += pause


def tar_of_directory(src: Path, arcname: str) -> bytes:
    """A tar of `src` (symlinks kept as links) with its top entry named `arcname`."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(str(src), arcname=arcname, recursive=True)
    return buffer.getvalue()


def tar_of_file(name: str, data: bytes, mode: int) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = len(data), mode, int(time.time())
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def single_file_from_tar(stream: IO[bytes], max_bytes: int) -> bytes:
    """The content of the one regular file in a tar stream (docker's get_archive of a file)."""
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            if member.isdir():
                raise IsADirectoryError(21, "is a directory", member.name)
            if not member.isreg():
                raise OSError(22, "not a regular file", member.name)
            if member.size > max_bytes:
                raise OSError(27, f"file is {member.size} bytes, over the {max_bytes}-byte read limit", member.name)
            handle = archive.extractfile(member)
            assert handle is not None
            return handle.read()
    raise FileNotFoundError(2, "empty archive")


def extract_tree(stream: IO[bytes], dest: Path, strip: str, max_total_bytes: int) -> None:
    """Extract an agent-controlled tar stream under `dest`: regular files, directories and symlinks
    (created, never followed); members outside `strip/` or with absolute or `..` names, devices,
    fifos and hard links to elsewhere are skipped. Writing through a symlink is impossible: every
    file is created with openat2 beneath `dest`, refusing symlinks on the way."""
    dest.mkdir(parents=True, exist_ok=True)
    root_fd = os.open(dest, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    total = 0
    prefix = strip.strip("/") + "/"
    try:
        with tarfile.open(fileobj=stream, mode="r|") as archive:
            for member in archive:
                name = member.name[2:] if member.name.startswith("./") else member.name
                if name == strip.strip("/") or not name.startswith(prefix):
                    continue
                rel = name[len(prefix):].rstrip("/")
                parts = rel.split("/")
                if not rel or name.startswith("/") or ".." in parts or "" in parts:
                    continue
                try:
                    if member.isdir():
                        parent, leaf = safefs._open_parent(root_fd, rel + "/x", create=True)
                        os.close(parent)
                    elif member.issym():
                        parent, leaf = safefs._open_parent(root_fd, rel, create=True)
                        try:
                            os.symlink(member.linkname, leaf, dir_fd=parent)
                        finally:
                            os.close(parent)
                    elif member.isreg() or member.islnk():
                        if member.isreg():
                            handle = archive.extractfile(member)
                            data = handle.read() if handle is not None else b""
                        else:  # a hard link to a file extracted before it: copy its content
                            target = member.linkname[2:] if member.linkname.startswith("./") else member.linkname
                            if not target.startswith(prefix):
                                continue
                            data = safefs.read_beneath(root_fd, target[len(prefix):], max_total_bytes)
                        total += len(data)
                        if total > max_total_bytes:
                            raise OSError(27, f"the tree is over {max_total_bytes} bytes")
                        safefs.write_beneath(root_fd, rel, data, stat.S_IMODE(member.mode) & 0o777)
                except safefs.NeedsSandbox:
                    continue  # a path through a symlink: nothing a diff of real files needs
    finally:
        os.close(root_fd)


def import_sdk(module: str, backend: str, sdk: str) -> Any:
    """Import a backend's SDK lazily; its absence is a SandboxError that says how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise SandboxError(f"the {backend} backend needs the {sdk} SDK: pip install 'patchgym[{backend}]' "
                           f"(or {module})") from exc


class RemoteSandbox(Sandbox):
    """What the docker and modal sandboxes share: their factory, a name, and closed state."""

    def __init__(self, factory: Any, prepared: Any, limits: Limits, name: str) -> None:
        super().__init__(prepared, limits)
        self._factory = factory
        self.name = name
        self._lock = threading.Lock()
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosed(f"sandbox {self.name} is closed")

    def _mark_closed(self) -> bool:
        """Mark the sandbox closed; True only for the one caller that closed it (close is idempotent)."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            return True

    @property
    def closed(self) -> bool:
        return self._closed


class RemoteSandboxFactory(SandboxFactory):
    """What the docker and modal factories share: the sandboxes they opened and have not closed
    yet (each `RemoteSandbox` forgets itself on close), and closing them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sandboxes: dict[str, RemoteSandbox] = {}

    def _register(self, sandbox: Any) -> Any:
        with self._lock:
            self._sandboxes[sandbox.name] = sandbox
        return sandbox

    def _forget(self, sandbox: RemoteSandbox) -> None:
        with self._lock:
            self._sandboxes.pop(sandbox.name, None)

    def close_all(self) -> None:
        with self._lock:
            sandboxes = list(self._sandboxes.values())
        for sandbox in sandboxes:
            sandbox.close()


def diff_of_archive(sandbox, fetch_archive: Callable[[Path], IO[bytes]], prefix: str) -> str:
    """The diff of a remote sandbox's /testbed: `fetch_archive(scratch)` returns a tar stream of
    /testbed, which is unpacked on the host (bounded, no links out) and diffed with the trusted git
    state of the prepared snapshot (gitdiff.py), exactly as the local backend does."""
    import shutil
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        extract_tree(fetch_archive(scratch), scratch / "tree", strip=TESTBED.lstrip("/"),
                     max_total_bytes=max(sandbox.limits.max_write_bytes or 0, 1 << 30) * 4)
        prepared = sandbox.prepared
        return gitdiff.diff_worktree(Path(prepared.repo_dir), str(scratch / "tree"), prepared.base_commit, scratch)
    except gitdiff.DiffError as exc:
        raise SandboxError(f"diff of sandbox {sandbox.name} failed: {exc}") from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
