"""Packing by token budget and the tensors of a micro-batch."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from patchgym.rl.trainer import batching
from tests.test_trainer_embedded import make_trajectory, sampled_from, tiny_model


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=1, max_size=40), st.integers(1, 1000))
def test_pack_never_splits_and_respects_the_budget(lengths, budget) -> None:
    plan = batching.pack(lengths, budget)
    assert sorted(i for mb in plan for i in mb) == list(range(len(lengths)))  # each sequence exactly once
    for mb in plan:
        width = max(lengths[i] for i in mb)
        if len(mb) > 1:  # alone, a sequence may be any length, also longer than the budget
            assert len(mb) * width <= budget
        assert lengths[mb[0]] == width  # opened by its longest
    assert plan == batching.pack(lengths, budget)  # deterministic


def test_pack_examples() -> None:
    assert batching.pack([10, 30, 20, 30], 60) == [[1, 3], [2, 0]]
    assert batching.pack([500, 5, 5], 100) == [[0], [1, 2]]  # longer than the budget: alone
    with pytest.raises(ValueError, match="micro_batch_tokens must be >= 1"):
        batching.pack([3], 0)


def test_build_gathers_positions_t_minus_one_of_trained_tokens() -> None:
    rng = random.Random(0)
    trajs = sampled_from(tiny_model(), [
        make_trajectory(rng, 0, prompt=3, turns=[(2, "a", 4), (1, "b", 2)], env=2),
        make_trajectory(rng, 1, prompt=2, turns=[(3, "b", 1)]),
    ])
    sources = batching.check_batch(trajs, 96, versions=True)
    mb = batching.build(trajs, [2.0, -1.0], [0, 1], sources, current_version=5)
    assert mb.input_ids.shape == (2, 8)
    assert mb.input_ids[1, 5:].tolist() == [0, 0, 0]  # right padding
    assert mb.rows.tolist() == [0, 0, 0, 1, 1, 1]
    assert mb.positions.tolist() == [2, 3, 6, 1, 2, 3]
    assert mb.targets.tolist() == [trajs[0].token_ids[t] for t in (3, 4, 7)] + [trajs[1].token_ids[t] for t in (2, 3, 4)]
    assert mb.advantages.tolist() == [2.0] * 3 + [-1.0] * 3
    assert mb.groups == ["a", "a", "b", "b", "b", "b"]
    assert mb.lags == [1, 1, 3, 4, 4, 4]
    assert mb.support.shape == (6, 8) and bool((mb.support == mb.targets.unsqueeze(1)).any(1).all())
    assert torch.allclose(mb.sampler_logprobs, torch.tensor([trajs[0].logprobs[t] for t in (3, 4, 7)] + [trajs[1].logprobs[t] for t in (2, 3, 4)]))
    assert [batching.lag_bucket(x) for x in (0, 1, 2, 3, 4, 5, 6, 100)] == ["0-1", "0-1", "2-3", "2-3", "4-5", "4-5", "6+", "6+"]
