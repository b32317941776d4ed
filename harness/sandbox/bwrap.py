"""The `bwrap` command line of a local sandbox, and the environment its commands start with.

Pure functions (no processes, no mounts), so what a sandbox can see is unit-testable by reading the
argument list: the read-only system paths of `patchgym.tasks.hostfs` and nothing else of the host,
the sandbox's overlay at /testbed, the task's environment read-only at /patchgym/venv, a private
/tmp, a new /proc and /dev, every namespace unshared (the network too unless asked for), all
capabilities dropped, no nested user namespaces, and a read-only root.
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
    """Host-side sources (paths in the sandbox's mount namespace) of what a sandbox mounts."""

    testbed: str  # the overlay's merged directory
    tmp: str  # the private /tmp (on the sandbox's size-capped tmpfs)
    venv: str | None  # the task's environment, or None
    network: bool = False


def base_env(has_venv: bool) -> dict[str, str]:
    """The environment every command starts from (the host's is cleared)."""
    path = [f"{VENV_MOUNT}/bin"] if has_venv else []
    path += [f"{prefix}/bin" for prefix in hostfs.interpreter_prefixes()]
    path += ["/usr/local/bin", "/usr/bin", "/bin"]
    env = {"HOME": "/tmp", "PATH": ":".join(dict.fromkeys(path)), "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
    if has_venv:
        env["VIRTUAL_ENV"] = VENV_MOUNT
    return env


def system_mounts(paths: list[str] | None = None) -> list[str]:
    """bwrap arguments for the read-only system paths. A path that is a symlink into another
    mounted path (/bin -> usr/bin on merged-/usr systems) becomes a symlink, not a second mount."""
    paths = hostfs.readonly_system_paths() if paths is None else paths
    args: list[str] = []
    real_dirs = [p for p in paths if not os.path.islink(p)]
    for path in paths:
        if os.path.islink(path):
            target = os.path.realpath(path)
            if any(target == d or target.startswith(d.rstrip("/") + "/") for d in real_dirs):
                args += ["--symlink", os.readlink(path), path]
                continue
        args += ["--ro-bind", path, path]
    return args


def bwrap_argv(
    bwrap: str,
    layout: Layout,
    command: list[str],
    *,
    env: dict[str, str],
    cwd: str = TESTBED,
    info_fd: int | None = None,
    block_fd: int | None = None,
    system: list[str] | None = None,
) -> list[str]:
    argv = [bwrap, "--unshare-all"]
    if layout.network:
        argv.append("--share-net")
    argv += [
        "--unshare-user",  # implied by --unshare-all for non-root; explicit so --disable-userns works as root
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop", "ALL",
        "--hostname", "sandbox",
        "--clearenv",
    ]
    argv += system if system is not None else system_mounts()
    argv += ["--bind", layout.testbed, TESTBED]
    if layout.venv:
        argv += ["--ro-bind", layout.venv, VENV_MOUNT]
    argv += ["--proc", "/proc", "--dev", "/dev", "--bind", layout.tmp, "/tmp", "--remount-ro", "/"]
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
