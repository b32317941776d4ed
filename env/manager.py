"""The episodes of one server: opening them within capacity, finding them, reaping idle ones.

The manager holds the prepared tasks, the sandbox factory and the grader. It opens at most
`max_episodes` live episodes (one more is `ServerFull`, which the HTTP layer answers with 503 and
Retry-After), closes episodes idle longer than `idle_ttl_s` (their sandboxes with them), keeps
finished episodes readable for a while, appends every finished episode to the episode log, and on
shutdown closes every episode and every sandbox.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import OrderedDict
from typing import Any, Mapping

from patchgym.env.config import ServerConfig
from patchgym.env.episode import Episode, EpisodeStatus, Grader
from patchgym.env.episode_log import EpisodeLog
from patchgym.env.limits import LimitOverrides
from patchgym.env.toolcalls import get_parser
from patchgym.harness.sandbox.base import SandboxError, SandboxFactory
from patchgym.harness.verdict import Verdict
from patchgym.tasks.prepared import PreparedTask

log = logging.getLogger(__name__)


class ServerFull(RuntimeError):
    def __init__(self, live: int, capacity: int, retry_after_s: int) -> None:
        super().__init__(f"the server is running its maximum of {capacity} episodes ({live} live); retry later")
        self.retry_after_s = retry_after_s


class UnknownTask(LookupError):
    pass


class UnknownEpisode(LookupError):
    pass


def make_grader(factory: SandboxFactory, *, max_concurrent: int, log_dir: str | None = None) -> Grader:
    """The default grader: `agrade_patch` in a fresh sandbox, at most `max_concurrent` at once."""
    semaphore = asyncio.Semaphore(max_concurrent)

    async def grade(prepared: PreparedTask, patch: str) -> Verdict:
        from patchgym.harness.grader import agrade_patch  # lazily: the grader pulls in the reporters

        async with semaphore:
            task_log_dir = None
            if log_dir:
                task_log_dir = f"{log_dir}/{prepared.instance_id}/{time.time_ns()}"
            return await agrade_patch(prepared, patch, factory=factory, log_dir=task_log_dir)

    return grade


class EpisodeManager:
    def __init__(
        self,
        tasks: Mapping[str, PreparedTask],
        factory: SandboxFactory,
        config: ServerConfig,
        *,
        grader: Grader | None = None,
    ) -> None:
        self.tasks = dict(tasks)
        self.factory = factory
        self.config = config
        self.grader = grader or make_grader(
            factory, max_concurrent=config.max_concurrent_grades, log_dir=config.grade_log_dir
        )
        self.episode_log = EpisodeLog(config.episode_log) if config.episode_log else None
        self._live: dict[str, Episode] = {}
        self._finished: OrderedDict[str, tuple[float, Episode]] = OrderedDict()
        self._opening = 0
        self._reaper: asyncio.Task[None] | None = None
        self._closing = False
        self.counters = {"opened": 0, "finished": 0, "reaped": 0, "rejected_full": 0}

    # --- lifecycle -------------------------------------------------------------------------------
    def start_reaper(self) -> None:
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever(), name="patchgym-reaper")

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(self.config.reap_interval_s)
            try:
                await self.reap_once()
            except Exception:  # noqa: BLE001 - the reaper must survive anything
                log.exception("reaping failed")

    async def reap_once(self) -> int:
        """Close episodes idle past the TTL or past their wall time; forget old finished ones."""
        stale = [
            (episode, reason)
            for episode in list(self._live.values())
            if not episode.busy
            for reason in [self._stale_reason(episode)]
            if reason
        ]
        for episode, (status, why) in stale:
            await episode.finish(status, why)
            self.counters["reaped"] += 1
        self._forget_old_finished()
        return len(stale)

    def _stale_reason(self, episode: Episode) -> tuple[EpisodeStatus, str] | None:
        if episode.time_left_s() <= 0:
            return EpisodeStatus.TIME_LIMIT, f"the wall-time limit of {episode.limits.wall_time_s:g} s passed"
        if episode.idle_s() > self.config.idle_ttl_s:
            return EpisodeStatus.CLOSED, f"idle for more than {self.config.idle_ttl_s:g} s"
        return None

    def _forget_old_finished(self) -> None:
        now = time.monotonic()
        while self._finished:
            _, (ended, _) = next(iter(self._finished.items()))
            if len(self._finished) > self.config.keep_finished or now - ended > self.config.finished_ttl_s:
                self._finished.popitem(last=False)
            else:
                break

    async def shutdown(self) -> None:
        """Close every episode (logged as `closed`) and every sandbox the factory still holds."""
        self._closing = True
        if self._reaper is not None:
            self._reaper.cancel()
            try:
                await self._reaper
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
            self._reaper = None
        live = list(self._live.values())
        await asyncio.gather(*(episode.close("the server shut down") for episode in live), return_exceptions=True)
        await asyncio.to_thread(self.factory.close_all)

    # --- episodes --------------------------------------------------------------------------------
    @property
    def live_count(self) -> int:
        return len(self._live) + self._opening

    async def open(self, task_id: str, overrides: LimitOverrides | None = None, parser: str | None = None) -> Episode:
        prepared = self.tasks.get(task_id)
        if prepared is None:
            shown = task_id if len(task_id) <= 80 else task_id[:80] + "..."
            raise UnknownTask(f"unknown task_id {shown!r}: GET /tasks lists the {len(self.tasks)} tasks served")
        limits = self.config.limits.with_overrides(overrides, self.config.ceilings)  # ValueError names the field
        parser = parser or self.config.default_parser
        get_parser(parser)  # ValueError names the parsers
        if self._closing:
            raise ServerFull(self.live_count, self.config.max_episodes, self.config.retry_after_s)
        if self.live_count >= self.config.max_episodes:
            self.counters["rejected_full"] += 1
            raise ServerFull(self.live_count, self.config.max_episodes, self.config.retry_after_s)
        self._opening += 1
        try:
            episode_id = secrets.token_hex(12)
            try:
                episode = await Episode.start(
                    episode_id, prepared, self.factory, limits, grader=self.grader, parser=parser,
                    on_finish=self._on_finish,
                )
            except SandboxError:
                raise
            except Exception as exc:  # noqa: BLE001 - a sandbox that cannot open is the backend's failure
                log.exception("could not open a sandbox for %s", task_id)
                raise SandboxError(f"could not open a sandbox for {task_id}: {type(exc).__name__}: {exc}") from exc
            self._live[episode_id] = episode
            self.counters["opened"] += 1
        finally:
            self._opening -= 1
        if self._closing:  # shutdown began while the sandbox opened
            await episode.close("the server shut down")
        return episode

    def get(self, episode_id: str) -> Episode:
        episode = self._live.get(episode_id)
        if episode is None:
            found = self._finished.get(episode_id)
            if found is None:
                shown = episode_id if len(episode_id) <= 80 else episode_id[:80] + "..."
                raise UnknownEpisode(f"unknown episode {shown!r} (never opened, deleted, or finished and forgotten)")
            episode = found[1]
        return episode

    async def close(self, episode_id: str) -> Episode:
        """Close the episode (if still live) and forget it: it is logged, then gone from the API."""
        episode = self.get(episode_id)
        await episode.close("closed by the client")
        self._live.pop(episode_id, None)
        self._finished.pop(episode_id, None)
        return episode

    async def _on_finish(self, episode: Episode) -> None:
        self._live.pop(episode.episode_id, None)
        self._finished[episode.episode_id] = (time.monotonic(), episode)
        self.counters["finished"] += 1
        self._forget_old_finished()
        if self.episode_log is not None:
            try:
                await self.episode_log.aappend(episode.record())
            except OSError:
                log.exception("could not append episode %s to the episode log", episode.episode_id)

    def list_episodes(self) -> list[dict[str, Any]]:
        """Every episode the server still knows: the live ones (oldest first), then the finished
        ones kept in memory (oldest first), each its summary with `live` and `idle_s`."""
        listed = []
        for live, episodes in ((True, list(self._live.values())), (False, [e for _, e in self._finished.values()])):
            for episode in episodes:
                listed.append({**episode.summary(), "live": live, "idle_s": round(episode.idle_s(), 3)})
        return listed

    def stats(self) -> dict[str, Any]:
        return {
            "live_episodes": len(self._live),
            "opening": self._opening,
            "max_episodes": self.config.max_episodes,
            "finished_in_memory": len(self._finished),
            **self.counters,
        }
