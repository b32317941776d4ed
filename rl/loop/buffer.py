"""The loop's FIFO of finished trajectory groups, staleness, and what a staleness cap does.

Owns: `TrajectoryGroup` (the `samples` trajectories of one prompt), `staleness` (current version
minus the oldest weight version over every turn of a group, as the reference run measures it),
`GroupBuffer` (an asyncio FIFO of finished groups, `2.0 x prompts` groups by default, whose `put`
blocks producers when it is full) and `StalenessGate`, the policy applied with a cap:

    keep   a group past the cap is trained on anyway (counted as `stale_kept`)
    drop   a group past the cap when it is taken is thrown away (counted as `dropped`)
    pace   admission control, so nothing finished is wasted: a new group may start only while
           (a) no in-flight group is already `cap` versions old, and
           (b) groups started <= (version + cap + 1) x prompts  (the bound AReaL uses: with FIFO
               consumption no group can then wait more than `cap` updates to be trained).
           A group that still ends up past the cap (it finished last) is kept and counted.

With no cap (the default, as the reference run) every policy keeps everything. It does not start
sessions or train; the loop (`loop.py`) calls it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from patchgym.rl.trajectory import Trajectory

Policy = Literal["keep", "drop", "pace"]


@dataclass
class TrajectoryGroup:
    """The trajectories of one prompt (one GRPO group), finished."""

    task_id: str
    trajectories: list[Trajectory]
    start_version: int  # the trainer version when the group was admitted
    serial: int = 0  # admission order
    finished_at: float = field(default_factory=time.monotonic)

    @property
    def min_version(self) -> int:
        """The oldest weight version over all turns of all its trajectories (-1: no turn at all)."""
        versions = [t.min_version for t in self.trajectories if t.turns]
        return min(versions) if versions else self.start_version


def staleness(group: TrajectoryGroup, current_version: int) -> int:
    """Current version minus the oldest weight version that produced any of the group's tokens."""
    return max(0, current_version - group.min_version)


class GroupBuffer:
    """FIFO of finished groups; `put` waits while `capacity` groups are queued."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"buffer capacity must be >= 1 group, got {capacity}")
        self.capacity = capacity
        self._items: deque[TrajectoryGroup] = deque()
        self._changed = asyncio.Condition()
        self.blocked_s = 0.0  # producer time spent waiting for room

    def __len__(self) -> int:
        return len(self._items)

    async def put(self, group: TrajectoryGroup) -> None:
        async with self._changed:
            if len(self._items) >= self.capacity:
                t0 = time.monotonic()
                await self._changed.wait_for(lambda: len(self._items) < self.capacity)
                self.blocked_s += time.monotonic() - t0
            self._items.append(group)
            self._changed.notify_all()

    async def get(self) -> TrajectoryGroup:
        async with self._changed:
            await self._changed.wait_for(lambda: len(self._items) > 0)
            group = self._items.popleft()
            self._changed.notify_all()
            return group

    def get_nowait(self) -> TrajectoryGroup | None:
        if not self._items:
            return None
        group = self._items.popleft()
        # Wake blocked producers without awaiting: schedule the notification.
        asyncio.get_running_loop().create_task(self._notify())
        return group

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def state(self) -> list[dict]:
        """What is queued (for a checkpoint's loop state: ids only, the groups are re-made)."""
        return [{"task_id": g.task_id, "serial": g.serial, "start_version": g.start_version} for g in self._items]


@dataclass
class GateCounters:
    started: int = 0  # groups admitted since the run began
    consumed: int = 0  # groups handed to the trainer
    dropped: int = 0  # groups thrown away by policy "drop"
    stale_kept: int = 0  # groups past the cap that were trained on (keep, or pace that finished late)
    paced_s: float = 0.0  # time admission was held by "pace"


class StalenessGate:
    """Applies a staleness cap and policy at admission (pace) and when a group is taken (drop/keep)."""

    def __init__(self, cap: int | None, policy: Policy, prompts_per_update: int) -> None:
        if policy not in ("keep", "drop", "pace"):
            raise ValueError(f"staleness policy must be keep, drop or pace, got {policy!r}")
        if cap is not None and cap < 0:
            raise ValueError(f"staleness cap must be >= 0 or None, got {cap}")
        if prompts_per_update < 1:
            raise ValueError(f"prompts per update must be >= 1, got {prompts_per_update}")
        self.cap = cap
        self.policy = policy
        self.prompts = prompts_per_update
        self.counters = GateCounters()
        self._inflight: dict[int, int] = {}  # serial -> start version
        self._serial = 0

    # -- admission ---------------------------------------------------------------------------
    def may_start(self, version: int) -> bool:
        """Whether a new group may start now (always, except under "pace" with a cap)."""
        if self.cap is None or self.policy != "pace":
            return True
        if self._inflight and version - min(self._inflight.values()) >= self.cap:
            return False
        return self.counters.started < (version + self.cap + 1) * self.prompts

    def admit(self, version: int) -> int:
        """Record that a group starts at `version`; returns its serial."""
        self._serial += 1
        self._inflight[self._serial] = version
        self.counters.started += 1
        return self._serial

    def finished(self, serial: int) -> None:
        self._inflight.pop(serial, None)

    def inflight(self) -> int:
        return len(self._inflight)

    # -- consumption -------------------------------------------------------------------------
    def accept(self, group: TrajectoryGroup, version: int) -> bool:
        """Whether a finished group is trained on at `version` (False: dropped, and counted)."""
        stale = staleness(group, version)
        if self.cap is None or stale <= self.cap:
            self.counters.consumed += 1
            return True
        if self.policy == "drop":
            self.counters.dropped += 1
            return False
        self.counters.stale_kept += 1
        self.counters.consumed += 1
        return True
