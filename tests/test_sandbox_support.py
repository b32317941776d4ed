"""Shared pieces of the sandbox tests: a real prepared task (a git repository at a base commit,
a task store with secrets beside it, a tiny read-only environment) and what the sandbox tests check
a sandbox left on the host (`host_traces`). The fixtures built from them (`prepared`,
`local_factory`, `bystander`) are in tests/conftest.py. Holds no tests itself."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from patchgym.tasks.model import Task
from patchgym.tasks.prepared import PreparedTask

if TYPE_CHECKING:
    from patchgym.harness.sandbox.local import LocalSandboxFactory

BINARY_BLOB = bytes(range(256)) * 4
STORE_SECRET = "GOLD-PATCH-SECRET-7f3a"


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def make_prepared(root: Path, *, with_venv: bool = True) -> PreparedTask:
    """A task store entry like preparation writes: repo/ (git, at base), venv/, and secrets beside."""
    store = root / "store" / "demo__task-1" / "key0"
    repo = store / "repo"
    (repo / "pkg" / "deep").mkdir(parents=True)
    (repo / "README.md").write_text("hello\n")
    (repo / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (repo / "pkg" / "deep" / "data.txt").write_text("deep\n")
    (repo / "blob.bin").write_bytes(BINARY_BLOB)
    (repo / "run.sh").write_text("#!/bin/sh\necho run\n")
    (repo / "run.sh").chmod(0o755)
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    # What environment setup builds is hidden from diffs through info/exclude.
    (repo / "build-artifact").mkdir()
    (repo / "build-artifact" / "out.o").write_text("artifact\n")
    with open(repo / ".git" / "info" / "exclude", "a") as handle:
        handle.write("/build-artifact/\n")
    base = git(repo, "rev-parse", "HEAD").strip()
    # Things a sandbox must never see: the gold patch and other tasks' data in the store.
    (store / "gold.patch").write_text(STORE_SECRET)
    (root / "store" / "other__task-2").mkdir()
    (root / "store" / "other__task-2" / "test.patch").write_text(STORE_SECRET)
    venv = None
    if with_venv:
        venv = store / "venv"
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "venv-tool").write_text("#!/bin/sh\necho from-venv\n")
        (venv / "bin" / "venv-tool").chmod(0o755)
    task = Task(
        instance_id="demo__task-1", repo="demo/task", base_commit=base, problem_statement="fix it",
        FAIL_TO_PASS=["tests/test_x.py::test_x"], patch=STORE_SECRET,
    )
    return PreparedTask(task=task, root=store, repo_dir=repo, venv_dir=venv, key="key0")


def snapshot_tree(path: Path) -> dict[str, tuple[int, int, float]]:
    """Every entry under `path` (mode, size, mtime), to prove the snapshot is never modified."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            info = os.lstat(full)
            state[os.path.relpath(full, path)] = (info.st_mode, info.st_size, info.st_mtime)
    return state


def local_available() -> str | None:
    """Why the local backend cannot run here, or None when it can."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    if os.geteuid() != 0:
        return "the local backend needs root"
    return None


def host_traces(factory: "LocalSandboxFactory", name: str) -> list[str]:
    """Everything of sandbox `name` still visible on the host: mounts, directories, cgroups, processes."""
    traces = []
    with open("/proc/self/mountinfo") as handle:
        traces += [f"mount: {line.strip()}" for line in handle if name in line or "patchgym-overlay" in line]
    if (factory.state_root / name).exists():
        traces.append(f"directory: {factory.state_root / name}")
    if name.startswith("f-") or not name.startswith("sb-"):
        return traces
    for parent in factory.cgroup_manager.parents():
        if (parent / name).exists():
            traces.append(f"cgroup: {parent / name}")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cgroup = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        if name in cgroup:
            traces.append(f"process {pid}")
    return traces
