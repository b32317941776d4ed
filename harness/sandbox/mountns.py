"""Private mount namespaces for sandboxes, and the one thread that works inside them.

Each local sandbox keeps its tmpfs and overlay mounts in a mount namespace of its own, never in
the host's. Two reasons, both measured (bench/sandbox/RESULTS.md):

* every `bwrap` copies the whole mount table of the namespace it starts from and then detaches it;
  with 256 sandboxes' 512 mounts in the host namespace a bare `bwrap ... true` went from 6 ms to
  24 ms, for every sandbox and for every other bwrap user on the machine;
* a namespace is freed by the kernel when the last reference to it goes, so if the owning process
  dies (even by SIGKILL) its sandboxes' mounts vanish with it: a crash cannot leave mounts behind.

The namespace is referenced by a file descriptor held by the owning process. Work inside it (the
mounts, spawning `bwrap` or `git`, unmounting) runs on one dedicated daemon thread: a thread may
`setns` into a mount namespace once it has its own filesystem context (`unshare(CLONE_FS)`),
without touching the namespace of the application's other threads, and children it spawns start
in the namespace it is in. The thread never exits, which matters: `--die-with-parent` (the
parent-death signal) fires when the *thread* that spawned bwrap exits.
"""

from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable, TypeVar

from patchgym.harness.sandbox import linux

T = TypeVar("T")


class NamespaceWorker:
    """A daemon thread that runs callables inside a given mount namespace (or a new one)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], int | None, bool, Future, bool]] = queue.SimpleQueue()
        # (job, namespace to enter or to copy, whether to make a new namespace, result, close the fd after)
        self._ready: Future = Future()
        self._thread = threading.Thread(target=self._serve, name="patchgym-mountns", daemon=True)
        self._thread.start()
        self._ready.result()

    def _serve(self) -> None:
        try:
            linux.unshare(linux.CLONE_FS)
            home = os.open("/proc/thread-self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        except BaseException as exc:  # noqa: BLE001 - reported to whoever waits for the worker
            self._ready.set_exception(exc)
            return
        self._ready.set_result(None)
        while True:
            job, ns_fd, fresh, future, close_fd = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                if close_fd and ns_fd is not None:
                    os.close(ns_fd)
                continue
            try:
                if ns_fd is not None:
                    linux.setns(ns_fd, linux.CLONE_NEWNS)
                if fresh:
                    linux.unshare(linux.CLONE_NEWNS)
                    if ns_fd is None:
                        # A copy of the host's: receive its mount events, never send ours back.
                        linux.mount(None, "/", None, linux.MS_REC | linux.MS_SLAVE)
                result = job()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                future.set_exception(exc)
            else:
                future.set_result(result)
            finally:
                if fresh or ns_fd is not None:
                    linux.setns(home, linux.CLONE_NEWNS)
                if close_fd and ns_fd is not None:
                    os.close(ns_fd)

    def _enqueue(self, job: Callable[[], T], ns_fd: int | None, fresh: bool, close_fd: bool) -> "Future[T]":
        future: Future = Future()
        self._jobs.put((job, ns_fd, fresh, future, close_fd))
        return future

    def _submit(self, job: Callable[[], T], ns_fd: int | None, fresh: bool) -> T:
        return self._enqueue(job, ns_fd, fresh, False).result()

    def submit_in(self, ns_fd: int, job: Callable[[], T], *, close_fd: bool = False) -> "Future[T]":
        """Queue `job` to run on the worker thread inside the mount namespace `ns_fd`, without
        waiting (asyncio callers await the future). With `close_fd` the worker closes `ns_fd`
        once the job is done: pass a dup of a descriptor that someone else may close meanwhile."""
        return self._enqueue(job, ns_fd, False, close_fd)

    def run_here(self, job: Callable[[], T]) -> T:
        """Run `job` on the worker thread in the host's mount namespace."""
        return self._submit(job, None, False)

    def run_in(self, ns_fd: int, job: Callable[[], T]) -> T:
        """Run `job` on the worker thread inside the mount namespace `ns_fd`."""
        return self._submit(job, ns_fd, False)

    def create(self, setup: Callable[[], T], copy_of: int | None = None) -> tuple[int, T]:
        """Make a new mount namespace, a copy of `copy_of` (a namespace fd) or of the host's,
        run `setup` inside it (the mounts), and return a file descriptor that keeps it alive, with
        `setup`'s result. Copying is done by the kernel: a namespace built once with many mounts
        is cheap to copy, where making those mounts again would not be."""

        def job() -> tuple[int, T]:
            result = setup()
            return os.open("/proc/thread-self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC), result

        return self._submit(job, copy_of, True)


_worker: NamespaceWorker | None = None
_worker_pid = 0
_worker_lock = threading.Lock()


def worker() -> NamespaceWorker:
    """The process-wide namespace worker (started on first use; it lives as long as the process)."""
    global _worker, _worker_pid
    with _worker_lock:
        # After fork() the child has no copy of the thread: start its own.
        if _worker is None or _worker_pid != os.getpid():
            _worker = NamespaceWorker()
            _worker_pid = os.getpid()
        return _worker
