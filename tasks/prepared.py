"""A prepared task: what a sandbox starts from.

Preparation (`patchgym.tasks.prepare`) turns a `Task` into a directory in the task store:

    <store>/<instance_id>/<key>/
        repo/            the scrubbed repository at base_commit (plus what environment.setup built
                         in it, hidden from diffs through .git/info/exclude); read-only lower layer
                         of every sandbox's /testbed
        venv/            the task's Python environment, mounted read-only at /patchgym/venv
        prepared.json    the task, the key and timings; written last, so its presence means done

`key` hashes everything preparation depends on, so a changed task prepares again. The store keeps
gold patches nowhere near a sandbox: only `repo/` and `venv/` are ever mounted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from patchgym.tasks.model import Task

TESTBED = "/testbed"
VENV_MOUNT = "/patchgym/venv"


@dataclass(frozen=True)
class PreparedTask:
    task: Task
    root: Path
    repo_dir: Path
    venv_dir: Path | None
    key: str
    #: The commit in repo_dir that stands for base_commit. It equals task.base_commit unless
    #: preparation had to squash the history (a synthetic task whose parent holds the fix), in which
    #: case the single root commit has the same tree but a different id.
    head: str | None = None

    @property
    def base_commit(self) -> str:
        """The commit to diff against and restore files from inside repo_dir."""
        return self.head or self.task.base_commit

    @property
    def instance_id(self) -> str:
        return self.task.instance_id
