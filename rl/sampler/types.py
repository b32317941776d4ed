"""The sampler contract every backend implements: `SamplingParams`, `Generation`, `Sampler`.

Token ids in, token ids out: a sampler never sees or returns text it would have to re-encode.
The embedded PyTorch sampler (`embedded.py`) and the SGLang client implement the same protocol, so
the router, the rollouts and the loop do not know which one they drive.

Log-probabilities are natural logs of the distribution the token was *actually drawn from*: after
temperature, top-k and top-p, renormalised over the kept support. `support_ids` /
`support_logprobs` (when asked for) list that support and log q over it, so the trainer can replay
it (mask replay) and centre the score exactly; `topk_ids` / `topk_logprobs` are the k most likely
tokens of the *full* tempered distribution (before top-k/top-p), for head-plus-tail centring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Protocol, runtime_checkable

FinishReason = Literal["stop", "length", "abort"]


class SamplerError(RuntimeError):
    """A sampler could not serve a request; `retryable` says whether another replica may."""

    retryable = False


class SamplerOverloaded(SamplerError):
    """The replica is full (SGLang: 429/503); another replica may take the request."""

    retryable = True


class VersionBehind(SamplerError):
    """The replica's weights are older than the request's `min_version` (SGLang: 409)."""

    retryable = True

    def __init__(self, have: int, want: int) -> None:
        super().__init__(f"replica holds weight version {have}, the request needs at least {want}")
        self.have, self.want = have, want


class SamplerUnavailable(SamplerError):
    """The replica is down or unhealthy."""

    retryable = True


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. Validated at construction, so a bad value fails where it was written."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1  # -1: the whole vocabulary
    max_new_tokens: int = 256
    stop: tuple[str, ...] = ()  # stop strings, matched on the decoded output; the match is kept
    stop_token_ids: tuple[int, ...] = ()  # besides the model's end-of-sequence ids
    return_support: bool = False  # per token, the support sampled from and log q over it
    top_logprobs: int = 0  # per token, this many of the largest log-probs of the full distribution
    support_max_tokens: int = 4096  # a larger support aborts the request (as SGLang does)
    seed: int | None = None
    # Keep generating past the model's end-of-sequence ids (SGLang's `ignore_eos`); explicit
    # `stop_token_ids` still stop. For benchmarks and fixed-length probes.
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if not (self.temperature > 0):
            raise ValueError(f"temperature must be > 0 (got {self.temperature}); greedy decoding has no log q to report")
        if not (0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1] (got {self.top_p})")
        if self.top_k == 0 or self.top_k < -1:
            raise ValueError(f"top_k must be -1 (all) or >= 1 (got {self.top_k})")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1 (got {self.max_new_tokens})")
        if self.top_logprobs < 0:
            raise ValueError(f"top_logprobs must be >= 0 (got {self.top_logprobs})")
        if self.support_max_tokens < 1:
            raise ValueError(f"support_max_tokens must be >= 1 (got {self.support_max_tokens})")
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))


@dataclass
class Generation:
    """One answer: the sampled ids and, per id, what the sampler knew when it drew it."""

    token_ids: list[int]
    logprobs: list[float]  # log q(y_t) under the distribution y_t was drawn from
    weight_version: int  # the oldest weights that produced a token of this answer
    group: str  # the sampler group (pool) that served it
    finish_reason: FinishReason
    support_ids: list[list[int]] | None = None
    support_logprobs: list[list[float]] | None = None
    topk_ids: list[list[int]] | None = None
    topk_logprobs: list[list[float]] | None = None
    # Per token, the weight version that produced it: weights may be replaced between decoding
    # steps while a request runs (its KV cache is kept). None: every token is `weight_version`.
    token_versions: list[int] | None = None
    replica: str = ""  # which replica of the group served it
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens served from the replica's prefix cache
    busy_s: float = 0.0  # seconds of the replica's time this request held (for cost)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.token_ids)
        for name in ("logprobs", "support_ids", "support_logprobs", "topk_ids", "topk_logprobs", "token_versions"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise ValueError(f"Generation.{name} has {len(value)} entries for {n} tokens")


@dataclass
class SamplerHealth:
    ok: bool
    group: str
    replica: str
    weight_version: int
    active_sessions: int
    capacity: int
    queued: int = 0
    busy_s: float = 0.0  # seconds with at least one request in progress (the union of their spans)
    detail: str = ""
    compute_s: float = 0.0  # seconds of engine steps that held a row of it (embedded engines; 0: not known)


@runtime_checkable
class Sampler(Protocol):
    """A replica of a sampler group. All methods are safe to call from one asyncio loop."""

    group: str
    replica: str

    async def generate(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        *,
        session_id: str | None = None,
        min_version: int | None = None,
    ) -> Generation: ...

    async def update_weights(self, state_dict_or_path: Mapping[str, Any] | str, version: int) -> None: ...

    def health(self) -> SamplerHealth: ...
