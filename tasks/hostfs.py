"""What of the host a sandbox may see: the read-only system paths every sandbox needs.

Both the environment setup at preparation time (`patchgym.tasks.prepare`) and the sandboxes of
`patchgym.harness` mount exactly these paths read-only, and nothing else of the host: not the home
directory, not the task store, not other sandboxes. The Python interpreter that created a task's
virtual environment is included by its prefix only (its venv symlinks point into it), even when it
lives under a home directory (pyenv); so are the folders of the host's other Python installations
(pyenv's `versions`, uv's managed Pythons), one bind each, so that a task whose `environment.python`
asks for another version gets a venv of that interpreter (`find_python`) that works in every sandbox.
Before, such a venv's `python` was a dangling link in the sandbox, and the commands silently ran
whatever other `python` PATH held.
"""

from __future__ import annotations

import os
import re
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


def python_install_roots() -> list[str]:
    """Folders (that exist) holding this host's other Python installations, one per manager:
    pyenv's `versions` ($PYENV_ROOT, ~/.pyenv, or the folder the running interpreter sits in when
    that is pyenv's) and uv's managed Pythons ($UV_PYTHON_INSTALL_DIR, ~/.local/share/uv/python).
    Interpreters under the system folders (/usr/bin/python3.9) need none."""
    home = Path.home()
    candidates = [os.path.join(os.environ["PYENV_ROOT"], "versions")] if os.environ.get("PYENV_ROOT") else []
    candidates.append(str(home / ".pyenv" / "versions"))
    for prefix in (sys.base_prefix, os.path.realpath(sys.base_prefix)):
        if os.path.basename(os.path.dirname(prefix)) == "versions":
            candidates.append(os.path.dirname(prefix))
    if os.environ.get("UV_PYTHON_INSTALL_DIR"):
        candidates.append(os.environ["UV_PYTHON_INSTALL_DIR"])
    candidates.append(str(home / ".local" / "share" / "uv" / "python"))
    roots: list[str] = []
    for root in candidates:
        root = os.path.normpath(root)
        if root not in roots and os.path.isdir(root) and not any(root.startswith(s + "/") for s in SYSTEM_DIRS):
            roots.append(root)
    return roots


_INSTALL_NAME = re.compile(r"^(?:cpython-)?(\d+)\.(\d+)(?:\.(\d+))?")
_SYSTEM_PYTHON = re.compile(r"^python(\d+)\.(\d+)$")


def python_installs() -> list[tuple[tuple[int, ...], str]]:
    """(version, executable) of each Python interpreter found on this host: the one running
    patchgym, those in `python_install_roots()`, and `pythonX.Y` in /usr/local/bin and /usr/bin."""
    found: list[tuple[tuple[int, ...], str]] = [(tuple(sys.version_info[:3]), host_python())]
    for root in python_install_roots():
        for entry in sorted(os.listdir(root)):
            match = _INSTALL_NAME.match(entry)
            if not match:
                continue
            version = tuple(int(part) for part in match.groups() if part is not None)
            executable = os.path.join(root, entry, "bin", f"python{version[0]}.{version[1]}")
            if os.path.isfile(executable) and os.access(executable, os.X_OK):
                found.append((version, executable))
    for folder in ("/usr/local/bin", "/usr/bin"):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            match = _SYSTEM_PYTHON.match(name)
            path = os.path.join(folder, name)
            if match and os.access(path, os.X_OK):
                found.append(((int(match[1]), int(match[2])), path))
    return found


def find_python(wanted: str | None) -> str | None:
    """The interpreter to build an environment with for a version hint ("3.9", "3.9.18"): the
    running one when it matches, else the newest match found (`python_installs`); None when the
    hint is empty, not a version, or matched by nothing here."""
    match = re.fullmatch(r"\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?\s*", wanted or "")
    if not match:
        return None
    parts = tuple(int(part) for part in match.groups() if part is not None)
    matching = [(version, path) for version, path in python_installs() if version[:len(parts)] == parts]
    if not matching:
        return None
    here = tuple(sys.version_info[:3])
    for version, path in matching:
        if version == here:
            return path
    return max(matching, key=lambda item: item[0])[1]


def readonly_system_paths() -> list[str]:
    """Host paths (that exist) to mount read-only at the same place in every sandbox."""
    paths = [p for p in (*SYSTEM_DIRS, *ETC_FILES) if os.path.lexists(p)]
    roots = python_install_roots()
    for prefix in [*interpreter_prefixes(), *roots]:
        # the running interpreter's prefix comes with pyenv's `versions` when it sits there
        if prefix not in paths and not any(prefix.startswith(root + "/") for root in roots):
            paths.append(prefix)
    return paths


def host_python() -> str:
    """The base interpreter to build task environments with (never the venv patchgym runs in)."""
    # Inside a venv, _base_executable points at the base interpreter already.
    for candidate in (getattr(sys, "_base_executable", None), sys.executable):
        if candidate and Path(candidate).exists():
            return candidate
    raise RuntimeError("cannot find the Python interpreter to build task environments with")
