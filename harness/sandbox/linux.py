"""Thin ctypes wrappers over the Linux system calls the local backend needs.

Python 3.11 has no `os.unshare`, `os.setns`, `mount(2)` or `openat2(2)`; spawning `mount`,
`unshare` or `nsenter` for each of them would cost milliseconds per sandbox, so they are called
directly. Every wrapper raises `OSError` with the errno and the path or call that failed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.syscall.restype = ctypes.c_long

CLONE_FS = 0x00000200
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_SLAVE = 1 << 19
MNT_DETACH = 2

RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08

# openat2 has the same number on every architecture that has it (it was added after the tables
# were unified); only very old kernels lack it (ENOSYS).
_SYS_OPENAT2 = 437
_ARCHES_WITH_OPENAT2 = {"x86_64", "aarch64", "arm64", "riscv64", "ppc64le", "s390x", "loongarch64"}


def _raise_errno(what: str) -> None:
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    if _libc.mount(
        source.encode() if source else None,
        target.encode(),
        fstype.encode() if fstype else None,
        flags,
        data.encode() if data else None,
    ) != 0:
        _raise_errno(f"mount {fstype or 'propagation'} on {target}")


def umount(target: str, flags: int = MNT_DETACH) -> None:
    if _libc.umount2(target.encode(), flags) != 0:
        _raise_errno(f"umount {target}")


def unshare(flags: int) -> None:
    if _libc.unshare(flags) != 0:
        _raise_errno(f"unshare({flags:#x})")


def setns(fd: int, nstype: int) -> None:
    if _libc.setns(fd, nstype) != 0:
        _raise_errno(f"setns({fd}, {nstype:#x})")


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def openat2(dirfd: int, path: str, flags: int, mode: int = 0, resolve: int = 0) -> int:
    """openat2(2): open `path` relative to `dirfd` under `resolve` rules. ENOSYS where unsupported."""
    if platform.machine() not in _ARCHES_WITH_OPENAT2:
        raise OSError(38, "openat2 is not known on this architecture")
    how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & (os.O_CREAT | getattr(os, "O_TMPFILE", 0)) else 0, resolve)
    fd = _libc.syscall(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(dirfd),
        ctypes.c_char_p(path.encode()),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(fd)


def process_start_time(pid: int) -> int | None:
    """The start time of `pid` in clock ticks since boot (field 22 of /proc/PID/stat), or None if
    there is no such process. Together with the pid it names a process uniquely across pid reuse."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its closing paren.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return int(fields[19])


def process_alive(pid: int, start_time: int) -> bool:
    """True when the process `pid` that started at `start_time` is still running (not a zombie)."""
    if process_start_time(pid) != start_time:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
        return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] != b"Z"
    except FileNotFoundError:
        return False


def mounts_under(prefix: str) -> list[str]:
    """Mount points (in this process's mount namespace) at or below `prefix`, deepest first."""
    prefix = prefix.rstrip("/")
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
        for line in handle:
            point = _unescape_mountinfo(line.split(" ")[4])
            if point == prefix or point.startswith(prefix + "/"):
                found.append(point)
    return sorted(found, key=len, reverse=True)


def _unescape_mountinfo(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


__all__ = [
    "CLONE_FS", "CLONE_NEWNS", "MS_BIND", "MS_RDONLY", "MS_REMOUNT", "MS_NODEV", "MS_NOSUID", "MS_PRIVATE", "MS_REC", "MS_SLAVE", "MNT_DETACH",
    "RESOLVE_BENEATH", "RESOLVE_NO_MAGICLINKS", "RESOLVE_NO_SYMLINKS", "RESOLVE_NO_XDEV",
    "mount", "umount", "unshare", "setns", "openat2", "process_start_time", "process_alive", "mounts_under",
]


def raise_open_file_limit(wanted: int = 65536) -> int:
    """Raise this process's soft RLIMIT_NOFILE towards `wanted` (never above the hard limit).
    Every open local sandbox holds a few descriptors (its mount namespace, /testbed, /tmp, its
    cgroup files), so hundreds of them overrun the common default of 1024. Returns the soft
    limit in force afterwards."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft
