"""patchgym.rl.corrections: off-policy corrections for samplers that differ from the trainer.

Pure PyTorch (no other patchgym import), CPU and GPU, float32 / bfloat16 / float16 logits with
float32 arithmetic. The math and its known-answer checks: docs/corrections.md.

Public API:
    token_logprobs(logits, tokens, *, temperature=1.0, support=None, chunk_size=None)
    importance_weights(logp_train, logp_sampler, *, mode, low=0.5, high=5.0, cap=2.0,
                       level="token", mask=None, sequence_ids=None) -> (weights, keep)
    sc_head_coefficients(p_head, q_head, *, mode="none", low=0.5, high=5.0, cap=2.0)
                       -> (coefficients, tail_ratio)
    policy_loss(logits, tokens, advantages, sampler_logprobs=None, *, kind, ...) -> (loss, metrics)
    group_advantages(rewards, group_size, *, normalize_std, eps=1e-6)
    mismatch_metrics(logp_train, logp_sampler, *, mask=None, low=0.5, high=5.0, entropy=None,
                     tail_ratio=None) -> dict
    support_kl(logits, tokens, support, sampler_support_logprobs, *, temperature=1.0)
                       -> KL(q_S || p_S) per token over the replayed support

Modules: kernel (the chunked vocabulary kernel), support (supports, token_logprobs), weights,
centering, loss, metrics, advantages.
"""

from .advantages import group_advantages
from .centering import exact_coefficients, sc_head_coefficients
from .kernel import default_chunk_size
from .loss import KINDS, policy_loss
from .metrics import mismatch_metrics
from .support import mask_to_index_lists, pad_index_lists, support_kl, token_logprobs
from .weights import importance_weights

__all__ = [
    "KINDS",
    "default_chunk_size",
    "exact_coefficients",
    "group_advantages",
    "importance_weights",
    "mask_to_index_lists",
    "mismatch_metrics",
    "pad_index_lists",
    "policy_loss",
    "sc_head_coefficients",
    "support_kl",
    "token_logprobs",
]
