"""The flat token sequence of one session, built append-only, and the check that it stays so.

`Transcript` owns the conversation (template messages) and, per token, the arrays a `Trajectory`
keeps. The prompt is rendered ONCE with the tokenizer's chat template (`add_generation_prompt=True`)
and tokenized; each sampled turn is appended exactly as sampled; each environment reply is rendered
as a suffix: the whole conversation is rendered as text, the text already held is cut off its front,
and only the rest is tokenized and appended (loss mask 0, log q 0, version -1, support `[id]`).

The append-only check: the text of the ids held so far must be a prefix of what the template
renders for the whole conversation; a template that rewrites earlier turns (one that drops
reasoning blocks on re-render, or clears tool-call fields) fails it with `TemplateNotAppendOnly`
rather than silently training on ids the model would never see. The text of the held ids is the
template text of the prompt and replies, and for each sampled turn `decode(ids,
skip_special_tokens=True)` (what the environment received) plus the end-of-turn token when the turn
ended with the one the template writes. So a turn that stopped without it (length, a stop string, or
another special token) is closed by the suffix: the template's `<|im_end|>` and the newline after it
are environment tokens.

Checked here: SmolLM2-135M-Instruct (ChatML, append-only). Not covered: templates that are not
append-only (e.g. Qwen3's, which drops earlier `<think>` blocks): they raise at the first reply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from patchgym.rl.rollout.toolformat import ToolFormat
from patchgym.rl.sampler.types import Generation
from patchgym.rl.trajectory import Trajectory, Turn


class TemplateNotAppendOnly(RuntimeError):
    """The chat template re-rendered earlier text differently: ids held are not a prefix of it."""


def _first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


@dataclass
class Transcript:
    tokenizer: Any
    fmt: ToolFormat
    keep_support: bool = False
    keep_topk: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)  # the conversation, template form
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    weight_versions: list[int] = field(default_factory=list)
    support_ids: list[list[int]] = field(default_factory=list)
    support_logprobs: list[list[float]] = field(default_factory=list)
    topk_ids: list[list[int]] = field(default_factory=list)
    topk_logprobs: list[list[float]] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    text: str = ""  # the text of token_ids, as the append-only check reads it
    prompt_len: int = 0
    _closing: str | None = field(default=None, init=False, repr=False)

    def __len__(self) -> int:
        return len(self.token_ids)

    # --- rendering ------------------------------------------------------------------------------
    def render(self, messages: Sequence[Mapping[str, Any]], *, generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=generation_prompt
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    # --- building -------------------------------------------------------------------------------
    def start(self, env_messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> list[int]:
        """Render the opening once; returns the prompt ids."""
        if self.token_ids:
            raise RuntimeError("the transcript has started already")
        self.messages = self.fmt.opening(env_messages, tools)
        self.text = self.render(self.messages, generation_prompt=True)
        ids = self.encode(self.text)
        self._add_env(ids)
        self.prompt_len = len(ids)
        return ids

    def reply_ids(self, env_messages: Sequence[Mapping[str, Any]]) -> tuple[list[int], str, list[dict[str, Any]]]:
        """The ids of an environment reply rendered as a suffix (not yet appended), its full
        text, and its template messages; raises TemplateNotAppendOnly when the held text is not a
        prefix of the rendering."""
        new = self.fmt.reply(env_messages)
        full = self.render([*self.messages, *new], generation_prompt=True)
        if not full.startswith(self.text):
            at = _first_difference(full, self.text)
            raise TemplateNotAppendOnly(
                f"the chat template is not append-only: after {len(self.turns)} turn(s) its rendering differs "
                f"from the text held at character {at}: held {self.text[at:at + 60]!r}, rendered {full[at:at + 60]!r}"
            )
        return self.encode(full[len(self.text):]), full, new

    def add_reply(self, ids: list[int], full: str, new_messages: list[dict[str, Any]]) -> None:
        self._add_env(ids)
        self.messages.extend(new_messages)
        self.text = full

    def add_turn(self, gen: Generation, text: str, *, env_status: str = "", format_error: bool = False) -> Turn:
        """Append a sampled turn exactly as sampled."""
        if self.keep_support and (gen.support_ids is None or gen.support_logprobs is None):
            raise ValueError(f"group {gen.group!r} returned no support although return_support was asked")
        if self.keep_topk and (gen.topk_ids is None or gen.topk_logprobs is None):
            raise ValueError(f"group {gen.group!r} returned no top-k log-probs although top_logprobs was asked")
        n = len(gen.token_ids)
        offset = len(self.token_ids)
        self.token_ids.extend(int(t) for t in gen.token_ids)
        self.loss_mask.extend([1] * n)
        self.logprobs.extend(float(x) for x in gen.logprobs)
        versions = gen.token_versions if gen.token_versions is not None else [gen.weight_version] * n
        self.weight_versions.extend(int(v) for v in versions)
        if self.keep_support:
            assert gen.support_ids is not None and gen.support_logprobs is not None
            self.support_ids.extend([int(i) for i in ids] for ids in gen.support_ids)
            self.support_logprobs.extend([float(x) for x in lps] for lps in gen.support_logprobs)
        if self.keep_topk:
            assert gen.topk_ids is not None and gen.topk_logprobs is not None
            self.topk_ids.extend([int(i) for i in ids] for ids in gen.topk_ids)
            self.topk_logprobs.extend([float(x) for x in lps] for lps in gen.topk_logprobs)
        turn = Turn(
            offset=offset,
            sampled_ids=[int(t) for t in gen.token_ids],
            weight_version=int(gen.weight_version),
            group=gen.group,
            replica=gen.replica,
            finish_reason=gen.finish_reason,
            text=text,
            env_status=env_status,
            format_error=format_error,
        )
        self.turns.append(turn)
        self.messages.append(self.fmt.assistant(text))
        self.text += self._turn_check_text(turn.sampled_ids, text)
        return turn

    def _turn_check_text(self, ids: list[int], text: str) -> str:
        """The sampled turn's text for the append-only check: what the environment got, plus the
        end-of-turn token if the turn ended with the one the template writes after a message."""
        if not ids:
            return text
        last = ids[-1]
        if self.tokenizer.decode([last], skip_special_tokens=True) != "":
            return text  # an ordinary token: the turn was cut short; the suffix closes it
        marker = self.tokenizer.decode([last], skip_special_tokens=False)
        closing = self._closing_after_content()
        return text + marker if marker and closing.startswith(marker) else text

    def _closing_after_content(self) -> str:
        """What the template writes right after an assistant message's content (`<|im_end|>\\n`)."""
        if self._closing is None:
            sentinel = "\x00patchgym-sentinel\x00"
            rendered = self.render(
                [{"role": "user", "content": "u"}, self.fmt.assistant(sentinel)], generation_prompt=False
            )
            at = rendered.rfind(sentinel)
            self._closing = rendered[at + len(sentinel):] if at >= 0 else ""
        return self._closing

    def _add_env(self, ids: list[int]) -> None:
        n = len(ids)
        self.token_ids.extend(ids)
        self.loss_mask.extend([0] * n)
        self.logprobs.extend([0.0] * n)
        self.weight_versions.extend([-1] * n)
        if self.keep_support:
            self.support_ids.extend([i] for i in ids)
            self.support_logprobs.extend([0.0] for _ in ids)
        if self.keep_topk:
            self.topk_ids.extend([i] for i in ids)
            self.topk_logprobs.extend([0.0] for _ in ids)

    # --- the result -----------------------------------------------------------------------------
    def trajectory(self, task_id: str, **fields: Any) -> Trajectory:
        traj = Trajectory(
            task_id=task_id,
            prompt_index=fields.pop("prompt_index", 0),
            sample_index=fields.pop("sample_index", 0),
            token_ids=list(self.token_ids),
            loss_mask=list(self.loss_mask),
            logprobs=list(self.logprobs),
            weight_versions=list(self.weight_versions),
            turns=list(self.turns),
            prompt_len=self.prompt_len,
            support_ids=[list(s) for s in self.support_ids] if self.keep_support else None,
            support_logprobs=[list(s) for s in self.support_logprobs] if self.keep_support else None,
            topk_ids=[list(s) for s in self.topk_ids] if self.keep_topk else None,
            topk_logprobs=[list(s) for s in self.topk_logprobs] if self.keep_topk else None,
            format_errors=sum(t.format_error for t in self.turns),
            **fields,
        )
        traj.validate()
        return traj
