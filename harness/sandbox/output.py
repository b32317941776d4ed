"""Bounded capture of a command's output: keep the head and the tail, count what was cut.

A sandboxed command may print gigabytes. `CappedOutput` keeps at most `limit` bytes in memory at
any time (the first half of the budget as the head, the last half as the tail, in a ring), counts
the rest, and renders the kept text with a notice `[... N bytes cut ...]` where the cut was.
"""

from __future__ import annotations


def cut_notice(cut: int) -> str:
    return f"\n[... {cut} bytes cut ...]\n"


class CappedOutput:
    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"output limit must be >= 0, got {limit}")
        self.limit = limit
        self.head_limit = limit // 2 + limit % 2
        self.tail_limit = limit // 2
        self.head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk or self.tail_limit == 0:
            return
        if len(chunk) >= self.tail_limit:
            self._tail = bytearray(chunk[-self.tail_limit :])
        else:
            self._tail += chunk
            # Trim lazily (amortised): let the ring grow to twice its size before cutting.
            if len(self._tail) > 2 * self.tail_limit:
                del self._tail[: len(self._tail) - self.tail_limit]

    @property
    def tail(self) -> bytes:
        return bytes(self._tail[-self.tail_limit :]) if self.tail_limit else b""

    @property
    def cut(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def render(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        if self.cut == 0:
            return head + self.tail.decode("utf-8", errors="replace")
        return head + cut_notice(self.cut) + self.tail.decode("utf-8", errors="replace")
