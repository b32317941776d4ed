"""The capacity router: agent sessions -> sampler groups -> replicas, around failures and overload.

Owns `Router` and `NoReplicaAvailable`. The rollouts call only `Router.generate`.

Groups. A session's groups are ranked by weighted rendezvous hashing: for each group a uniform u
in (0, 1) from a stable hash of (seed, session, group) gives the score -w / ln(u), w = the group's
capacity in the fleet file (replicas x sessions per replica). The highest score wins, so a group
gets a share of sessions proportional to its capacity, and adding or removing a group moves only
the sessions that group gains or loses (every other session's ranking is unchanged). The fleet
file's capacities are used even when a CPU preset scales the replicas down (`build.py`), so the
shares and prices keep the file's ratios.

Replicas. A session sticks to the replica that served its last turn (its prefix cache) while that
replica is healthy and under its overload threshold (in-flight requests < capacity x
`overload_factor`, capacity from the replica's `health()`). Otherwise the router takes, in the
session's group, the most-recently-used healthy under-loaded replica (the reference stack's rule),
or when none of them has been used yet, a random one among the least loaded; then the next group in
the session's rendezvous order. Only when every healthy replica is at its threshold is a request
sent to a full one (it queues there: the `queued` statistic) rather than failed.

Failures. A replica is skipped while `health().ok` is false, while `health()` raises, or while it
is marked down: for `down_for_s` after it raised `SamplerUnavailable`, or after
`down_after_errors` consecutive unexpected errors. A retryable `SamplerError`
(`SamplerOverloaded`, `VersionBehind`, `SamplerUnavailable`) moves the request to another replica,
then to the next group; each replica is tried once per round, and after a round in which some
replica was only overloaded or behind, the router waits `backoff_s` (doubling) and tries again, for
at most `max_rounds` rounds. When nothing can serve, `NoReplicaAvailable` (a retryable
`SamplerUnavailable`) lists every replica and why it was not used. A non-retryable error is
raised at once (retrying elsewhere would fail the same way).

Concurrency: the router's state is changed only between awaits on one asyncio loop, so concurrent
`generate` calls from many tasks need no lock. Load counts are the router's own (requests it has
in flight on a replica), not the replica's report. Not covered here: building the samplers
(`build.py`), the rollouts, the weight updates.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from patchgym.rl.sampler.types import (
    Generation,
    Sampler,
    SamplerError,
    SamplerHealth,
    SamplerOverloaded,
    SamplerUnavailable,
    SamplingParams,
    VersionBehind,
)

from .model import Fleet, Group


class NoReplicaAvailable(SamplerUnavailable):
    """No replica of any group could serve the request; the message lists each one and why."""


@dataclass(eq=False)
class _Replica:
    sampler: Sampler
    group: str
    name: str
    default_capacity: int
    sessions: set[str] = field(default_factory=set)  # sessions pinned to it now
    sessions_routed: int = 0  # sessions ever pinned to it
    in_flight: int = 0
    requests: int = 0  # requests it answered
    retries: int = 0  # requests it failed with a retryable error (served elsewhere or not at all)
    errors: int = 0  # requests it failed with a non-retryable or unexpected error
    consecutive_errors: int = 0
    busy_s: float = 0.0
    tokens: int = 0
    down_until: float = 0.0
    down_reason: str = ""
    last_used: int = 0  # a tick of the router's counter; 0 = never used

    @property
    def key(self) -> str:
        return f"{self.group}/{self.name}"


class Router:
    """Routes agent sessions over the replicas of a fleet's sampler groups (see the module doc)."""

    def __init__(
        self,
        samplers: Mapping[str, Sequence[Sampler]],
        fleet: Fleet,
        *,
        seed: int = 0,
        overload_factor: float = 1.0,
        max_rounds: int = 3,
        backoff_s: float = 0.05,
        down_after_errors: int = 3,
        down_for_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not overload_factor > 0:
            raise ValueError(f"overload_factor must be > 0 (got {overload_factor})")
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1 (got {max_rounds})")
        if down_after_errors < 1:
            raise ValueError(f"down_after_errors must be >= 1 (got {down_after_errors})")
        self.seed = int(seed)
        self.overload_factor = float(overload_factor)
        self.max_rounds = int(max_rounds)
        self.backoff_s = float(backoff_s)
        self.down_after_errors = int(down_after_errors)
        self.down_for_s = float(down_for_s)
        self._clock = clock
        self._rng = random.Random(self.seed)
        self._ticks = itertools.count(1)
        self._groups: dict[str, Group] = {}
        self._replicas: dict[str, list[_Replica]] = {}
        self._pins: dict[str, _Replica] = {}
        known = {group.name for group in fleet.groups}
        unknown = sorted(set(samplers) - known)
        if unknown:
            raise ValueError(
                f"samplers for groups {', '.join(map(repr, unknown))} that fleet {fleet.name!r} does not have "
                f"(its groups: {', '.join(sorted(known))})"
            )
        for group in fleet.groups:
            if group.name in samplers:
                self.add_group(group, samplers[group.name])
        if not self._groups:
            raise ValueError(f"no samplers for any group of fleet {fleet.name!r}")

    # -- groups ---------------------------------------------------------------------------------

    @property
    def groups(self) -> list[str]:
        return list(self._groups)

    def add_group(self, group: Group, samplers: Sequence[Sampler]) -> None:
        """Start routing to `group` (its capacity is its weight) served by `samplers`."""
        if group.name in self._groups:
            raise ValueError(f"the router already has a group named {group.name!r}")
        if not samplers:
            raise ValueError(f"group {group.name!r}: no replicas given")
        replicas: list[_Replica] = []
        names: set[str] = set()
        for sampler in samplers:
            if getattr(sampler, "group", group.name) != group.name:
                raise ValueError(f"group {group.name!r}: a replica says it belongs to group {sampler.group!r}")
            name = str(getattr(sampler, "replica", len(replicas)))
            if name in names:
                raise ValueError(f"group {group.name!r}: two replicas are named {name!r}")
            names.add(name)
            replicas.append(_Replica(sampler, group.name, name, group.sessions_per_replica))
        self._groups[group.name] = group
        self._replicas[group.name] = replicas

    def remove_group(self, name: str) -> None:
        """Stop routing to group `name`; its sessions are routed afresh on their next turn.

        Requests already running there finish; their statistics leave with the group."""
        if name not in self._groups:
            raise KeyError(f"the router has no group {name!r} (groups: {', '.join(self._groups) or 'none'})")
        del self._groups[name]
        for replica in self._replicas.pop(name):
            for session in replica.sessions:
                self._pins.pop(session, None)
            replica.sessions.clear()

    def _u(self, session_id: str, group: str) -> float:
        digest = hashlib.blake2b(f"{self.seed}\x1f{session_id}\x1f{group}".encode(), digest_size=8).digest()
        return (int.from_bytes(digest, "big") + 0.5) / 2.0**64  # in (0, 1), never 0 or 1

    def group_order(self, session_id: str) -> list[str]:
        """The session's groups, best first, by weighted rendezvous hashing (ignores load)."""
        scores = {name: -group.capacity / math.log(self._u(session_id, name)) for name, group in self._groups.items()}
        return sorted(scores, key=lambda name: (-scores[name], name))

    def preferred_group(self, session_id: str) -> str:
        """The group a new session lands on when every group can take it."""
        if not self._groups:
            raise NoReplicaAvailable("the router has no groups")
        return self.group_order(session_id)[0]

    def session_replica(self, session_id: str) -> tuple[str, str] | None:
        """(group, replica) the session is pinned to, or None."""
        replica = self._pins.get(session_id)
        return (replica.group, replica.name) if replica else None

    def end_session(self, session_id: str) -> bool:
        """Forget the session's affinity (its episode ended); False if it had none."""
        replica = self._pins.pop(session_id, None)
        if replica is None:
            return False
        replica.sessions.discard(session_id)
        return True

    # -- replica state --------------------------------------------------------------------------

    def _health(self, replica: _Replica) -> tuple[SamplerHealth | None, str]:
        """The replica's health and, when it cannot be used at all, why."""
        now = self._clock()
        if replica.down_until > now:
            return None, f"marked down for {replica.down_until - now:.1f} s more ({replica.down_reason})"
        try:
            health = replica.sampler.health()
        except Exception as exc:  # a replica whose health check breaks is not healthy
            return None, f"health check failed: {type(exc).__name__}: {exc}"
        if not health.ok:
            return None, f"unhealthy{': ' + health.detail if health.detail else ''}"
        return health, ""

    def _threshold(self, replica: _Replica, health: SamplerHealth | None) -> int:
        capacity = health.capacity if health is not None and health.capacity > 0 else replica.default_capacity
        return max(1, math.ceil(capacity * self.overload_factor))

    def _mark_down(self, replica: _Replica, reason: str) -> None:
        replica.down_until = self._clock() + self.down_for_s
        replica.down_reason = reason

    # -- routing --------------------------------------------------------------------------------

    def _pick(self, session_id: str, tried: dict[str, str], min_version: int | None) -> tuple[_Replica | None, bool]:
        """The replica for the next try and whether it is over its threshold (the request queues)."""
        pinned = self._pins.get(session_id)
        order = self.group_order(session_id)
        if pinned is not None and pinned.group in self._groups:
            order.remove(pinned.group)
            order.insert(0, pinned.group)
        usable: list[tuple[_Replica, bool]] = []  # (replica, full), in the session's group order
        for group in order:
            for replica in self._replicas[group]:
                if replica.key in tried:
                    continue
                health, why = self._health(replica)
                if health is None:
                    tried[replica.key] = why
                    continue
                if min_version is not None and health.weight_version < min_version:
                    tried[replica.key] = f"holds weight version {health.weight_version} < min_version {min_version}"
                    continue
                usable.append((replica, replica.in_flight >= self._threshold(replica, health)))
        if not usable:
            return None, False
        if pinned is not None and any(replica is pinned and not full for replica, full in usable):
            return pinned, False
        for group in order:
            free = [replica for replica, full in usable if replica.group == group and not full]
            if free:
                used = [replica for replica in free if replica.last_used]
                if used:
                    return max(used, key=lambda replica: replica.last_used), False
                least = min(replica.in_flight for replica in free)
                return self._rng.choice([replica for replica in free if replica.in_flight == least]), False
        # Every usable replica is at its threshold: queue on the session's own replica if it is one
        # of them, else on the least loaded replica of the first group that has one.
        if pinned is not None and any(replica is pinned for replica, _ in usable):
            return pinned, True
        first = usable[0][0].group
        candidates = [replica for replica, _ in usable if replica.group == first]
        least = min(replica.in_flight for replica in candidates)
        return self._rng.choice([replica for replica in candidates if replica.in_flight == least]), True

    def _pin(self, session_id: str, replica: _Replica) -> None:
        old = self._pins.get(session_id)
        if old is replica:
            return
        if old is not None:
            old.sessions.discard(session_id)
        self._pins[session_id] = replica
        replica.sessions.add(session_id)
        replica.sessions_routed += 1

    async def generate(
        self,
        session_id: str,
        prompt_ids: list[int],
        params: SamplingParams,
        *,
        min_version: int | None = None,
    ) -> Generation:
        """Serve one turn of `session_id` on the replica the routing rules choose (module doc)."""
        if not isinstance(session_id, str) or not session_id:
            raise ValueError(f"session_id must be a non-empty string (got {session_id!r})")
        if not self._groups:
            raise NoReplicaAvailable(f"no replica can serve session {session_id!r}: the router has no groups")
        reasons: dict[str, str] = {}
        tries = 0
        for round_index in range(self.max_rounds):
            tried: dict[str, str] = {}
            transient = False
            while True:
                replica, _full = self._pick(session_id, tried, min_version)
                if replica is None:
                    break
                tries += 1
                replica.in_flight += 1
                replica.last_used = next(self._ticks)
                try:
                    generation = await replica.sampler.generate(
                        prompt_ids, params, session_id=session_id, min_version=min_version
                    )
                except SamplerError as exc:
                    if not exc.retryable:
                        replica.errors += 1
                        raise
                    replica.retries += 1
                    tried[replica.key] = f"{type(exc).__name__}: {exc}"
                    if isinstance(exc, (SamplerOverloaded, VersionBehind)):
                        transient = True
                    else:
                        replica.consecutive_errors += 1
                        self._mark_down(replica, f"{type(exc).__name__}: {exc}")
                    continue
                except Exception as exc:
                    replica.errors += 1
                    replica.consecutive_errors += 1
                    if replica.consecutive_errors >= self.down_after_errors:
                        self._mark_down(replica, f"{replica.consecutive_errors} errors in a row, last {type(exc).__name__}: {exc}")
                    raise
                finally:
                    replica.in_flight -= 1
                replica.requests += 1
                replica.consecutive_errors = 0
                replica.busy_s += float(generation.busy_s)
                replica.tokens += len(generation.token_ids)
                if replica.group in self._groups:  # not removed while the request ran
                    self._pin(session_id, replica)
                return generation
            reasons.update(tried)
            if not transient or round_index + 1 == self.max_rounds:
                break
            await asyncio.sleep(self.backoff_s * 2**round_index)
        total = sum(len(replicas) for replicas in self._replicas.values())
        listed = [f"{key}: {why}" for key, why in reasons.items()]
        if len(listed) > 12:
            listed = listed[:12] + [f"... and {len(listed) - 12} more"]
        raise NoReplicaAvailable(
            f"no replica can serve session {session_id!r} ({tries} tries over {total} replicas in "
            f"{len(self._groups)} groups): " + "; ".join(listed)
        )

    # -- statistics -----------------------------------------------------------------------------

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per group: weight, totals and `replicas` {name: counts}. Plain data (JSON-ready)."""
        out: dict[str, dict[str, Any]] = {}
        now = self._clock()
        for name, group in self._groups.items():
            per_replica: dict[str, dict[str, Any]] = {}
            for replica in self._replicas[name]:
                try:
                    health = replica.sampler.health()
                except Exception:
                    health = None
                threshold = self._threshold(replica, health)
                per_replica[replica.name] = {
                    "sessions": len(replica.sessions),
                    "sessions_routed": replica.sessions_routed,
                    "in_flight": replica.in_flight,
                    "queued": max(0, replica.in_flight - threshold),
                    "threshold": threshold,
                    "requests": replica.requests,
                    "retries": replica.retries,
                    "errors": replica.errors,
                    "busy_s": replica.busy_s,
                    "tokens": replica.tokens,
                    "down": replica.down_until > now,
                }
            totals = {
                key: sum(stats[key] for stats in per_replica.values())
                for key in ("sessions", "sessions_routed", "in_flight", "queued", "requests", "retries", "errors", "busy_s", "tokens")
            }
            out[name] = {"weight": group.capacity, **totals, "replicas": per_replica}
        return out
