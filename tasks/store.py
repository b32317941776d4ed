"""Where patchgym keeps what it builds: `$PATCHGYM_HOME` (default `~/.cache/patchgym`).

    $PATCHGYM_HOME/
        tasks/<instance_id>/<key>/   prepared tasks (see patchgym.tasks.prepared)
        mirrors/<hash>/              bare mirrors of remote sources
        suite/<hash>/                the bundled task suite, built from tasks/suite
        sandboxes/                   state of open local sandboxes (patchgym.harness)

Also the small file-lock helper that makes building into the store safe across processes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator


def patchgym_home() -> Path:
    return Path(os.environ.get("PATCHGYM_HOME") or Path.home() / ".cache" / "patchgym").expanduser()


def default_task_store() -> Path:
    return patchgym_home() / "tasks"


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock held for the duration of the block (across processes and threads)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
