"""bench/trainer's `measure` runs end to end (tiny model, few tokens) and returns its numbers."""

from __future__ import annotations

from bench.trainer.run import make_trajectories, measure
from tests.test_trainer_embedded import tiny_model


def test_measure_returns_both_sides_and_their_ratio() -> None:
    r = measure(tiny_model(), sequences=3, min_len=420, max_len=520, micro_batch_tokens=1100, reps=1, threads=1)
    assert r["trained_tokens"] > 0 and r["micro_batches"] == 2 and len(r["lengths"]) == 3
    for side in ("trainer", "plain"):
        assert r[f"{side}_wall_s"] > 0 and r[f"{side}_cpu_s"] > 0 and len(r[f"{side}_walls"]) == 1
    assert r["ratio_wall"] == r["plain_wall_s"] / r["trainer_wall_s"]
    assert r["trainer_metrics"]["kl_k3"] > 0  # the perturbed sampler is not the trainer


def test_bench_trajectories_are_valid_agent_sessions() -> None:
    trajs = make_trajectories(tiny_model(), sequences=2, min_len=600, max_len=700)
    for traj in trajs:
        traj.validate()
        assert 600 <= len(traj) <= 700 and len(traj.turns) >= 1
        assert 0 < traj.num_sampled < len(traj)
        for t, m in enumerate(traj.loss_mask):
            if m:
                assert traj.token_ids[t] in traj.support_ids[t]
