"""What of the host a sandbox may see: the read-only system paths every sandbox needs.

Both the environment setup at preparation time (`patchgym.tasks.prepare`) and the sandboxes of
`patchgym.harness` mount exactly these paths read-only, and nothing else of the host: not the home
directory, not the task store, not other sandboxes. The Python interpreter that created a task's
virtual environment is included by its prefix only (its venv symlinks point into it), even when it
lives under a home directory (pyenv).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Files in /etc that programs need to run (users, name service, locale, ld cache, TLS roots).
ETC_FILES = (
    "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/ld.so.cache", "/etc/ld.so.conf",
    "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives", "/etc/ssl", "/etc/ca-certificates",
    "/etc/mime.types", "/etc/hosts", "/etc/resolv.conf", "/etc/pip.conf", "/etc/xdg/pip",
)


def interpreter_prefixes() -> list[str]:
    """Prefixes of the Python that runs patchgym (its base install, not a venv on top of it)."""
    prefixes = []
    for prefix in (sys.base_prefix, os.path.realpath(sys.base_prefix)):
        if prefix not in prefixes and not any(prefix.startswith(s + "/") for s in SYSTEM_DIRS):
            prefixes.append(prefix)
    return prefixes


def readonly_system_paths() -> list[str]:
    """Host paths (that exist) to mount read-only at the same place in every sandbox."""
    paths = [p for p in (*SYSTEM_DIRS, *ETC_FILES) if os.path.lexists(p)]
    for prefix in interpreter_prefixes():
        if prefix not in paths:
            paths.append(prefix)
    return paths


def host_python() -> str:
    """The base interpreter to build task environments with (never the venv patchgym runs in)."""
    # Inside a venv, _base_executable points at the base interpreter already.
    for candidate in (getattr(sys, "_base_executable", None), sys.executable):
        if candidate and Path(candidate).exists():
            return candidate
    raise RuntimeError("cannot find the Python interpreter to build task environments with")
