"""What a local sandbox's root holds, the `bwrap` command line, and the environment of commands.

Pure functions (no processes, no mounts), so what a sandbox can see is unit-testable: the root is
the read-only system paths of `patchgym.tasks.hostfs` (`root_plan`) plus the sandbox's overlay at
/testbed, the task's environment read-only at /patchgym/venv and a private /tmp (assembled by
mountplan.py, /dev too); bwrap adds a new /proc, unshares every namespace (the network too unless asked
for), drops all capabilities, forbids nested user namespaces and makes the root and /proc read-only.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from patchgym.tasks import hostfs
from patchgym.tasks.prepared import TESTBED, VENV_MOUNT

INSTALL_HINT = (
    "bubblewrap (bwrap) is required for the local sandbox backend and was not found on PATH; "
    "install it with `apt-get install bubblewrap` (Debian/Ubuntu), `dnf install bubblewrap` "
    "(Fedora/RHEL) or `apk add bubblewrap` (Alpine), or choose the docker or modal backend"
)


def find_bwrap(path: str | None = None) -> str | None:
    """The bwrap executable to use (`path` if given and executable), or None."""
    if path:
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return shutil.which("bwrap")


@dataclass(frozen=True)
class Layout:
    """Where a sandbox's assembled root lives (a path in the sandbox's mount namespace)."""

    root: str  # the directory bwrap binds at / (see RootEntry and mountplan.py)
    network: bool = False
    dev: str = "/dev"  # the directory bwrap binds at /dev (mountplan.py assembles a read-only one)


@dataclass(frozen=True)
class RootEntry:
    """One system path in a sandbox's root: a read-only bind of the host path, or a symlink."""

    path: str  # absolute path inside the sandbox (the same as on the host)
    kind: str  # "dir", "file" (read-only binds), "copy" (small /etc entries) or "symlink"
    source: str  # the host path to bind or copy, or the symlink's target text


def root_plan(paths: list[str] | None = None) -> list[RootEntry]:
    """What of the host a sandbox's root holds: the read-only system paths of
    `patchgym.tasks.hostfs`, and nothing else. A path that is a symlink into another listed path
    (/bin -> usr/bin on merged-/usr systems, /etc/localtime -> /usr/share/zoneinfo/...) becomes a
    symlink; any other symlink is bound as what it points to."""
    paths = hostfs.readonly_system_paths() if paths is None else paths
    real = [p for p in paths if not os.path.islink(p)]
    plan = []
    for path in paths:
        if os.path.islink(path):
            target = os.path.realpath(path)
            if any(target == d or target.startswith(d.rstrip("/") + "/") for d in real):
                plan.append(RootEntry(path, "symlink", os.readlink(path)))
                continue
            source = target
        else:
            source = path
        if not os.path.exists(source):
            continue
        if path.startswith("/etc/"):
            # Small configuration files and directories: copied into the read-only root once per
            # factory rather than bound one by one (every bind is a mount that each bwrap start
            # re-processes; measured in bench/sandbox/RESULTS.md).
            plan.append(RootEntry(path, "copy", source))
            continue
        plan.append(RootEntry(path, "dir" if os.path.isdir(source) else "file", source))
    return plan


def has_controlling_terminal() -> bool:
    """Whether this process has a controlling terminal a sandbox could reach through /dev/tty.

    Only then does a sandbox need `--new-session` (its own session, no terminal): that setsid
    costs every command about 2 ms at exit (measured), and servers, CI and training jobs have no
    terminal to protect."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return False
    os.close(fd)
    return True


def base_env(has_venv: bool) -> dict[str, str]:
    """The environment every command starts from (the host's is cleared)."""
    path = [f"{VENV_MOUNT}/bin"] if has_venv else []
    path += [f"{prefix}/bin" for prefix in hostfs.interpreter_prefixes()]
    path += ["/usr/local/bin", "/usr/bin", "/bin"]
    # UTF-8 text handling through LC_CTYPE alone: C.UTF-8's other categories are the C locale's,
    # which programs use without loading anything, whereas LANG=C.UTF-8 makes every program load
    # a dozen locale files first (~0.12 ms per bash start, measured).
    env = {"HOME": "/tmp", "PATH": ":".join(dict.fromkeys(path)), "LC_CTYPE": "C.UTF-8", "TMPDIR": "/tmp"}
    if has_venv:
        env["VIRTUAL_ENV"] = VENV_MOUNT
    return env


def bwrap_argv(
    bwrap: str,
    layout: Layout,
    command: list[str],
    *,
    env: dict[str, str],
    cwd: str = TESTBED,
    info_fd: int | None = None,
    block_fd: int | None = None,
    new_session: bool = True,
    binds: tuple[tuple[str, str, bool], ...] = (),
    caps: tuple[str, ...] = (),
    own_ipc: bool = True,
) -> list[str]:
    """The bwrap command line (`binds` and `caps`: only for our own trusted commands, the diff's
    git). The root (system paths read-only, /testbed, /tmp, the venv) is
    assembled beforehand in the sandbox's mount namespace, so bwrap binds one tree instead of
    twenty-odd paths (each `--ro-bind` costs bwrap a scan of the mount table)."""
    # own_ipc=False: the caller has put bwrap in an IPC namespace of its own already (rlimits.py
    # does, with kernel.shm* limits, when no cgroup bounds SysV shared memory).
    argv = [bwrap, "--unshare-all"] if own_ipc else [
        bwrap, "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if layout.network:
        argv.append("--share-net")
    argv += [
        "--unshare-user",  # implied by --unshare-all for non-root; explicit so --disable-userns works as root
        "--disable-userns",
        "--die-with-parent",
        *(["--new-session"] if new_session else []),
        "--cap-drop", "ALL",
        *[arg for cap in caps for arg in ("--cap-add", cap)],
        "--hostname", "sandbox",
        "--clearenv",
        "--bind", layout.root, "/",
        "--proc", "/proc",
        # bwrap covers only /proc/irq and /proc/bus here: /proc/sys stayed writable, and sysctls
        # such as kernel.core_pattern ("|prog": run as host root on the next crash) check nothing
        # but the file mode. A read-only /proc shuts all of them; /proc/self/fd/N still reach
        # their targets (/dev/stdout works), the mount flag applies to proc's own files only.
        "--remount-ro", "/proc",
        # Not `--dev` (a writable tmpfs as large as half the host's memory): the sandbox's own
        # /dev, assembled in its mount namespace (mountplan.mount_dev), a tmpfs whose superblock is
        # read-only (so every bind of it is too: no `--remount-ro /dev` needed) but for /dev/shm
        # (on the sandbox's write-limited tmpfs) and its own devpts.
        "--dev-bind", layout.dev, "/dev",
    ]
    for source, dest, readonly in binds:  # (source in the sandbox's mount namespace, dest, read-only)
        argv += ["--ro-bind" if readonly else "--bind", source, dest]
    # No `--remount-ro /`: the root is a tmpfs whose superblock mountplan.py made read-only, which
    # no bind or per-mount remount can undo (tested: tests/test_sandbox_local.py).
    for key, value in env.items():
        argv += ["--setenv", key, value]
    argv += ["--chdir", cwd]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    if block_fd is not None:
        argv += ["--block-fd", str(block_fd)]
    argv.append("--")
    argv += command
    return argv
