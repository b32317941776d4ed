"""The capacity router (`patchgym.rl.fleet.router`) driven with fake sampler replicas.

The replicas here are fakes (`FakeSampler`: the `Sampler` protocol with no model behind it, fixed
tokens, optional delays and failures): the router's logic is what is under test, and the real
embedded sampler is exercised by the fleet-check tests. Everything is deterministic: the
rendezvous hash is stable and the router's random choices are seeded.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter

import pytest

from patchgym.rl.fleet.load import load_fleet
from patchgym.rl.fleet.model import Fleet, Group
from patchgym.rl.fleet.router import NoReplicaAvailable, Router
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

PARAMS = SamplingParams(max_new_tokens=3)


class FakeSampler:
    """A fake replica: answers three fixed tokens after `delay` seconds, or fails as told."""

    def __init__(self, group: str, replica: str = "0", *, capacity: int = 8, version: int = 0, delay: float = 0.0):
        self.group, self.replica = group, replica
        self.capacity, self.version, self.delay = capacity, version, delay
        self.ok = True
        self.fail_with: BaseException | None = None
        self.health_raises = False
        self.calls = 0
        self.active = 0
        self.max_active = 0
        self.sessions: list[str | None] = []

    async def generate(self, prompt_ids, params, *, session_id=None, min_version=None) -> Generation:
        self.calls += 1
        self.sessions.append(session_id)
        if self.fail_with is not None:
            raise self.fail_with
        if min_version is not None and self.version < min_version:
            raise VersionBehind(self.version, min_version)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.active -= 1
        return Generation(
            token_ids=[5, 6, 7], logprobs=[-0.5, -0.25, -0.125], weight_version=self.version, group=self.group,
            finish_reason="length", replica=self.replica, prompt_tokens=len(prompt_ids), busy_s=0.25,
        )

    async def update_weights(self, state_dict_or_path, version: int) -> None:
        self.version = version

    def health(self) -> SamplerHealth:
        if self.health_raises:
            raise ConnectionError("health endpoint unreachable")
        return SamplerHealth(ok=self.ok, group=self.group, replica=self.replica, weight_version=self.version,
                             active_sessions=self.active, capacity=self.capacity, detail="" if self.ok else "draining")


def fakes_for(fleet: Fleet, replicas: int = 1, **kwargs) -> dict[str, list[FakeSampler]]:
    return {g.name: [FakeSampler(g.name, str(i), capacity=g.sessions_per_replica, **kwargs) for i in range(replicas)]
            for g in fleet.groups}


def small_fleet(*capacities: int, replicas: int = 1) -> Fleet:
    return Fleet(name="t", groups=[Group(name=f"g{i}", accelerator="X", replicas=replicas, sessions_per_replica=c)
                                   for i, c in enumerate(capacities)])


def run(coro):
    return asyncio.run(coro)


def test_the_fake_implements_the_sampler_protocol() -> None:
    assert isinstance(FakeSampler("g"), Sampler)


def test_shares_follow_capacity_on_mixed_6() -> None:
    fleet = load_fleet("mixed-6")
    router = Router(fakes_for(fleet), fleet)
    n = 20_000
    counts = Counter(router.preferred_group(f"session-{i}") for i in range(n))
    total = sum(g.capacity for g in fleet.groups)
    chi2 = sum((counts[g.name] - n * g.capacity / total) ** 2 / (n * g.capacity / total) for g in fleet.groups)
    # 8 groups -> 7 degrees of freedom; 24.32 is the chi-square critical value at p = 0.001. The hash
    # is deterministic, so this is a fixed check of the weighting, not a flaky one: unweighted
    # rendezvous (equal shares) gives a chi-square in the thousands here.
    assert chi2 < 24.32, (chi2, counts)
    unweighted = sum((counts[g.name] - n / 8) ** 2 / (n / 8) for g in fleet.groups)
    assert unweighted > 1000


def test_generate_lands_sessions_in_proportion_when_nothing_is_full() -> None:
    fleet = load_fleet("mixed-6")
    samplers = fakes_for(fleet)
    router = Router(samplers, fleet, seed=3)

    async def drive() -> Counter:
        landed = Counter()
        for i in range(4000):
            gen = await router.generate(f"s{i}", [1, 2], PARAMS)
            landed[gen.group] += 1
            assert gen.group == router.preferred_group(f"s{i}")
        return landed

    landed = run(drive())
    total = sum(g.capacity for g in fleet.groups)
    for g in fleet.groups:
        expected = 4000 * g.capacity / total
        # 4 binomial standard deviations: the deterministic outcome sits well inside it.
        assert abs(landed[g.name] - expected) < 4 * math.sqrt(expected), (g.name, landed[g.name], expected)
    stats = router.stats()
    assert sum(s["sessions"] for s in stats.values()) == 4000
    assert sum(s["tokens"] for s in stats.values()) == 12000
    assert stats["b300-nvfp4"]["weight"] == 48


def test_the_seed_changes_the_assignment_but_not_the_shares() -> None:
    fleet = small_fleet(10, 30)
    a = Router(fakes_for(fleet), fleet, seed=0)
    b = Router(fakes_for(fleet), fleet, seed=1)
    ids = [f"s{i}" for i in range(2000)]
    assert [a.preferred_group(s) for s in ids] != [b.preferred_group(s) for s in ids]
    assert [a.preferred_group(s) for s in ids] == [Router(fakes_for(fleet), fleet, seed=0).preferred_group(s) for s in ids]


def test_removing_a_group_moves_only_its_sessions() -> None:
    fleet = load_fleet("mixed-6")
    router = Router(fakes_for(fleet), fleet)
    ids = [f"s{i}" for i in range(5000)]
    before = {s: router.preferred_group(s) for s in ids}
    router.remove_group("h200-fp8")
    after = {s: router.preferred_group(s) for s in ids}
    moved = {s for s in ids if before[s] != after[s]}
    assert moved == {s for s in ids if before[s] == "h200-fp8"}
    assert len(moved) > 500  # 32/200 of 5000 is about 800
    assert "h200-fp8" not in router.stats()


def test_adding_a_group_moves_only_sessions_to_it() -> None:
    fleet = load_fleet("mixed-6")
    router = Router(fakes_for(fleet), fleet)
    ids = [f"s{i}" for i in range(5000)]
    before = {s: router.preferred_group(s) for s in ids}
    new = Group(name="gb300-extra", accelerator="B300", weights="nvfp4", sessions_per_replica=50)
    router.add_group(new, [FakeSampler("gb300-extra")])
    after = {s: router.preferred_group(s) for s in ids}
    moved = [s for s in ids if before[s] != after[s]]
    assert moved and all(after[s] == "gb300-extra" for s in moved)
    expected = 5000 * 50 / 250
    assert abs(len(moved) - expected) < 4 * math.sqrt(expected)
    with pytest.raises(ValueError, match="already has a group"):
        router.add_group(new, [FakeSampler("gb300-extra")])


def test_affinity_holds_over_turns_while_other_replicas_are_idle() -> None:
    fleet = small_fleet(8, 8, replicas=4)
    samplers = fakes_for(fleet, replicas=4)
    router = Router(samplers, fleet)

    async def drive() -> dict[str, set[tuple[str, str]]]:
        served: dict[str, set[tuple[str, str]]] = {}
        for turn in range(5):
            for i in range(40):  # turns of 40 sessions interleaved
                gen = await router.generate(f"s{i}", [1] * (turn + 1), PARAMS)
                served.setdefault(f"s{i}", set()).add((gen.group, gen.replica))
        return served

    served = run(drive())
    assert all(len(places) == 1 for places in served.values()), served
    for session, places in served.items():
        assert router.session_replica(session) == next(iter(places))
    assert router.end_session("s0") is True
    assert router.session_replica("s0") is None
    assert router.end_session("s0") is False
    assert router.stats()["g0"]["sessions"] + router.stats()["g1"]["sessions"] == 39


def test_a_full_replica_is_routed_around_and_affinity_returns_after() -> None:
    fleet = small_fleet(2, replicas=2)
    a, b = FakeSampler("g0", "0", capacity=2, delay=0.05), FakeSampler("g0", "1", capacity=2, delay=0.05)
    router = Router({"g0": [a, b]}, fleet)

    async def drive():
        first = await router.generate("s-main", [1], PARAMS)
        home = first.replica
        # Fill the home replica with two slow requests of other sessions pinned to it.
        others = [f"o{i}" for i in range(2)]
        for other in others:
            router._pin(other, router._replicas["g0"][int(home)])
        busy = [asyncio.create_task(router.generate(o, [1], PARAMS)) for o in others]
        await asyncio.sleep(0.01)
        during = await router.generate("s-main", [1], PARAMS)
        await asyncio.gather(*busy)
        return home, during.replica, router.stats()

    home, during, stats = run(drive())
    assert during != home  # the home replica was at its threshold of 2 in-flight requests
    assert max(a.max_active, b.max_active) <= 2
    assert stats["g0"]["in_flight"] == 0 and stats["g0"]["queued"] == 0


def test_when_everything_is_full_requests_queue_instead_of_failing() -> None:
    fleet = small_fleet(1, replicas=1)
    only = FakeSampler("g0", "0", capacity=1, delay=0.05)
    router = Router({"g0": [only]}, fleet)

    async def drive():
        tasks = [asyncio.create_task(router.generate(f"s{i}", [1], PARAMS)) for i in range(5)]
        await asyncio.sleep(0.01)
        peak = router.stats()["g0"]["queued"]
        results = await asyncio.gather(*tasks)
        return peak, results

    peak, results = run(drive())
    assert len(results) == 5 and peak == 4
    assert router.stats()["g0"]["requests"] == 5


def test_unavailable_replica_is_retried_elsewhere_and_marked_down() -> None:
    fleet = small_fleet(8, replicas=2)
    a, b = FakeSampler("g0", "0"), FakeSampler("g0", "1")
    now = [100.0]
    router = Router({"g0": [a, b]}, fleet, down_for_s=10.0, clock=lambda: now[0])

    async def drive():
        first = await router.generate("s", [1], PARAMS)
        home, other = (a, b) if first.replica == "0" else (b, a)
        home.fail_with = SamplerUnavailable("engine restarting")
        second = await router.generate("s", [1], PARAMS)
        assert second.replica == other.replica
        calls = home.calls
        await router.generate("s2", [1], PARAMS)
        await router.generate("s", [1], PARAMS)
        assert home.calls == calls  # marked down: not called again
        assert router.stats()["g0"]["replicas"][home.replica]["down"] is True
        home.fail_with = None
        now[0] += 11.0  # down time over: the replica may be used again
        other.ok = False
        back = await router.generate("s", [1], PARAMS)
        assert back.replica == home.replica
        return home

    home = run(drive())
    stats = router.stats()["g0"]["replicas"][home.replica]
    assert stats["retries"] == 1 and stats["errors"] == 0 and stats["down"] is False


def test_overloaded_and_unhealthy_replicas_are_routed_around() -> None:
    fleet = small_fleet(8, 8, replicas=2)
    samplers = fakes_for(fleet, replicas=2)
    samplers["g0"][0].fail_with = SamplerOverloaded("429")
    samplers["g0"][1].ok = False
    samplers["g1"][0].health_raises = True
    router = Router(samplers, fleet)

    async def drive():
        return [await router.generate(f"s{i}", [1], PARAMS) for i in range(50)]

    gens = run(drive())
    assert {(g.group, g.replica) for g in gens} == {("g1", "1")}
    assert samplers["g0"][1].calls == 0 and samplers["g1"][0].calls == 0
    stats = router.stats()
    assert stats["g0"]["replicas"]["0"]["retries"] == samplers["g0"][0].calls > 0
    assert stats["g1"]["replicas"]["1"]["requests"] == 50


def test_min_version_skips_replicas_that_are_behind() -> None:
    fleet = small_fleet(8, 8)
    samplers = fakes_for(fleet)
    samplers["g0"][0].version = 3
    samplers["g1"][0].version = 5
    router = Router(samplers, fleet)

    async def drive():
        gens = [await router.generate(f"s{i}", [1], PARAMS, min_version=4) for i in range(20)]
        with pytest.raises(NoReplicaAvailable, match="weight version 5 < min_version 9"):
            await router.generate("late", [1], PARAMS, min_version=9)
        return gens

    assert {g.group for g in run(drive())} == {"g1"}


def test_version_behind_from_the_sampler_moves_the_request() -> None:
    fleet = small_fleet(8, replicas=2)
    a, b = FakeSampler("g0", "0", version=1), FakeSampler("g0", "1", version=2)
    # `a` reports version 2 in health but its generate says it is behind (a race with an update).
    a.health = lambda: SamplerHealth(ok=True, group="g0", replica="0", weight_version=2, active_sessions=0, capacity=8)
    router = Router({"g0": [a, b]}, fleet)

    async def drive():
        return await asyncio.gather(*[router.generate(f"s{i}", [1], PARAMS, min_version=2) for i in range(10)])

    gens = run(drive())
    assert {g.replica for g in gens} == {"1"}


def test_all_down_gives_a_clear_error_naming_every_replica() -> None:
    fleet = small_fleet(8, 8, replicas=2)
    samplers = fakes_for(fleet, replicas=2)
    samplers["g0"][0].fail_with = SamplerUnavailable("connection refused")
    samplers["g0"][1].ok = False
    samplers["g1"][0].fail_with = SamplerOverloaded("queue full")
    samplers["g1"][1].health_raises = True
    router = Router(samplers, fleet, backoff_s=0.001, max_rounds=3)
    with pytest.raises(NoReplicaAvailable) as info:
        run(router.generate("s", [1], PARAMS))
    message = str(info.value)
    assert "no replica can serve session 's'" in message
    for key in ("g0/0", "g0/1", "g1/0", "g1/1"):
        assert key in message
    assert "connection refused" in message and "unhealthy: draining" in message
    assert "queue full" in message and "health check failed" in message
    assert isinstance(info.value, SamplerError) and info.value.retryable
    # the overloaded replica is retried in each of the 3 rounds; the unavailable one only once
    assert samplers["g1"][0].calls == 3 and samplers["g0"][0].calls == 1


def test_overload_clears_between_rounds() -> None:
    fleet = small_fleet(8)
    only = FakeSampler("g0")
    only.fail_with = SamplerOverloaded("busy")
    router = Router({"g0": [only]}, fleet, backoff_s=0.01)

    async def drive():
        task = asyncio.create_task(router.generate("s", [1], PARAMS))
        await asyncio.sleep(0.005)
        only.fail_with = None
        return await task

    assert run(drive()).replica == "0"
    assert router.stats()["g0"]["retries"] == 1


def test_non_retryable_errors_are_raised_and_repeated_ones_mark_down() -> None:
    fleet = small_fleet(8, replicas=2)
    a, b = FakeSampler("g0", "0"), FakeSampler("g0", "1")
    router = Router({"g0": [a, b]}, fleet, down_after_errors=3)

    async def drive():
        gen = await router.generate("s", [1], PARAMS)
        home, other = (a, b) if gen.replica == "0" else (b, a)
        home.fail_with = SamplerError("prompt longer than the context")
        with pytest.raises(SamplerError, match="prompt longer"):
            await router.generate("s", [1], PARAMS)
        home.fail_with = RuntimeError("CUDA error: illegal memory access")
        for _ in range(3):
            with pytest.raises(RuntimeError, match="illegal memory"):
                await router.generate("s", [1], PARAMS)
        assert router.stats()["g0"]["replicas"][home.replica]["down"] is True
        moved = await router.generate("s", [1], PARAMS)
        return home, other, moved

    home, other, moved = run(drive())
    assert moved.replica == other.replica
    assert router.stats()["g0"]["replicas"][home.replica]["errors"] == 4


def test_concurrent_generate_from_many_tasks() -> None:
    fleet = load_fleet("mixed-6")
    samplers = fakes_for(fleet, replicas=2, delay=0.002)
    router = Router(samplers, fleet)
    # 150 sessions at once against 400 sessions of capacity: no replica should pass its threshold.

    async def session(i: int) -> list[Generation]:
        out = []
        for turn in range(4):
            out.append(await router.generate(f"s{i}", [1] * (turn + 2), PARAMS))
            await asyncio.sleep(0.001 * (i % 3))
        router.end_session(f"s{i}")
        return out

    async def drive():
        return await asyncio.gather(*[session(i) for i in range(150)])

    results = run(drive())
    assert all(len({(g.group, g.replica) for g in gens}) == 1 for gens in results)
    stats = router.stats()
    assert sum(s["requests"] for s in stats.values()) == 600
    assert sum(s["in_flight"] for s in stats.values()) == 0
    assert sum(s["sessions"] for s in stats.values()) == 0
    assert sum(s["busy_s"] for s in stats.values()) == pytest.approx(600 * 0.25)
    for name, replicas in samplers.items():
        for fake in replicas:
            assert fake.max_active <= fake.capacity, (name, fake.replica, fake.max_active)


def test_cancelled_requests_release_their_slot() -> None:
    fleet = small_fleet(8)
    only = FakeSampler("g0", delay=1.0)
    router = Router({"g0": [only]}, fleet)

    async def drive():
        task = asyncio.create_task(router.generate("s", [1], PARAMS))
        await asyncio.sleep(0.01)
        assert router.stats()["g0"]["in_flight"] == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return router.stats()["g0"]["in_flight"]

    assert run(drive()) == 0


def test_bad_construction_is_a_clear_error() -> None:
    fleet = small_fleet(8)
    with pytest.raises(ValueError, match="fleet 't' does not have"):
        Router({"nope": [FakeSampler("nope")]}, fleet)
    with pytest.raises(ValueError, match="no samplers for any group"):
        Router({}, fleet)
    with pytest.raises(ValueError, match="two replicas are named '0'"):
        Router({"g0": [FakeSampler("g0", "0"), FakeSampler("g0", "0")]}, fleet)
    with pytest.raises(ValueError, match="belongs to group 'other'"):
        Router({"g0": [FakeSampler("other")]}, fleet)
    router = Router({"g0": [FakeSampler("g0")]}, fleet)
    with pytest.raises(ValueError, match="session_id"):
        run(router.generate("", [1], PARAMS))
    router.remove_group("g0")
    with pytest.raises(NoReplicaAvailable, match="no groups"):
        run(router.generate("s", [1], PARAMS))
    with pytest.raises(KeyError, match="no group 'g0'"):
        router.remove_group("g0")
