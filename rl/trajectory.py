"""One agent session as the trainer sees it: a flat token sequence with, per token, what sampled it.

Shared by the rollouts (which write it), the trainer (which reads it) and the loop (which groups,
saves and measures it). Token in, token out: `token_ids` is the prompt's ids as rendered once,
then, turn by turn, the ids the sampler returned *exactly as sampled* and the ids of the
environment's reply rendered as an appended suffix. Nothing here is ever decoded and re-encoded.

Per-token arrays all have `len(token_ids)` entries:

    token_ids         prompt | turn 0 sampled | env suffix 0 | turn 1 sampled | env suffix 1 | ...
    loss_mask         0 ...  | 1 ........... 1| 0 ........ 0| 1 ........... 1| 0 ...
    logprobs          0.0    | log q(y_t)     | 0.0          | log q(y_t)     | 0.0
    weight_versions   -1     | v0             | -1           | v1             | -1

`support_ids` / `support_logprobs` (mask replay) hold, per token, the support the sampler drew
from and log q over it; a token the environment inserted has the support `[its id]` with log q 0.
`turns[i].offset` is where turn i's sampled ids start in `token_ids`, so anyone can check that
`token_ids[offset:offset + len(sampled_ids)] == sampled_ids`.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

# Session endings besides the environment's own statuses (submitted, format_error, ...).
STATUS_TURN_LIMIT = "turn_limit"
STATUS_CONTEXT_LIMIT = "context_limit"
STATUS_SAMPLER_ERROR = "sampler_error"


@dataclass
class Turn:
    offset: int  # index in Trajectory.token_ids of the first sampled id of this turn
    sampled_ids: list[int]
    weight_version: int
    group: str
    replica: str
    finish_reason: str
    text: str  # the raw text the environment received (decoded from sampled_ids, never re-encoded)
    env_status: str = ""  # the environment's status after this turn
    format_error: bool = False


@dataclass
class Trajectory:
    task_id: str
    prompt_index: int  # which prompt of the update this trajectory answers (its GRPO group)
    sample_index: int
    token_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    weight_versions: list[int]
    turns: list[Turn]
    prompt_len: int  # tokens of the opening prompt
    status: str = ""
    reward: float = 0.0
    episode_id: str = ""
    support_ids: list[list[int]] | None = None
    support_logprobs: list[list[float]] | None = None
    topk_ids: list[list[int]] | None = None
    topk_logprobs: list[list[float]] | None = None
    format_errors: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def num_sampled(self) -> int:
        return sum(self.loss_mask)

    @property
    def min_version(self) -> int:
        """The oldest weight version any turn was sampled with (staleness is measured from it)."""
        versions = [t.weight_version for t in self.turns]
        return min(versions) if versions else -1

    @property
    def groups(self) -> list[str]:
        return sorted({t.group for t in self.turns})

    def validate(self) -> None:
        """Raise ValueError when the arrays disagree or a turn's ids are not where it says."""
        n = len(self.token_ids)
        for name in ("loss_mask", "logprobs", "weight_versions", "support_ids", "support_logprobs", "topk_ids", "topk_logprobs"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise ValueError(f"trajectory {self.task_id}#{self.sample_index}: {name} has {len(value)} entries for {n} tokens")
        for i, turn in enumerate(self.turns):
            got = self.token_ids[turn.offset : turn.offset + len(turn.sampled_ids)]
            if got != turn.sampled_ids:
                raise ValueError(f"trajectory {self.task_id}#{self.sample_index}: turn {i}'s ids are not at offset {turn.offset}")
            if any(m != 1 for m in self.loss_mask[turn.offset : turn.offset + len(turn.sampled_ids)]):
                raise ValueError(f"trajectory {self.task_id}#{self.sample_index}: turn {i} has tokens with loss mask 0")

    def to_json(self) -> str:
        data = asdict(self)
        return json.dumps(data, allow_nan=False, default=_finite)

    @classmethod
    def from_json(cls, line: str | dict[str, Any]) -> "Trajectory":
        data = json.loads(line) if isinstance(line, str) else dict(line)
        data["turns"] = [Turn(**t) for t in data.get("turns", [])]
        return cls(**data)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
