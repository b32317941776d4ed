"""Test doubles for the loop's parts (named as such): a trainer, samplers, a router and a session.

They follow the contracts (`Trainer`, `Sampler`, the router's `generate`, the rollouts'
`run_session`) with no model, so the loop's own logic (asynchrony, staleness, advantages, outputs,
checkpoint and resume) is tested fast. The real parts are exercised by the slow end-to-end test.
Run as a script (`python tests/loop_doubles.py RUN_DIR UPDATES [--resume]`) it runs a loop with
them, which the resume test kills with SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from patchgym.rl.fleet.load import load_fleet
from patchgym.rl.loop.components import Components
from patchgym.rl.loop.config import parse_config
from patchgym.rl.sampler.types import SamplerHealth
from patchgym.rl.trajectory import Trajectory, Turn


class DoubleSampler:
    def __init__(self, group: str, replica: str, capacity: int = 2) -> None:
        self.group, self.replica, self.capacity = group, replica, capacity
        self.version = 0
        self.busy_s = 0.0
        self.updates: list[int] = []

    async def update_weights(self, state: Any, version: int) -> None:
        self.version = version
        self.updates.append(version)

    def health(self) -> SamplerHealth:
        return SamplerHealth(ok=True, group=self.group, replica=self.replica, weight_version=self.version,
                             active_sessions=0, capacity=self.capacity, busy_s=self.busy_s)


class DoubleRouter:
    def __init__(self, samplers: dict[str, list[DoubleSampler]]) -> None:
        self.samplers = samplers
        self.ended: list[str] = []

    def pick(self, session_id: str) -> DoubleSampler:
        names = sorted(self.samplers)
        return self.samplers[names[hash(session_id) % len(names)]][0]

    def end_session(self, session_id: str) -> None:
        self.ended.append(session_id)

    def stats(self) -> dict:
        return {}


class DoubleTrainer:
    def __init__(self, delay_s: float = 0.01) -> None:
        self.version = 0
        self.delay_s = delay_s
        self.batches: list[Any] = []

    def train_step(self, batch: Any) -> dict[str, float]:
        time.sleep(self.delay_s)
        self.batches.append(batch)
        self.version += 1
        return {"loss": 0.1, "kl_k3": 1e-3, "entropy": 1.0, "grad_norm": 0.5, "masked_frac": 0.0, "tail_ratio": 1.0}

    def sft_step(self, trajectories: Any) -> dict[str, float]:
        return {"loss": 1.0}

    def weights(self) -> dict[str, Any]:
        return {"w": self.version}

    def save_checkpoint(self, path: Path, extra_state: Any = None) -> None:
        path.mkdir(parents=True, exist_ok=True)
        (path / "trainer.json").write_text(json.dumps({"version": self.version}))

    def load_checkpoint(self, path: Path) -> dict[str, Any]:
        self.version = json.loads((path / "trainer.json").read_text())["version"]
        return {}


def make_session_fn(delay_s: float = 0.005, seed: int = 0):
    rng = random.Random(seed)

    async def run_session(env, router, tokenizer, task_id, params, *, session_id: str, max_turns: int = 2) -> Trajectory:
        sampler = router.pick(session_id)
        ids, mask, lps, vers, turns = [1, 2, 3], [0, 0, 0], [0.0] * 3, [-1] * 3, []
        for _ in range(rng.randint(1, max_turns)):
            t0 = time.monotonic()
            await asyncio.sleep(delay_s)
            sampler.busy_s += time.monotonic() - t0
            turns.append(Turn(offset=len(ids), sampled_ids=[5, 6], weight_version=sampler.version, group=sampler.group,
                              replica=sampler.replica, finish_reason="stop", text="x"))
            ids += [5, 6, 9]
            mask += [1, 1, 0]
            lps += [-0.3, -0.3, 0.0]
            vers += [sampler.version] * 2 + [-1]
        reward = float(rng.random() < 0.4)
        return Trajectory(task_id=task_id, prompt_index=0, sample_index=0, token_ids=ids, loss_mask=mask, logprobs=lps,
                          weight_versions=vers, turns=turns, prompt_len=3, status="submitted" if reward else "format_error",
                          reward=reward)

    return run_session


class NullEnv:
    async def __aenter__(self) -> "NullEnv":
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


def double_config(**over: Any):
    data = {
        "name": "doubles", "updates": 4, "tasks": {"train": ["a", "b", "c"]},
        "fleet": {"name": "control-bf16"}, "batch": {"prompts": 2, "samples": 2},
        "checkpoint": {"every": 1}, "eval": {"at_end": False},
    }
    for key, value in over.items():
        section, _, field = key.partition("__")
        if field:
            data.setdefault(section, {})[field] = value
        else:
            data[section] = value
    return parse_config(data, "<test>")


def double_components(fleet_name: str = "control-bf16", trainer_delay_s: float = 0.01) -> Components:
    fleet = load_fleet(fleet_name)
    samplers = {g.name: [DoubleSampler(g.name, f"{g.name}-0")] for g in fleet.groups}
    return Components(tokenizer=None, trainer=DoubleTrainer(trainer_delay_s), fleet=fleet, samplers=samplers,
                      router=DoubleRouter(samplers))


if __name__ == "__main__":
    from patchgym.rl.loop.loop import run_training

    run_dir, updates = Path(sys.argv[1]), int(sys.argv[2])
    cfg = double_config(updates=updates)
    # Slow enough per update that the parent can kill it midway.
    run_training(cfg, run_dir, double_components(trainer_delay_s=0.3), env_url="null", session_fn=make_session_fn(0.01),
                 env_client_factory=NullEnv, progress=False, resume="--resume" in sys.argv)
