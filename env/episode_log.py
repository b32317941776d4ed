"""The episode log: one JSON line per finished episode, appended and fsynced as the episode ends.

A crash of the server loses no finished reward: each record (task id, transcript, diff, verdict,
status, reward) is on disk before the episode's end is acknowledged to anyone reading the log.
Writes happen in a worker thread under a lock, so the event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any


class EpisodeLog:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.written = 0

    def append(self, record: dict[str, Any]) -> None:
        """Append one record as a JSON line and fsync it (blocking)."""
        line = json.dumps(record, ensure_ascii=True, default=str) + "\n"
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                data = line.encode("ascii")
                while data:
                    data = data[os.write(fd, data) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            self.written += 1

    async def aappend(self, record: dict[str, Any]) -> None:
        await asyncio.to_thread(self.append, record)


def read_episode_log(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every record in an episode log (a torn last line from a crash is skipped)."""
    records = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records
