"""The tasks a server serves: loaded from a spec (JSONL, task directory, `bundled`) and prepared.

Preparation (scrubbed snapshot, environment) happens once, before the server accepts requests, so
the first episode of a task does not pay for it. Cached preparations are returned at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from patchgym.tasks.loaders import load_tasks, select
from patchgym.tasks.model import Task
from patchgym.tasks.prepare import prepare_tasks as _prepare_all
from patchgym.tasks.prepared import PreparedTask

OnDone = Callable[[Task, PreparedTask | None, Exception | None], None]


def prepare_tasks(
    spec: str | Path,
    *,
    ids: Iterable[str] | None = None,
    store: Path | None = None,
    workers: int = 2,
    on_loaded: Callable[[list[Task]], None] | None = None,
    on_done: OnDone | None = None,
) -> dict[str, PreparedTask]:
    """Load the tasks named by `spec` (optionally only `ids`) and prepare each; by instance id."""
    tasks = load_tasks(spec)
    if ids:
        tasks = select(tasks, list(ids))
    if not tasks:
        raise ValueError(f"{spec} holds no tasks")
    if on_loaded is not None:
        on_loaded(tasks)
    prepared = _prepare_all(tasks, store, workers=workers, on_done=on_done)
    return {item.instance_id: item for item in prepared}
