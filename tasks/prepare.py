"""Preparing tasks: a scrubbed snapshot at base_commit plus a working environment, built once.

`prepare_task(task)` returns a `PreparedTask` (layout in patchgym.tasks.prepared):

1. Resolve the task's repository (patchgym.tasks.sources).
2. Scrub it into `repo/` at base_commit (patchgym.scrubber.scrub), then prove it with
   `check(..., forbid_patch=task.patch)`. If a leak survives because the history *before*
   base_commit already holds the fix (a synthetic task whose bug was injected at base), scrub again
   with `squash=True`: one root commit with base's tree. If anything still leaks, refuse the task.
3. Build the environment (patchgym.tasks.environment): the venv at /patchgym/venv and
   environment.setup, with network, in bubblewrap. With `environment.shared` the venv is built
   once per distinct setup (in `<store>/.envs/`) and shared read-only by those tasks.
4. Write `prepared.json` and move the build into place with one atomic rename.

The result is keyed by a hash of everything that shapes it (source, base commit, gold patch,
environment, interpreter, preparation version): a changed task prepares again, an unchanged one is
returned at once. Concurrent preparations of the same task (threads or processes) wait on one file
lock; only one builds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable

from patchgym.tasks.environment import (
    build_environment,
    build_shared_environment,
    environment_python,
    needs_pytest,
    python_version_mismatch,
    setup_log_path,
)
from patchgym.tasks.model import Task
from patchgym.tasks.prepared import PreparedTask
from patchgym.tasks.sources import resolve_source
from patchgym.tasks.store import default_task_store, file_lock

PREPARE_VERSION = 2


class PrepareError(RuntimeError):
    """A task cannot be prepared; the message says which task and why."""


def preparation_key(task: Task) -> str:
    shape = {
        "v": PREPARE_VERSION,
        "source": task.source,
        "repo": task.repo,
        "base": task.base_commit,
        "patch": hashlib.sha256((task.patch or "").encode()).hexdigest(),
        "environment": task.environment.model_dump(mode="json"),
        "needs_pytest": needs_pytest(task),
        "python": sys.version.split()[0],
        "interpreter": sys.base_prefix,
    }
    if task.environment.python:  # only then, so that existing preparations of other tasks stay valid
        shape["builder"] = environment_python(task)
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]


def _load_done(root: Path, task: Task) -> PreparedTask | None:
    meta_path = root / "prepared.json"
    if not meta_path.is_file():
        return None
    meta = json.loads(meta_path.read_text())
    venv = Path(meta["venv"]) if meta.get("venv") else root / "venv"
    return PreparedTask(task=task, root=root, repo_dir=root / "repo", venv_dir=venv if venv.is_dir() else None,
                        key=meta["key"], head=meta.get("head"))


def _scrub_snapshot(task: Task, source: Path, dest: Path) -> tuple[str, bool, list[str]]:
    """Scrub `source` into `dest`; returns (head, squashed, notes). Raises PrepareError on a leak."""
    from patchgym.scrubber import check, scrub

    notes: list[str] = []
    try:
        result = scrub(source, dest, task.base_commit)
    except Exception as exc:  # the scrubber reports bad SHAs, unreadable repos, ...
        raise PrepareError(f"task {task.instance_id}: cannot scrub {source} at {task.base_commit}: {exc}") from exc
    verdict = _check_snapshot(check, dest, task)
    if verdict.ok:
        return result.head, False, notes
    notes.append("history before base_commit held the fix; squashed to one root commit: "
                 + "; ".join(str(leak) for leak in verdict.leaks[:3]))
    shutil.rmtree(dest)
    result = scrub(source, dest, task.base_commit, squash=True)
    verdict = _check_snapshot(check, dest, task)
    if not verdict.ok:
        leaks = "; ".join(str(leak) for leak in verdict.leaks[:5])
        raise PrepareError(f"task {task.instance_id}: the snapshot at base_commit still reveals the fix "
                           f"after squashing ({leaks}); the base tree itself contains the gold change")
    return result.head, True, notes


def _check_snapshot(check: Any, dest: Path, task: Task) -> Any:
    """The scrubber's proof, with its errors about the patch it is given in the task's own terms
    (the scrubber calls it "the forbidden patch"; here it is the task's gold `patch`)."""
    from patchgym.scrubber import ScrubError

    try:
        return check(dest, task.base_commit, forbid_patch=task.patch)
    except ScrubError as exc:
        message = str(exc).replace("the forbidden patch", "its gold patch (the task's `patch` field)")
        raise PrepareError(f"task {task.instance_id}: {message}") from None


def prepare_task(task: Task, store: Path | None = None, *, force: bool = False) -> PreparedTask:
    """Prepare one task (cached). Thread- and process-safe; see the module docstring."""
    store = Path(store) if store else default_task_store()
    key = preparation_key(task)
    task_dir = store / task.instance_id
    root = task_dir / key
    if not force and (done := _load_done(root, task)):
        return done
    with file_lock(task_dir / f".{key}.lock"):
        if not force and (done := _load_done(root, task)):
            return done
        if root.exists():
            shutil.rmtree(root)
        build = task_dir / f".build-{key}"
        if build.exists():
            shutil.rmtree(build)  # a crashed earlier attempt (we hold the lock, so no one else is in it)
        build.mkdir(parents=True)
        try:
            started = time.monotonic()
            source = resolve_source(task)
            head, squashed, notes = _scrub_snapshot(task, source, build / "repo")
            if (mismatch := python_version_mismatch(task)) is not None:
                notes.append(mismatch)
            scrubbed = time.monotonic()
            if task.environment.shared:
                venv = build_shared_environment(task, store / ".envs")
            else:
                log_path = setup_log_path(task_dir, key)  # kept if setup fails (the build is removed)
                build_environment(task, build / "repo", build / "venv", log_path)
                os.replace(log_path, build / "setup.log")
                venv = root / "venv"
            meta = {
                "venv": str(venv),
                "key": key, "instance_id": task.instance_id, "base_commit": task.base_commit, "head": head,
                "squashed": squashed, "notes": notes, "source": str(source),
                "durations": {"scrub_s": scrubbed - started, "environment_s": time.monotonic() - scrubbed},
                "task": task.model_dump(mode="json", exclude={"patch", "test_patch"}),
            }
            (build / "prepared.json").write_text(json.dumps(meta, indent=2))
            build.rename(root)
        except BaseException:
            shutil.rmtree(build, ignore_errors=True)
            raise
    done = _load_done(root, task)
    assert done is not None
    return done


def prepare_tasks(
    tasks: Iterable[Task],
    store: Path | None = None,
    *,
    workers: int = 2,
    force: bool = False,
    on_done: Callable[[Task, PreparedTask | None, Exception | None], None] | None = None,
) -> list[PreparedTask]:
    """Prepare many tasks in parallel. Failures are collected and raised together at the end,
    after every other task finished (one bad task does not stop the rest)."""
    tasks = list(tasks)
    results: dict[str, PreparedTask] = {}
    errors: list[str] = []

    def one(task: Task) -> None:
        try:
            prepared = prepare_task(task, store, force=force)
        except Exception as exc:  # reported below, with every other failure
            errors.append(str(exc))
            if on_done:
                on_done(task, None, exc)
            return
        results[task.instance_id] = prepared
        if on_done:
            on_done(task, prepared, None)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(one, tasks))
    if errors:
        raise PrepareError(f"{len(errors)} of {len(tasks)} task(s) could not be prepared:\n" + "\n".join(errors))
    return [results[task.instance_id] for task in tasks]
