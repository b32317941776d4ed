"""File reads and writes beneath a directory that can never follow a symlink out of it.

The local backend reads and writes sandbox files from the host (microseconds, instead of a
bwrap per call). The directory is agent-controlled: `/testbed/x -> /etc/shadow` must not reach the
host's /etc/shadow. Every open here goes through openat2(2) relative to a directory file
descriptor with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV:
no component may be a symlink, `..` may not climb out, no other mount may be crossed. A path that
needs a symlink (or `..` above the root) raises `NeedsSandbox`, and the caller does the operation
inside the sandbox instead, where the kernel resolves the link as the agent sees it.
"""

from __future__ import annotations

import errno
import os
import stat

from patchgym.harness.sandbox import linux

STRICT = linux.RESOLVE_BENEATH | linux.RESOLVE_NO_SYMLINKS | linux.RESOLVE_NO_MAGICLINKS | linux.RESOLVE_NO_XDEV


class NeedsSandbox(Exception):
    """The path cannot be handled strictly beneath the root (a symlink, `..`, or no openat2)."""


def _open(dirfd: int, path: str, flags: int, mode: int = 0) -> int:
    try:
        return linux.openat2(dirfd, path, flags, mode, STRICT)
    except OSError as exc:
        # ELOOP: a symlink on the way; EXDEV: `..` out of the root or a mount crossed;
        # ENOSYS/EPERM (seccomp'd hosts): no openat2.
        if exc.errno in (errno.ELOOP, errno.EXDEV, errno.ENOSYS, errno.EPERM, errno.EAGAIN):
            raise NeedsSandbox(path) from exc
        raise


def read_beneath(root_fd: int, relpath: str, max_bytes: int) -> bytes:
    """Read the regular file `relpath` under `root_fd` (at most `max_bytes`, else EFBIG)."""
    fd = _open(root_fd, relpath or ".", os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", relpath)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (fifo, socket or device)", relpath)
        if info.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"file is {info.st_size} bytes, over the {max_bytes}-byte read limit", relpath)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise OSError(errno.EFBIG, f"file grew over the {max_bytes}-byte read limit", relpath)
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _open_parent(root_fd: int, relpath: str, create: bool) -> tuple[int, str]:
    """A directory fd for the parent of `relpath` (creating missing directories), and the name."""
    parts = [p for p in relpath.split("/") if p not in ("", ".")]
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "is a directory", relpath)
    if ".." in parts:
        raise NeedsSandbox(relpath)
    current = os.dup(root_fd)
    try:
        for part in parts[:-1]:
            try:
                nxt = _open(current, part, os.O_PATH | os.O_DIRECTORY)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o755, dir_fd=current)
                except FileExistsError:
                    pass
                nxt = _open(current, part, os.O_PATH | os.O_DIRECTORY)
            os.close(current)
            current = nxt
        return current, parts[-1]
    except BaseException:
        os.close(current)
        raise


def write_beneath(root_fd: int, relpath: str, data: bytes, mode: int) -> None:
    """Create or replace the regular file `relpath` under `root_fd`, making parent directories."""
    parent, name = _open_parent(root_fd, relpath, create=True)
    try:
        fd = _open(parent, name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOCTTY | os.O_NONBLOCK, mode & 0o7777)
    finally:
        os.close(parent)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", relpath)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fchmod(fd, mode & 0o7777)
    finally:
        os.close(fd)
