"""The per-update format probe: its window, its KL arithmetic, its failures, and the real formats.

The last test runs the real parts (SmolLM2-135M, the embedded trainer with BF16 autocast, one
embedded sampler per format class of mixed-6) on one window and checks that every group, teacher-
forced on the same ids, orders as the formats do; the others use named test doubles.
"""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import pytest
import torch

from patchgym.rl.loop.probe_kl import probe_kl, probe_window

# (marker `slow` since stop 43: one of the ten longest files of the default run, which had grown past ten minutes; CI runs it)
pytestmark = pytest.mark.slow


def _traj(ids: list[int], mask: list[int], episode: str = "ep") -> SimpleNamespace:
    """What the probe reads of a Trajectory: ids, loss mask, a name."""
    return SimpleNamespace(task_id="t", sample_index=0, token_ids=ids, loss_mask=mask, episode_id=episode)


def test_window_takes_context_then_the_first_sampled_run() -> None:
    ids = list(range(100, 120))
    mask = [0] * 8 + [1] * 6 + [0] * 3 + [1] * 3
    w = probe_window([_traj([1, 2], [0, 0], "empty"), _traj(ids, mask)], context=3, tokens=4)
    assert w is not None and w.trajectory == "ep"
    assert w.token_ids == ids[5:12]  # 3 context tokens, then 4 sampled ones
    assert [w.token_ids[j] for j in w.scored] == ids[8:12]
    # the window never runs into the environment's tokens after the turn
    w = probe_window([_traj(ids, mask)], context=2, tokens=50)
    assert [w.token_ids[j] for j in w.scored] == ids[8:14]
    assert probe_window([_traj(ids, mask)], context=2, tokens=0) is None
    assert probe_window([_traj([1, 2], [0, 0])], context=2, tokens=4) is None
    with pytest.raises(ValueError, match="context"):
        probe_window([_traj(ids, mask)], context=0, tokens=4)


class _Trainer:
    def __init__(self, logits: torch.Tensor) -> None:
        self.logits = logits
        self.seen: list[list[int]] = []

    def sequence_logits(self, ids):
        self.seen.append(list(ids))
        return self.logits[: len(ids)]


class _Sampler:
    """One group's replica: its `logits` is under that group's emulation (as `GroupReplica`'s)."""

    def __init__(self, logits: torch.Tensor | None = None, fail: bool = False) -> None:
        self._logits, self.fail = logits, fail
        self.seen: list[list[int]] = []

    def logits(self, ids):
        self.seen.append(list(ids))
        if self.fail:
            raise RuntimeError("engine closed")
        return self._logits[: len(ids)]


class _NoLogits:  # an SGLang replica: no teacher-forced logits
    pass


def test_kl_is_the_exact_kl_at_the_sampling_temperature_and_every_group_gets_the_same_ids() -> None:
    g = torch.Generator().manual_seed(0)
    p = torch.randn(6, 11, generator=g)
    near, far = p + 0.01 * torch.randn(6, 11, generator=g), p + 0.5 * torch.randn(6, 11, generator=g)
    ids = list(range(10))
    window = probe_window([_traj(ids[:6], [0, 0, 1, 1, 1, 1])], context=2, tokens=4)
    trainer, s_near, s_far = _Trainer(p), _Sampler(near), _Sampler(far)
    out = probe_kl(trainer, {"near": [s_near], "far": [_NoLogits(), s_far], "sglang": [_NoLogits()]}, window, temperature=0.5)
    assert out.error is None and out.tokens == 4
    rows = torch.tensor([1, 2, 3, 4])  # rows t - 1 predict the sampled tokens at 2..5
    lq = torch.log_softmax(far[rows].double() / 0.5, -1)
    lp = torch.log_softmax(p[rows].double() / 0.5, -1)
    assert math.isclose(out.kl["far"], float((lq.exp() * (lq - lp)).sum(-1).mean()), rel_tol=1e-12)
    assert 0 < out.kl["near"] < out.kl["far"] and out.kl["sglang"] is None
    assert s_near.seen == [window.token_ids] and s_far.seen == [window.token_ids]
    assert trainer.seen == [window.token_ids]
    m = out.metrics()
    assert m["kl_probe"] == pytest.approx((out.kl["near"] + out.kl["far"]) / 2) and m["probe/tokens"] == 4
    assert m["kl_probe/group/sglang"] is None and m["time/probe_s"] >= 0


def test_a_failing_group_is_reported_not_raised_and_leaves_no_partial_values() -> None:
    p = torch.randn(6, 11)
    window = probe_window([_traj(list(range(6)), [0, 0, 1, 1, 1, 1])], context=2, tokens=4)
    out = probe_kl(_Trainer(p), {"a": [_Sampler(p)], "b": [_Sampler(fail=True)]}, window, temperature=1.0)
    assert out.kl == {"a": None, "b": None} and "engine closed" in out.error
    wrong = _Sampler(torch.randn(6, 7))
    out = probe_kl(_Trainer(p), {"a": [wrong]}, window, temperature=1.0)
    assert out.kl == {"a": None} and "shape" in out.error
    assert probe_kl(_Trainer(p), {"a": [_Sampler(p)]}, None, temperature=1.0).kl == {"a": None}


def test_on_the_real_model_every_group_on_the_same_ids_orders_as_the_formats_do(model, tokenizer) -> None:
    from patchgym.rl.fleet.build import embedded_sampler_class, scaled_fleet
    from patchgym.rl.fleet.check import render_prompts
    from patchgym.rl.fleet.load import load_fleet
    from patchgym.rl.trainer.embedded import EmbeddedTrainer

    fleet = load_fleet("mixed-6")
    names = ["b200-nvfp4", "h100-fp8", "h200-bf16"]
    groups = scaled_fleet(fleet.model_copy(update={"groups": [g for g in fleet.groups if g.name in names]}), replicas=1).groups
    trainer = EmbeddedTrainer(copy.deepcopy(model), autocast_bf16=True)
    prompt = render_prompts(tokenizer, 4)[3]  # a fixed coding request, rendered with the chat template
    reply = tokenizer.encode("The function fails on an empty list, so check `if not xs: return 0.0` first.", add_special_tokens=False)
    ids = list(prompt) + reply
    window = probe_window([_traj(ids, [0] * len(prompt) + [1] * len(reply))], context=64, tokens=64)
    cls = embedded_sampler_class()
    samplers = {g.name: [cls(model, g, tokenizer=tokenizer, replica="probe")] for g in groups}
    try:
        out = probe_kl(trainer, samplers, window, temperature=0.5)
    finally:
        for replicas in samplers.values():
            for s in replicas:
                s.close()
    assert out.error is None and out.tokens == len(reply)
    assert out.kl["b200-nvfp4"] > out.kl["h100-fp8"] > out.kl["h200-bf16"] > 0, out.kl
