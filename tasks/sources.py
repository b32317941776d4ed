"""Finding a task's git repository on this machine: `source`, a repos root, or a mirror of a URL.

Resolution order (docs/task-format.md): the task's `source` (a local directory, a `.bundle` file,
or a URL); else `$PATCHGYM_REPOS/<owner>__<name>` when that exists; else
`https://github.com/<repo>.git`. URLs are mirrored once into `$PATCHGYM_HOME/mirrors/` (a bare
`git clone --mirror`, refreshed when the base commit is missing) and the mirror is used from then on.
The scrubber reads the result; nothing here ever modifies a local source.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from patchgym.tasks.model import Task
from patchgym.tasks.store import file_lock, patchgym_home


class SourceError(RuntimeError):
    """The task's repository cannot be found or fetched."""


def _is_url(source: str) -> bool:
    return "://" in source or source.startswith("git@")


def _has_commit(repo: Path, sha: str) -> bool:
    probe = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "-e", f"{sha}^{{commit}}"], capture_output=True
    )
    return probe.returncode == 0


def mirror(url: str) -> Path:
    """A bare mirror of `url` under $PATCHGYM_HOME/mirrors (cloned once, fetched when asked)."""
    key = hashlib.sha256(url.encode()).hexdigest()[:16]
    dest = patchgym_home() / "mirrors" / key
    with file_lock(dest.with_suffix(".lock")):
        if not dest.exists():
            tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
            done = subprocess.run(["git", "clone", "--mirror", "--quiet", url, str(tmp)], capture_output=True, text=True)
            if done.returncode != 0:
                raise SourceError(f"cannot clone {url}: {done.stderr.strip()[-400:]}")
            tmp.rename(dest)
    return dest


def resolve_source(task: Task) -> Path:
    """A local path (repository directory or bundle file) holding `task.base_commit`."""
    candidates: list[str] = []
    if task.source:
        candidates.append(task.source)
    else:
        repos_root = os.environ.get("PATCHGYM_REPOS")
        if repos_root and (Path(repos_root) / task.owner_name).exists():
            candidates.append(str(Path(repos_root) / task.owner_name))
        candidates.append(f"https://github.com/{task.repo}.git")
    source = candidates[0]
    if _is_url(source):
        path = mirror(source)
        if not _has_commit(path, task.base_commit):
            subprocess.run(["git", "-C", str(path), "fetch", "--quiet", "origin"], capture_output=True)
        return path
    path = Path(source).expanduser()
    if not path.exists():
        raise SourceError(f"task {task.instance_id}: source {source} does not exist")
    if path.is_file() and not path.name.endswith(".bundle"):
        raise SourceError(f"task {task.instance_id}: source {source} is a file but not a .bundle")
    return path
