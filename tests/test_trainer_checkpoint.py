"""Trainer checkpoints: bitwise resume, atomic writes, latest_checkpoint, RNG and extra_state."""

from __future__ import annotations

import json
import random

import pytest
import torch

from patchgym.rl.trainer import EmbeddedTrainer, TrainBatch, checkpoint_path, latest_checkpoint
from patchgym.rl.trainer import checkpoint as ckpt
from tests.test_trainer_embedded import batch_of, sampled_from, tiny_model


def _batches(model):
    return [
        TrainBatch(sampled_from(model, batch_of(4, seed=s), noise=0.5, seed=s), [1.0, -1.0, 0.5, -0.5])
        for s in range(3)
    ]


def _state(trainer) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in trainer.weights().items()}


def test_save_train_two_reload_train_the_same_two_is_bitwise_identical(tmp_path) -> None:
    trainer = EmbeddedTrainer(tiny_model(), lr=1e-3, micro_batch_tokens=40)
    batches = _batches(trainer.model)
    trainer.sft_step(batches[0].trajectories)  # the SFT optimizer has state too
    trainer.train_step(batches[0])  # non-trivial AdamW moments
    path = checkpoint_path(tmp_path, trainer.version)
    trainer.save_checkpoint(path, {"update": 2, "rng_note": [1, 2]})
    first = [trainer.train_step(b)["loss"] for b in batches[1:]]
    after_first = _state(trainer)
    rand_first = (torch.rand(3), random.random())

    # A fresh trainer (other initial weights) restored from the checkpoint.
    other = EmbeddedTrainer(tiny_model(seed=1), lr=1e-3, micro_batch_tokens=40)
    extra = other.load_checkpoint(path)
    assert extra == {"update": 2, "rng_note": [1, 2]}
    assert other.version == 2
    second = [other.train_step(b)["loss"] for b in batches[1:]]
    assert other.version == trainer.version == 4
    assert first == second
    after_second = _state(other)
    assert after_first.keys() == after_second.keys()
    for key in after_first:
        assert torch.equal(after_first[key], after_second[key]), key
    # Tied weights are still one tensor after loading.
    assert other.model.lm_head.weight.data_ptr() == other.model.model.embed_tokens.weight.data_ptr()
    # The generators were restored too: the same draws follow the same steps.
    assert torch.equal(torch.rand(3), rand_first[0]) and random.random() == rand_first[1]
    other.load_checkpoint(path)
    a = (torch.rand(3), random.random())
    other.load_checkpoint(path)
    assert torch.equal(torch.rand(3), a[0]) and random.random() == a[1]


def test_a_kill_mid_save_leaves_no_checkpoint_named_complete(tmp_path, monkeypatch) -> None:
    trainer = EmbeddedTrainer(tiny_model())
    trainer.save_checkpoint(checkpoint_path(tmp_path, 0), {"n": 0})
    trainer.version = 5
    real_save = torch.save

    def dying_save(obj, f, *args, **kwargs):
        if str(f).endswith("rng.pt"):
            raise KeyboardInterrupt("killed mid-save")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(ckpt.torch, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        trainer.save_checkpoint(checkpoint_path(tmp_path, 5), {"n": 5})
    monkeypatch.undo()
    assert not checkpoint_path(tmp_path, 5).exists()
    assert latest_checkpoint(tmp_path) == checkpoint_path(tmp_path, 0)
    # A temporary directory left by a real kill (no cleanup ran) is ignored, then swept by the next save.
    leftover = checkpoint_path(tmp_path, 5).parent / f".{checkpoint_path(tmp_path, 5).name}.tmp-999-0"
    leftover.mkdir()
    (leftover / "trainer.json").write_text(json.dumps({"version": 99}))
    assert latest_checkpoint(tmp_path) == checkpoint_path(tmp_path, 0)
    trainer.save_checkpoint(checkpoint_path(tmp_path, 5), {"n": 5})
    assert not leftover.exists()
    assert latest_checkpoint(tmp_path) == checkpoint_path(tmp_path, 5)
    assert EmbeddedTrainer(tiny_model()).load_checkpoint(latest_checkpoint(tmp_path)) == {"n": 5}


def test_latest_checkpoint_and_overwrite(tmp_path) -> None:
    assert latest_checkpoint(tmp_path) is None
    trainer = EmbeddedTrainer(tiny_model())
    for version in (3, 12, 7):
        trainer.version = version
        trainer.save_checkpoint(checkpoint_path(tmp_path, version), {"v": version})
    assert latest_checkpoint(tmp_path) == checkpoint_path(tmp_path, 12)
    trainer.version = 12
    trainer.save_checkpoint(checkpoint_path(tmp_path, 12), {"v": "again"})  # overwrite in place
    assert trainer.load_checkpoint(latest_checkpoint(tmp_path)) == {"v": "again"}
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["v00000003", "v00000007", "v00000012"]


def test_checkpoint_errors(tmp_path) -> None:
    trainer = EmbeddedTrainer(tiny_model())
    with pytest.raises(ValueError, match="extra_state must be JSON-serialisable"):
        trainer.save_checkpoint(tmp_path / "c", {"x": object()})
    assert not (tmp_path / "c").exists()
    with pytest.raises(ValueError, match="not a complete trainer checkpoint"):
        trainer.load_checkpoint(tmp_path / "nothing")
    trainer.save_checkpoint(tmp_path / "c")
    from transformers import LlamaConfig, LlamaForCausalLM

    bigger = LlamaForCausalLM(LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                          num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True))
    with pytest.raises(ValueError, match="does not fit this model"):
        EmbeddedTrainer(bigger).load_checkpoint(tmp_path / "c")
