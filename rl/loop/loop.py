"""The asynchronous RL loop: samplers keep generating while the trainer trains, in one process.

Owns `RLLoop` (one run: session workers, the consumer that trains, publishing weights, per-update
outputs, checkpoints, resume) and `run_training(cfg, run_dir, ...)`, its synchronous entry point.

One asyncio event loop holds everything but the trainer's step:

* Session workers, one per session slot of the fleet (its capacity: replicas x sessions per
  replica, at least `samples`): each runs the next queued session through the router (one
  environment episode, `patchgym.rl.rollout.run_session`); when none is queued it admits a new
  group (the `StalenessGate`: always, unless the policy is `pace` with a cap), picks its task and
  queues its `samples` sessions. The worker that ends a group's last session puts the group in
  the FIFO `GroupBuffer` (2.0 x prompts groups by default; `put` blocks when it is full). So a
  slot never waits for the other sessions of its group.
* The consumer, per update: take `prompts` finished groups in FIFO order (a group past the cap is
  dropped and counted under `drop`), compute group advantages with
  `patchgym.rl.corrections.group_advantages` (no std normalisation with score centering), run
  `trainer.train_step` in a worker thread (so the event loop keeps feeding the samplers' decode
  threads), then publish the new weights with `update_weights` on every replica (timed:
  `weight_publish_s`). Samplers take the new weights between decoding steps; tokens record the
  version that produced them, so staleness is measured, not assumed. Then the format probe
  (`probe_kl.py`): one window of the update's tokens teacher-forced through the trainer and every
  group, all at the new version (`kl_probe/group/<g>`).

Per update, in this order, each appended and fsynced: `trajectories/update-XXXX.jsonl` (what the
rollouts recorded, per turn the sampled ids and their offsets), a `metrics.jsonl` row (every key,
every update), then (every `checkpoint.every` updates and at the end) a checkpoint, and (every
`eval.every` updates and at the end) an `eval.jsonl` row. A crash therefore never loses a finished
update's metrics or trajectories.

Resume (`resume=True`): the last checkpoint named by `checkpoints/latest` is loaded (model,
optimizer, RNG, version, and the loop state saved with it: update, task cursor, gate counters,
sampler versions); metrics and eval rows of later updates are dropped and their trajectory files
deleted, and those updates are redone from the checkpoint's state. The groups that were in flight
or queued at the crash are not restored (their sessions were episodes of a dead process); they are
sampled again. The trainer does not replay MoE routing. Not covered here: how a session is rolled
out (rl/rollout), how the trainer computes the loss (rl/trainer), evaluation (`evaluate.py`).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

import torch

from patchgym.rl.corrections import group_advantages
from patchgym.rl.fleet.publish import publish_weights
from patchgym.rl.trainer.base import TrainBatch
from patchgym.rl.trajectory import Trajectory

from .buffer import GroupBuffer, StalenessGate, TrajectoryGroup, staleness
from .components import Components, call_with_supported
from .config import RunConfig
from .cost import update_cost
from .metrics import MetricsWriter, Progress, WandbSink, update_row, write_lines_atomic
from .probe_kl import ProbeResult, probe_kl, probe_window
from .sessions import EnvClientContext, SessionFn, default_session_fn, resolve_task_ids, sampling_params, session_limits

TRAINER_THREAD = "patchgym-trainer"


class RLLoop:
    """One run of the asynchronous loop (see the module docstring)."""

    def __init__(
        self,
        cfg: RunConfig,
        run_dir: Path,
        components: Components,
        *,
        env_url: str,
        session_fn: SessionFn | None = None,
        env_client_factory: Callable[[], Any] | None = None,
        evaluator: Callable[..., Awaitable[dict[str, Any]]] | None = None,
        progress: bool = True,
        wandb_project: str | None = None,
        resume: bool = False,
        synchronous: bool = False,
        stop_after: int | None = None,
    ) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.c = components
        self.env_url = env_url
        self.session_fn = session_fn or default_session_fn()
        self.env_client_factory = env_client_factory
        self.evaluator = evaluator
        self.progress_enabled = progress
        self.wandb_project = wandb_project
        self.resume = resume
        self.synchronous = synchronous  # the baseline of bench/loop: generate a batch, then train
        self.stop_after = stop_after  # stop (as if killed) after this many updates of this process
        self.train_tasks = resolve_task_ids(cfg.tasks.train)
        self.group_names = [g.name for g in components.fleet.groups]
        self.buffer = GroupBuffer(cfg.batch.buffer_groups)
        self.gate = StalenessGate(cfg.staleness.cap, cfg.staleness.policy, cfg.batch.prompts)
        self.rng = random.Random(cfg.seed)
        self.update = 0
        self.version = int(getattr(components.trainer, "version", 0))
        self._version_changed: asyncio.Event | None = None
        self._stop = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=TRAINER_THREAD)
        self.metrics = MetricsWriter(self.run_dir / "metrics.jsonl")
        self.traj_dir = self.run_dir / "trajectories"
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.timeline: list[dict[str, float]] = []  # per update: when each phase began and ended (bench/loop)
        self.sessions_done = 0
        self.trainer_busy_s = 0.0
        self._probe_warned = False
        self._pending: deque[tuple[_GroupInFlight, int]] = deque()  # sessions of admitted groups not yet started

    # -- outputs -------------------------------------------------------------------------------
    def _prepare_dirs(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.traj_dir.mkdir(exist_ok=True)
        self.ckpt_dir.mkdir(exist_ok=True)
        (self.run_dir / "config.json").write_text(json.dumps(self.cfg.model_dump(mode="json"), indent=2))

    def _save_trajectories(self, update: int, groups: Sequence[TrajectoryGroup]) -> Path:
        path = self.traj_dir / f"update-{update:04d}.jsonl"
        write_lines_atomic(path, [t.to_json() for g in groups for t in g.trajectories])
        return path

    def _loop_state(self) -> dict[str, Any]:
        return {
            "update": self.update,
            "version": self.version,
            "rng": self.rng.getstate(),
            "gate": asdict(self.gate.counters),
            "sampler_versions": {s.replica or s.group: self.version for s in self.c.all_samplers()},
            "sessions_done": self.sessions_done,
        }

    def checkpoint(self) -> Path:
        path = self.ckpt_dir / f"update-{self.update:04d}"
        tmp = self.ckpt_dir / f".update-{self.update:04d}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        state = self._loop_state()
        state["rng"] = [state["rng"][0], list(state["rng"][1]), state["rng"][2]]
        self.c.trainer.save_checkpoint(tmp, extra_state={"loop": state})
        (tmp / "loop_state.json").write_text(json.dumps(state))
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)
        write_lines_atomic(self.ckpt_dir / "latest", [path.name])
        kept = sorted(p for p in self.ckpt_dir.glob("update-*") if p.is_dir())
        for old in kept[: -self.cfg.checkpoint.keep]:
            shutil.rmtree(old, ignore_errors=True)
        return path

    def _restore(self) -> None:
        latest = self.ckpt_dir / "latest"
        if not latest.exists():
            raise FileNotFoundError(f"{self.run_dir}: no checkpoint to resume from (no checkpoints/latest)")
        path = self.ckpt_dir / latest.read_text().strip()
        self.c.trainer.load_checkpoint(path)
        state = json.loads((path / "loop_state.json").read_text())
        self.update = int(state["update"])
        self.version = int(getattr(self.c.trainer, "version", state["version"]))
        rng = state["rng"]
        self.rng.setstate((rng[0], tuple(rng[1]), rng[2]))
        for key, value in state["gate"].items():
            setattr(self.gate.counters, key, value)
        self.gate.counters.started = self.gate.counters.consumed  # in-flight groups died with the process
        self.sessions_done = int(state.get("sessions_done", 0))
        # Drop what later updates wrote: they are redone from this state.
        self.metrics.truncate_after(self.update)
        MetricsWriter(self.run_dir / "eval.jsonl").truncate_after(self.update)
        for f in self.traj_dir.glob("update-*.jsonl"):
            if int(f.stem.split("-")[1]) > self.update:
                f.unlink()

    # -- sampling ------------------------------------------------------------------------------
    async def _run_session(self, env: Any, serial: int, task_id: str, index: int) -> Trajectory:
        """One agent session (one environment episode) of group `serial`, sample `index`."""
        session_id = f"g{serial}-s{index}"
        try:
            traj = await call_with_supported(
                self.session_fn, env, self.c.router, self.c.tokenizer, task_id, sampling_params(self.cfg),
                session_id=session_id, limits=session_limits(self.cfg), sample_index=index,
                max_turns=self.cfg.limits.max_turns,
            )
        finally:
            end = getattr(self.c.router, "end_session", None)
            if end:
                end(session_id)
        traj.sample_index = index
        return traj

    async def _run_group(self, env: Any, serial: int, task_id: str) -> TrajectoryGroup:
        """All `samples` sessions of one group at once (the synchronous baseline's unit)."""
        trajs = list(await asyncio.gather(*(self._run_session(env, serial, task_id, i) for i in range(self.cfg.batch.samples))))
        self.sessions_done += len(trajs)
        return TrajectoryGroup(task_id, trajs, start_version=self.version, serial=serial)

    def _next_task(self) -> str:
        return self.rng.choice(self.train_tasks)

    async def _admit_group(self) -> _GroupInFlight | None:
        """Wait for the staleness gate, then admit a new group and queue its sessions (None: stopping)."""
        assert self._version_changed is not None
        t0 = time.monotonic()
        while not (self.gate.may_start(self.version) and self._wanted()) and not self._stop:
            self._version_changed.clear()
            try:
                await asyncio.wait_for(self._version_changed.wait(), timeout=0.5)
            except asyncio.TimeoutError:
                pass
        self.gate.counters.paced_s += time.monotonic() - t0 if self.gate.policy == "pace" else 0.0
        if self._stop:
            return None
        group = _GroupInFlight(self.gate.admit(self.version), self._next_task(), self.version, self.cfg.batch.samples)
        self._pending.extend((group, i) for i in range(group.samples))
        return group

    def _wanted(self) -> bool:
        """Whether the run will train another group (always, with `batch.sample_ahead`)."""
        if self.cfg.batch.sample_ahead:
            return True
        gc = self.gate.counters
        return gc.started < self.cfg.updates * self.cfg.batch.prompts + gc.dropped

    async def _session_worker(self, env: Any) -> None:
        """One session slot: run the next queued session, admitting a new group when none is queued.

        Why slots and not one task per group: with one group per task, a slot whose session ended
        early stayed empty until the group's last session ended (measured on cpu-tiny: sampler
        busy 0.68 of wall time, async 1.35x sync); a slot here takes the next group's session at
        once, and a group is put in the buffer when its last session ends."""
        while not self._stop:
            if not self._pending and await self._admit_group() is None:
                return
            group, index = self._pending.popleft()
            group.trajectories[index] = await self._run_session(env, group.serial, group.task_id, index)
            group.remaining -= 1
            if group.remaining == 0:
                self.gate.finished(group.serial)
                self.sessions_done += group.samples
                await self.buffer.put(
                    TrajectoryGroup(group.task_id, list(group.trajectories), start_version=group.start_version, serial=group.serial)
                )

    async def _take_batch(self) -> list[TrajectoryGroup]:
        batch: list[TrajectoryGroup] = []
        while len(batch) < self.cfg.batch.prompts:
            group = await self.buffer.get()
            if self.gate.accept(group, self.version):
                batch.append(group)
        return batch

    # -- training ------------------------------------------------------------------------------
    def _advantages(self, groups: Sequence[TrajectoryGroup]) -> list[float]:
        rewards = torch.tensor([[float(t.reward) for t in g.trajectories] for g in groups], dtype=torch.float32)
        adv = group_advantages(rewards, self.cfg.batch.samples, normalize_std=self.cfg.loss.std_normalised)
        return adv.reshape(-1).tolist()

    def _busy(self) -> dict[str, tuple[float, float]]:
        """{group: (busy seconds, compute seconds)} summed over its replicas so far."""
        out: dict[str, tuple[float, float]] = {}
        for group, replicas in self.c.samplers.items():
            busy = compute = 0.0
            for s in replicas:
                try:
                    h = s.health()
                except Exception:
                    continue
                busy += float(h.busy_s)
                compute += float(getattr(h, "compute_s", 0.0) or 0.0)
            out[group] = (busy, compute)
        return out

    async def _publish(self) -> float:
        t0 = time.monotonic()
        weights = self.c.trainer.weights()
        version = int(self.c.trainer.version)
        await publish_weights(self.c.all_samplers(), weights, version, executor=self._executor)
        self.version = version
        if self._version_changed is not None:
            self._version_changed.set()
        return time.monotonic() - t0

    def _probe(self, trajs: Sequence[Trajectory]) -> ProbeResult:
        """The format probe on this update's tokens, trainer and samplers at the same version
        (runs in the trainer's thread, after the publish)."""
        groups = {g: self.c.samplers.get(g, []) for g in self.group_names}
        if not callable(getattr(self.c.trainer, "sequence_logits", None)):
            return ProbeResult(kl={g: None for g in groups})
        window = probe_window(trajs, context=self.cfg.probe.context, tokens=self.cfg.probe.tokens)
        result = probe_kl(self.c.trainer, groups, window, temperature=self.cfg.sampling.temperature)
        if result.error and not self._probe_warned:
            self._probe_warned = True
            print(f"warning: the per-update format probe failed ({result.error}); kl_probe is null", flush=True)
        return result

    async def _evaluate(self, update: int) -> dict[str, Any] | None:
        if self.evaluator is None or not self.cfg.tasks.eval:
            return None
        row = await self.evaluator(self.c.trainer.weights(), int(self.c.trainer.version), update=update)
        MetricsWriter(self.run_dir / "eval.jsonl").write(row)
        return row

    async def _train_once(self, groups: list[TrajectoryGroup], busy_before: dict[str, float], t_update: float, wait_s: float) -> dict[str, Any]:
        cfg = self.cfg
        self.update += 1
        for p, g in enumerate(groups):
            for t in g.trajectories:
                t.prompt_index = p
        trajs = [t for g in groups for t in g.trajectories]
        stale = [staleness(g, self.version) for g in groups]
        batch = TrainBatch(trajectories=trajs, advantages=self._advantages(groups), current_version=self.version,
                           extra={"update": self.update})
        t_train = time.monotonic()
        tm = await asyncio.get_running_loop().run_in_executor(self._executor, self.c.trainer.train_step, batch)
        trainer_s = time.monotonic() - t_train
        self.trainer_busy_s += trainer_s
        publish_s = await self._publish()
        probe = await asyncio.get_running_loop().run_in_executor(self._executor, self._probe, trajs)
        t_end = time.monotonic()
        busy_after = self._busy()
        wall = max(t_end - t_update, 1e-9)
        busy_frac, compute_frac = {}, {}
        for g, replicas in self.c.samplers.items():
            (b1, c1), (b0, c0) = busy_after.get(g, (0.0, 0.0)), busy_before.get(g, (0.0, 0.0))
            busy_frac[g] = (b1 - b0) / (wall * max(1, len(replicas)))
            compute_frac[g] = (c1 - c0) / (wall * max(1, len(replicas))) if c1 > 0 else None
        turns: dict[str, int] = {}
        for t in trajs:
            for turn in t.turns:
                if turn.group in self.group_names:
                    turns[turn.group] = turns.get(turn.group, 0) + 1
        busy_delta = {g: max(0.0, busy_after.get(g, (0.0, 0.0))[0] - busy_before.get(g, (0.0, 0.0))[0]) for g in self.group_names}
        cost = update_cost(self.c.fleet, busy_delta, turns)
        self.timeline.append({"update": self.update, "start": t_update, "train_start": t_train, "train_end": t_train + trainer_s, "end": t_end})
        self._save_trajectories(self.update, groups)
        gc = self.gate.counters
        row = update_row(
            update=self.update, version=self.version, loss_kind=cfg.loss.kind, groups=groups, trainer_metrics=tm,
            group_names=self.group_names, staleness_values=stale, busy_fraction=busy_frac, compute_fraction=compute_frac, cost=cost,
            timings={"wall_s": t_end - self._t0, "update_s": wall, "trainer_s": trainer_s, "trainer_idle_s": wait_s,
                     "weight_publish_s": publish_s,
                     "throughput/trajectories_per_hour": len(trajs) / wall * 3600.0},
            buffer={"size": len(self.buffer), "dropped": gc.dropped, "stale_kept": gc.stale_kept, "paced_s": gc.paced_s,
                    "blocked_s": self.buffer.blocked_s},
        )
        row.update(probe.metrics())
        row["sessions/finished"] = self.sessions_done  # cumulative, trained or not (sampler throughput)
        self.metrics.write(row)
        return row

    async def run_async(self) -> dict[str, Any]:
        cfg = self.cfg
        self._prepare_dirs()
        if self.resume:
            self._restore()
        self._version_changed = asyncio.Event()
        if self.resume and self.update:
            await self._publish()  # samplers start from the checkpoint's weights
        progress = Progress(cfg.updates, enabled=self.progress_enabled, description=cfg.name)
        if self.update:
            progress.advance({}, completed=self.update)
        sink = WandbSink(self.wandb_project, cfg.name, cfg.model_dump(mode="json"), self.run_dir) if self.wandb_project else None
        env_cm = self.env_client_factory() if self.env_client_factory else EnvClientContext(self.env_url, cfg.environment.token)
        rows: list[dict[str, Any]] = []
        last_eval = None
        self._t0 = time.monotonic()
        done_here = 0
        try:
            async with env_cm as env:
                capacity = sum(g.capacity for g in _scaled_groups(self.c))
                n_producers = max(1, capacity // cfg.batch.samples)  # the synchronous baseline's groups at once
                producers: list[asyncio.Task] = []
                if not self.synchronous:
                    # One worker per session slot of the fleet (at least one group's worth).
                    producers = [asyncio.create_task(self._session_worker(env), name=f"session-slot-{i}")
                                 for i in range(max(capacity, cfg.batch.samples))]
                try:
                    while self.update < cfg.updates:
                        busy_before = self._busy()
                        t_update = time.monotonic()
                        if self.synchronous:
                            groups = []
                            while len(groups) < cfg.batch.prompts:
                                want = cfg.batch.prompts - len(groups)
                                made = await asyncio.gather(*(self._run_group(env, self.gate.admit(self.version), self._next_task())
                                                              for _ in range(min(want, n_producers))))
                                groups += [g for g in made if self.gate.accept(g, self.version)]
                        else:
                            groups = await self._wait_batch(producers)
                        wait_s = time.monotonic() - t_update
                        row = await self._train_once(groups, busy_before, t_update, wait_s)
                        rows.append(row)
                        progress.advance(row)
                        if sink:
                            sink.log(row)
                        done_here += 1
                        is_last = self.update >= cfg.updates
                        if (cfg.checkpoint.every and self.update % cfg.checkpoint.every == 0) or is_last:
                            progress.note(f"checkpoint at update {self.update}")
                            await asyncio.get_running_loop().run_in_executor(self._executor, self.checkpoint)
                        if (cfg.eval.every and self.update % cfg.eval.every == 0) or (is_last and cfg.eval.at_end):
                            progress.note(f"evaluating at update {self.update}")
                            last_eval = await self._evaluate(self.update)
                        if self.stop_after is not None and done_here >= self.stop_after:
                            break
                finally:
                    self._stop = True
                    for p in producers:
                        p.cancel()
                    await asyncio.gather(*producers, return_exceptions=True)
        finally:
            progress.close()
            if sink:
                sink.close()
            self._executor.shutdown(wait=True)
        return {"updates": self.update, "rows": rows, "eval": last_eval, "run_dir": str(self.run_dir)}

    async def _wait_batch(self, producers: list[asyncio.Task]) -> list[TrajectoryGroup]:
        """The next batch, surfacing a producer's crash instead of waiting forever."""
        take = asyncio.create_task(self._take_batch())
        while True:
            done, _ = await asyncio.wait([take, *producers], return_when=asyncio.FIRST_COMPLETED)
            if take in done:
                return take.result()
            for p in done:
                if p.exception() is not None:
                    take.cancel()
                    raise p.exception()  # type: ignore[misc]
                producers.remove(p)


class _GroupInFlight:
    """An admitted group whose sessions are queued or running (the session workers fill it)."""

    def __init__(self, serial: int, task_id: str, start_version: int, samples: int) -> None:
        self.serial, self.task_id, self.start_version, self.samples = serial, task_id, start_version, samples
        self.trajectories: list[Any] = [None] * samples
        self.remaining = samples


def _scaled_groups(c: Components) -> list[Any]:
    """Groups with the capacity the run really has (replicas as built x sessions per replica)."""
    out = []
    for g in c.fleet.groups:
        replicas = c.samplers.get(g.name, [])
        sessions = g.sessions_per_replica
        if replicas:
            try:
                sessions = int(replicas[0].health().capacity)
            except Exception:
                pass
        out.append(g.model_copy(update={"replicas": max(1, len(replicas)), "sessions_per_replica": max(1, sessions)}))
    return out


def run_training(cfg: RunConfig, run_dir: Path, components: Components, *, env_url: str, **kwargs: Any) -> dict[str, Any]:
    loop = RLLoop(cfg, run_dir, components, env_url=env_url, **kwargs)
    return asyncio.run(loop.run_async())
