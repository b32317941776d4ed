"""A pool of started sandboxes kept ready for the next open of the same kind (the docker factory's
`warm`): open takes a spare at no cost and a new one is started in the background.

Keys are whatever the factory says makes two opens interchangeable (image, task, limits, ...). At
most `size` spares are kept, oldest evicted first; a spare that fails to start is simply not there
(the next open starts its own). `close` waits for the starters and closes every spare; a pool
closed once reopens on the next `take`, so a factory can be used again after close_all.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Hashable


class SparePool:
    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._spares: dict[Hashable, Any] = {}
        self._starting: set[Hashable] = set()
        self._starters: list[threading.Thread] = []
        self._closed = False

    def take(self, key: Hashable) -> Any | None:
        """The spare for `key` (removed from the pool), or None; reopens a closed pool."""
        with self._lock:
            self._closed = False
            return self._spares.pop(key, None)

    def refill(self, key: Hashable, start: Callable[[], Any]) -> None:
        """Start a spare for `key` in the background with `start()` (it returns a sandbox with a
        `close` method), unless the pool is off, closed, or one is there or on its way."""
        with self._lock:
            if self.size <= 0 or self._closed or key in self._starting or key in self._spares:
                return
            self._starting.add(key)
            thread = threading.Thread(target=self._start, args=(key, start), name="patchgym-spare", daemon=True)
            self._starters.append(thread)
        thread.start()

    def _start(self, key: Hashable, start: Callable[[], Any]) -> None:
        try:
            sandbox = start()
        except Exception:  # noqa: BLE001 - a spare is an optimisation: the next open starts its own
            return
        finally:
            with self._lock:
                self._starting.discard(key)
        with self._lock:
            if not self._closed and key not in self._spares:
                self._spares[key] = sandbox
                while len(self._spares) > self.size:  # the oldest kind goes first
                    evicted = self._spares.pop(next(iter(self._spares)))
                    threading.Thread(target=evicted.close, daemon=True).start()
                return
        sandbox.close()

    def close(self) -> None:
        """Wait for the spares being started, then close every spare."""
        with self._lock:
            self._closed = True
            starters, self._starters = self._starters, []
        for thread in starters:
            thread.join()
        with self._lock:
            spares, self._spares = list(self._spares.values()), {}
        for spare in spares:
            spare.close()
