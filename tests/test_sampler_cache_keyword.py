"""The embedded sampler hands its KV cache to the model under the name the model's forward takes.

transformers renamed that argument (`past_key_values` up to 5.17, `cache` in 5.25). Under the
wrong name the cache is silently ignored and every decode step sees one token: the GPU machine
(transformers 5.17) sampled the first token right and every later one from wrong logits. Real
SmolLM2 model; the wrong name is forced here to show the sampler refuses rather than draws.
"""

from __future__ import annotations

import pytest

from patchgym.rl.fleet.model import Group
from patchgym.rl.sampler import EmbeddedSampler, SamplingParams
from patchgym.rl.sampler.embedded import cache_keyword
from patchgym.rl.sampler.types import SamplerError


class _OldForward:
    def forward(self, input_ids=None, past_key_values=None, use_cache=None, **kwargs):
        return None


class _NewForward:
    def forward(self, input_ids=None, cache=None, use_cache=None, **kwargs):
        return None


class _NoCache:
    def forward(self, input_ids=None, **kwargs):
        return None


def test_the_keyword_is_read_off_the_forward():
    assert cache_keyword(_OldForward()) == "past_key_values"
    assert cache_keyword(_NewForward()) == "cache"
    with pytest.raises(TypeError, match="takes no KV cache"):
        cache_keyword(_NoCache())


def test_the_installed_model_takes_the_keyword_chosen(model):
    import inspect

    assert cache_keyword(model) in inspect.signature(model.forward).parameters


@pytest.mark.slow  # (since stop 57: 12 s of the default run; CI runs it)
def test_a_cache_the_model_never_writes_stops_the_request(model, tokenizer):
    s = EmbeddedSampler(model, Group(name="h200-bf16", accelerator="H200"), tokenizer=tokenizer)
    try:
        prompt = tokenizer.encode("Name a colour.")
        ok = s.generate_sync(prompt, SamplingParams(max_new_tokens=3, seed=1))
        assert len(ok.token_ids) == 3
        s._cache_kw = "kv_cache_under_another_name"  # what transformers 5.17 made of `cache=`
        with pytest.raises(SamplerError, match=r"wrote 0 of its \d+ layers"):
            s.generate_sync(prompt, SamplingParams(max_new_tokens=3, seed=1))
    finally:
        s.close()
