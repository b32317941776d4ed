"""The asynchronous loop with test doubles: outputs, advantages, staleness policies, checkpoint, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchgym.rl.loop.loop import RLLoop, run_training
from patchgym.rl.loop.metrics import metric_keys, read_rows
from patchgym.rl.trajectory import Trajectory

from .loop_doubles import NullEnv, double_components, double_config, make_session_fn

HERE = Path(__file__).resolve().parent


def run(tmp_path: Path, cfg, comps=None, **kw):
    comps = comps or double_components()
    out = run_training(cfg, tmp_path, comps, env_url="null", session_fn=make_session_fn(), env_client_factory=NullEnv,
                       progress=False, **kw)
    return out, comps


def test_loop_writes_every_key_every_update_and_trajectories(tmp_path: Path) -> None:
    out, comps = run(tmp_path, double_config())
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert [r["update"] for r in rows] == [1, 2, 3, 4]
    keys = set(metric_keys([g.name for g in comps.fleet.groups]))
    for row in rows:
        assert keys <= set(row)
        assert row["episodes"] == 4 and row["time/weight_publish_s"] is not None and row["time/trainer_s"] > 0
        assert row["busy/b200-bf16"] is not None and row["cost/turn_usd"] > 0
    for u in range(1, 5):
        trajs = [Trajectory.from_json(l) for l in (tmp_path / "trajectories" / f"update-{u:04d}.jsonl").read_text().splitlines()]
        assert len(trajs) == 4
        for t in trajs:
            t.validate()
    # every replica received every version, in order
    sampler = comps.samplers["b200-bf16"][0]
    assert sampler.updates == [1, 2, 3, 4]
    assert (tmp_path / "checkpoints" / "latest").read_text().strip() == "update-0004"
    assert json.loads((tmp_path / "config.json").read_text())["name"] == "doubles"


def test_advantages_are_group_centred_per_prompt_without_std_for_sc(tmp_path: Path) -> None:
    _, comps = run(tmp_path, double_config(updates=2))
    for batch in comps.trainer.batches:
        trajs, adv = list(batch.trajectories), list(batch.advantages)
        assert len(trajs) == 4
        for p in range(2):
            idx = [i for i, t in enumerate(trajs) if t.prompt_index == p]
            assert len(idx) == 2 and len({trajs[i].task_id for i in idx}) == 1
            rewards = [trajs[i].reward for i in idx]
            mean = sum(rewards) / 2
            assert [adv[i] for i in idx] == pytest.approx([r - mean for r in rewards])  # no std division


def test_grpo_divides_by_the_group_std(tmp_path: Path) -> None:
    _, comps = run(tmp_path, double_config(updates=3, loss={"kind": "grpo"}))
    for batch in comps.trainer.batches:
        for a in batch.advantages:
            assert a == 0 or abs(abs(a) - 0.7071) < 1e-3  # +-(1/2)/std, std of {0,1} = 0.7071


def test_samplers_keep_generating_while_the_trainer_trains(tmp_path: Path) -> None:
    """With a slow trainer, sessions finish during train steps (the async property)."""
    comps = double_components(trainer_delay_s=0.15)
    loop = RLLoop(double_config(updates=3, batch={"prompts": 2, "samples": 2, "sample_ahead": True}), tmp_path, comps,
                  env_url="null", session_fn=make_session_fn(0.005), env_client_factory=NullEnv, progress=False)
    import asyncio

    asyncio.run(loop.run_async())
    # Sessions beyond the 12 trained on ran (the buffer filled during training steps).
    assert loop.sessions_done > 12
    rows = read_rows(tmp_path / "metrics.jsonl")
    # After the first update the batch is waiting in the buffer: the trainer barely idles.
    assert rows[-1]["time/trainer_idle_s"] < rows[-1]["time/trainer_s"]


@pytest.mark.slow
def test_staleness_drop_counts_dropped_groups(tmp_path: Path) -> None:
    cfg = double_config(updates=4, staleness={"cap": 0, "policy": "drop"}, batch={"prompts": 1, "samples": 2, "buffer_factor": 4.0})
    run(tmp_path, cfg, double_components(trainer_delay_s=0.1))
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert rows[-1]["buffer/dropped"] > 0
    assert all(r["staleness/max"] == 0 for r in rows)


def test_staleness_pace_wastes_nothing_and_bounds_staleness(tmp_path: Path) -> None:
    cfg = double_config(updates=4, staleness={"cap": 1, "policy": "pace"}, batch={"prompts": 1, "samples": 2, "buffer_factor": 4.0})
    run(tmp_path, cfg, double_components(trainer_delay_s=0.1))
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert rows[-1]["buffer/dropped"] == 0
    assert max(r["staleness/max"] for r in rows) <= 1 + 0  # paced admission: within the cap
    assert rows[-1]["buffer/paced_s"] > 0


def test_synchronous_baseline_has_no_staleness(tmp_path: Path) -> None:
    run(tmp_path, double_config(updates=3), synchronous=True)
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert [r["staleness/max"] for r in rows] == [0, 0, 0]


def test_resume_in_process_redoes_nothing_twice(tmp_path: Path) -> None:
    cfg = double_config(updates=4, checkpoint={"every": 2})
    run(tmp_path, cfg, stop_after=3)  # killed after update 3; the last checkpoint is update 2
    assert [r["update"] for r in read_rows(tmp_path / "metrics.jsonl")] == [1, 2, 3]
    comps = double_components()
    out, comps = run(tmp_path, cfg, comps, resume=True)
    assert comps.trainer.version == 4 and out["updates"] == 4
    assert [r["update"] for r in read_rows(tmp_path / "metrics.jsonl")] == [1, 2, 3, 4]
    # the samplers were given the checkpoint's weights first
    assert comps.samplers["b200-bf16"][0].updates[0] == 2


def test_resume_without_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no checkpoint to resume from"):
        run(tmp_path, double_config(), resume=True)


@pytest.mark.slow
def test_sigkill_midway_then_resume(tmp_path: Path) -> None:
    """A subprocess run is SIGKILLed after K updates; resuming loses no checkpointed update."""
    run_dir = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(HERE.parent.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "tests.loop_doubles", str(run_dir), "8"], cwd=HERE.parent, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if len(read_rows(run_dir / "metrics.jsonl")) >= 3:
            break
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = read_rows(run_dir / "metrics.jsonl")
    assert 3 <= len(before) < 8
    ckpt = int((run_dir / "checkpoints" / "latest").read_text().strip().split("-")[1])
    out, comps = run(run_dir, double_config(updates=8), resume=True)
    after = read_rows(run_dir / "metrics.jsonl")
    assert [r["update"] for r in after] == list(range(1, 9))
    assert after[:ckpt] == before[:ckpt]  # checkpointed updates kept as they were
    assert sorted(p.name for p in (run_dir / "trajectories").glob("*.jsonl")) == [f"update-{u:04d}.jsonl" for u in range(1, 9)]


def test_a_session_slot_does_not_wait_for_the_rest_of_its_group(tmp_path: Path) -> None:
    """Sample 0 of every group is slow: its group-mates' slot must go on to the next group's
    sessions meanwhile (with one task per group it stayed empty until the slow session ended)."""
    import asyncio

    inner = make_session_fn(0.001)
    spans: list[tuple[str, float, float]] = []

    async def session_fn(env, router, tokenizer, task_id, params, *, session_id: str, sample_index: int = 0, max_turns: int = 2):
        t0 = time.monotonic()
        await asyncio.sleep(0.25 if sample_index == 0 else 0.01)
        traj = await inner(env, router, tokenizer, task_id, params, session_id=session_id, max_turns=1)
        spans.append((session_id, t0, time.monotonic()))
        return traj

    comps = double_components()  # control-bf16: one replica of capacity 2, so 2 session slots
    loop = RLLoop(double_config(updates=2, batch={"prompts": 1, "samples": 2}), tmp_path, comps, env_url="null",
                  session_fn=session_fn, env_client_factory=NullEnv, progress=False)
    asyncio.run(loop.run_async())
    # Mean sessions in flight over the run's sampling window: ~2 when slots refill at once,
    # ~1.04 when a slot waits for its group (0.25 s + 0.01 s of sessions per 0.25 s).
    window = max(e for _, _, e in spans) - min(b for _, b, _ in spans)
    in_flight = sum(e - b for _, b, e in spans) / window
    assert in_flight > 1.5, spans
    # Every trained group still holds exactly its own samples, in order.
    for line in (tmp_path / "trajectories" / "update-0001.jsonl").read_text().splitlines():
        assert json.loads(line)["sample_index"] in (0, 1)
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert [r["episodes"] for r in rows] == [2, 2]


def test_a_finite_run_admits_only_the_groups_it_will_train(tmp_path: Path) -> None:
    import asyncio

    comps = double_components(trainer_delay_s=0.15)  # a slow trainer: sampling runs ahead if allowed
    loop = RLLoop(double_config(updates=3), tmp_path, comps, env_url="null", session_fn=make_session_fn(0.005),
                  env_client_factory=NullEnv, progress=False)
    asyncio.run(loop.run_async())
    assert loop.gate.counters.started == 3 * 2 and loop.sessions_done == 3 * 2 * 2
