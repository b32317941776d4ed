"""Removing closed sandboxes' containers off the grading's critical path (the docker factory's).

Why: `container.remove(force=True)` is a round trip to the engine that stops and deletes the
container, ~50 ms of a ~420 ms cold grading here (bench/grade/run_docker.py, 2026-12-01: open 84,
apply 25, tests 251, close 52 ms), and nothing of the verdict waits for it. A sandbox's `close`
therefore ends its command server and hands the container to one background thread, which removes
containers in the order they were closed.

Guarantees kept: `drain()` returns when every container handed over is gone (the factory's
`close_all`, which also runs at interpreter exit, calls it), and a removal that failed for another
reason than the container being gone already is raised there, by name. A process killed before
its removals ran leaves labelled containers that the next factory's reaper removes, as before.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from patchgym.harness.sandbox.base import SandboxError


def _gone(exc: BaseException) -> bool:
    text = str(exc)
    return "No such container" in text or "404" in text or "is already in progress" in text


class BackgroundRemover:
    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[Any, str]] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._errors: list[str] = []

    def remove(self, container: Any, name: str) -> None:
        """Queue `container` for removal; starts the worker thread on first use."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="patchgym-docker-remove", daemon=True)
                self._thread.start()
        self._queue.put((container, name))

    def _run(self) -> None:
        while True:
            container, name = self._queue.get()
            try:
                container.remove(force=True)
            except Exception as exc:  # noqa: BLE001 - reported by drain()
                if not _gone(exc):
                    with self._lock:
                        self._errors.append(f"{name}: {exc}")
            finally:
                self._queue.task_done()

    def drain(self) -> None:
        """Wait until every queued container is removed; raise SandboxError for those that could not be."""
        self._queue.join()
        with self._lock:
            errors, self._errors = self._errors, []
        if errors:
            raise SandboxError("could not remove container " + "; ".join(errors))
