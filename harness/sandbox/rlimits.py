"""Per-process limits of the local backend: checking `Limits`, and the rlimits every command runs
under (file size, no core dumps; address space and process count when there are no cgroups).

Owns: `validate_limits` (a ValueError naming the bad field), the shell prefix that sets the
rlimits before a command's script (`shell_argv`: soft and hard, so the script cannot raise them),
`set_rlimits` (the same by prlimit on a process that has not run anything yet: cgroup v2 starts),
and `spawn_with_ipc_limits` (without cgroups, SysV shared memory and message queues in an IPC
namespace of the command's own, capped to `memory_bytes`).

Does not cover: cgroups (cgroups.py, cgroup_pool.py), the tmpfs that caps total writes
(mountplan.py), or the wall-time limit (pump.py and launch.py).
"""

from __future__ import annotations

import math
import os
import resource
import subprocess
from typing import Any

from patchgym.harness.sandbox import linux
from patchgym.harness.sandbox.base import Limits, SandboxError

SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"


def validate_limits(limits: Limits) -> Limits:
    for name in ("memory_bytes", "max_processes", "max_file_bytes", "max_output_bytes", "max_write_bytes"):
        value = getattr(limits, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            raise ValueError(f"Limits.{name} must be a positive integer or None, got {value!r}")
    if limits.timeout_s is not None and not finite_positive(limits.timeout_s):
        raise ValueError(f"Limits.timeout_s must be a positive finite number (None: no limit), got {limits.timeout_s!r}")
    if limits.max_write_bytes is not None and limits.max_write_bytes < 1024 * 1024:
        raise ValueError(f"Limits.max_write_bytes must be at least 1 MiB, got {limits.max_write_bytes}")
    return limits


def finite_positive(value: object) -> bool:
    # inf passed a plain `> 0` check and then broke poll()'s millisecond conversion (OverflowError).
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def shell_argv(limits: Limits, has_cgroups: bool, script: str, *args: str) -> list[str]:
    """The shell command line for `script`, with the per-process limits set first (soft and
    hard, so the script cannot raise them: it has no CAP_SYS_RESOURCE)."""
    unit = 1024 if SHELL.endswith("bash") else 512  # ulimit -f counts KiB in bash, 512 B blocks in POSIX sh
    steps = ["ulimit -c 0"]
    if limits.max_file_bytes is not None:
        steps.append(f"ulimit -f {-(-limits.max_file_bytes // unit)}")
    if not has_cgroups:
        if limits.memory_bytes is not None:
            steps.append(f"ulimit -v {limits.memory_bytes // 1024}")
        if limits.max_processes is not None:
            steps.append(f"ulimit -{'u' if SHELL.endswith('bash') else 'p'} {limits.max_processes}")
    prefix = " && ".join(steps) + ' || { echo "patchgym: cannot set the sandbox limits" >&2; exit 125; }\n'
    # On a line of its own before the script, so the script keeps `bash -c` semantics.
    return [SHELL, "-c", prefix + script, *(["sh", *args] if args else [])]


def set_rlimits(child: int, limits: Limits, has_cgroups: bool) -> None:
    """The rlimits of `shell_argv`, set by prlimit on a process that has not run anything yet."""
    try:
        if limits.max_file_bytes is not None:
            resource.prlimit(child, resource.RLIMIT_FSIZE, (limits.max_file_bytes, limits.max_file_bytes))
        resource.prlimit(child, resource.RLIMIT_CORE, (0, 0))
        if not has_cgroups:
            if limits.memory_bytes is not None:
                resource.prlimit(child, resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
            if limits.max_processes is not None:
                resource.prlimit(child, resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))
    except (OSError, ValueError) as exc:
        raise SandboxError(f"cannot set the sandbox's rlimits: {exc}") from exc


def spawn_with_ipc_limits(argv: list[str], memory_bytes: int | None, host_ipc: int, **popen: Any) -> subprocess.Popen:
    """Without cgroups (rlimits only): SysV shared memory and message queues live in the IPC
    namespace, outside any process's RLIMIT_AS once detached, so a command could hoard memory
    in them. The calling thread (the namespace worker) makes the command's IPC namespace itself,
    sets its kernel.shmall/shmmax to `memory_bytes` and shrinks its message queues, spawns bwrap
    into it (`own_ipc=False`: bwrap makes none) and returns to the host's (`host_ipc`, a descriptor
    of it). The namespace ends with the command's last process; inside, /proc is read-only and no
    capability can change it."""
    linux.unshare(linux.CLONE_NEWIPC)  # this thread only
    try:
        settings = {"msgmni": 16, "msgmnb": 65536}
        if memory_bytes is not None:
            settings.update(shmmax=memory_bytes, shmall=max(1, memory_bytes // resource.getpagesize()))
        for name, value in settings.items():
            # ipc sysctls apply to the IPC namespace of the thread that writes them
            with open(f"/proc/sys/kernel/{name}", "w") as handle:
                handle.write(str(value))
        return subprocess.Popen(argv, **popen)
    finally:
        linux.setns(host_ipc, linux.CLONE_NEWIPC)
