"""EmbeddedTrainer with the real SmolLM2-135M-Instruct and its chat template, on few tokens:
replay with identical weights gives ratio 1 exactly, the trainer's log-probs are the model's, and
a step with positive advantage raises the sampled tokens' log-probs (negative lowers them)."""

from __future__ import annotations

import copy

import pytest
import torch

from patchgym.rl.models import load_model, load_tokenizer
from patchgym.rl.trainer import EmbeddedTrainer, TrainBatch
from patchgym.rl.trajectory import Trajectory, Turn
from tests.test_trainer_embedded import sampled_from

TEMPERATURE = 0.7


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # Measured at load average 14 (eight test runs on 2 cores): one accumulate_gradients took 67 s
    # wall with torch's 2 threads and 12.8 s with 1 (spinning OpenMP threads fight over the cores).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def model(one_thread):
    return load_model()


@pytest.fixture(scope="module")
def trajectories() -> list[Trajectory]:
    tok = load_tokenizer()
    out = []
    replies = [
        ("Which file holds the bug?", "Let me look at the repository first.", "src/semver.py"),
        ("Run the tests.", "I will run pytest now.", "2 failed"),
        ("What is 2 + 2?", "It is 4.", "ok"),
    ]
    for i, (question, answer, tool) in enumerate(replies):
        prompt = tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True)
        prompt = list(prompt["input_ids"] if isinstance(prompt, dict) or hasattr(prompt, "keys") else prompt)
        sampled = tok.encode(answer, add_special_tokens=False) + [2]  # ... <|im_end|>
        suffix = tok.encode(f"\n<|im_start|>user\n{tool}<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
        sampled2 = tok.encode("Done.", add_special_tokens=False) + [2]
        ids = prompt + sampled + suffix + sampled2
        mask = [0] * len(prompt) + [1] * len(sampled) + [0] * len(suffix) + [1] * len(sampled2)
        turns = [
            Turn(offset=len(prompt), sampled_ids=sampled, weight_version=0, group="bf16", replica="r0",
                 finish_reason="stop", text=answer),
            Turn(offset=len(prompt) + len(sampled) + len(suffix), sampled_ids=sampled2, weight_version=0,
                 group="fp8", replica="r1", finish_reason="stop", text="Done."),
        ]
        versions = [0 if m else -1 for m in mask]
        out.append(Trajectory(task_id="smol", prompt_index=0, sample_index=i, token_ids=ids, loss_mask=mask,
                              logprobs=[0.0] * len(ids), weight_versions=versions, turns=turns, prompt_len=len(prompt)))
    return out


def _replayed(trainer: EmbeddedTrainer, trajectories: list[Trajectory]) -> list[Trajectory]:
    """Supports from an independent forward of the model, log q from the trainer itself."""
    trajs = sampled_from(trainer.model, trajectories, temperature=TEMPERATURE, support=16)
    for traj, scores in zip(trajs, trainer.score(trajs)):
        traj.logprobs, traj.support_logprobs = scores.logprobs, scores.support_logprobs
    return trajs


@pytest.mark.slow
def test_replay_with_identical_weights_gives_ratio_one_exactly(model, trajectories) -> None:
    trainer = EmbeddedTrainer(copy.deepcopy(model), temperature=TEMPERATURE, micro_batch_tokens=128)
    independent = sampled_from(trainer.model, trajectories, temperature=TEMPERATURE, support=16)
    trajs = _replayed(trainer, trajectories)
    # The trainer's log-probs are the model's (an unpadded full forward of each sequence, apart).
    for a, b in zip(trajs, independent):
        for t, m in enumerate(a.loss_mask):
            if m:
                assert a.logprobs[t] == pytest.approx(b.logprobs[t], abs=2e-4)
                assert a.support_logprobs[t] == pytest.approx(b.support_logprobs[t], abs=2e-4)
    m = trainer.train_step(TrainBatch(trajs, [1.0, -1.0, 0.0]))
    assert m["micro_batches"] > 1
    assert m["kl_k3"] == 0.0 and m["kl_k1"] == 0.0
    assert m["kl_k3/group/bf16"] == 0.0 and m["kl_k3/group/fp8"] == 0.0 and m["kl_k3/lag/0-1"] == 0.0
    assert m["kl_support"] == pytest.approx(0.0, abs=1e-6) and m["kl_support/group/fp8"] == pytest.approx(0.0, abs=1e-6)
    assert m["mis_masked_frac"] == 0.0 and m["ess"] == pytest.approx(1.0, abs=1e-6)
    assert m["tokens"] == sum(t.num_sampled for t in trajs)
    assert 0 < m["entropy"] < torch.log(torch.tensor(16.0)).item()  # over the 16-id support
    # The independent forward's log q is not bitwise the trainer's: k3 is tiny but the check is exact above.
    m2 = EmbeddedTrainer(copy.deepcopy(model), temperature=TEMPERATURE).accumulate_gradients(
        TrainBatch(independent, [1.0, -1.0, 0.0]))
    assert m2["kl_k3"] < 1e-8


@pytest.mark.slow
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_step_with_positive_advantage_raises_the_sampled_log_probs(model, trajectories, sign) -> None:
    trainer = EmbeddedTrainer(copy.deepcopy(model), temperature=TEMPERATURE, lr=1e-5)
    trajs = _replayed(trainer, trajectories)
    before = [s.logprobs for s in trainer.score(trajs)]
    trainer.train_step(TrainBatch(trajs, [sign] * len(trajs)))
    after = [s.logprobs for s in trainer.score(trajs)]
    diffs = [a[t] - b[t] for traj, a, b in zip(trajs, after, before) for t, m in enumerate(traj.loss_mask) if m]
    mean = sum(diffs) / len(diffs)
    assert sign * mean > 1e-4, mean
