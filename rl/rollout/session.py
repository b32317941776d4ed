"""One agent session: one environment episode driven by one sampler route, token in, token out.

`run_session(env, router, tokenizer, task_id, params, ...)` starts an episode through the
environment's client (the only part of `patchgym.env` the RL code may use), renders its opening
once with the model's chat template (tools written into the system message by a `ToolFormat`),
then, turn by turn: asks the router for a generation over the ids held so far, keeps every id
exactly as sampled, sends `decode(ids, skip_special_tokens=True)` to the environment as the
assistant's raw text (its parser decides what is a call; its format errors count), and appends the
environment's reply as a rendered suffix with loss mask 0 (`transcript.py`).

A session ends with the episode (its status and reward), or with a status of its own:
`turn_limit` (`limits.max_turns` turns without an end), `context_limit` (the next reply or turn would
not fit in `limits.max_context_tokens`; the last turn's `max_new_tokens` is cut to what is left
first), `sampler_error` (the router raised a `SamplerError`, or the answer broke the sampler contract
or was aborted). In each of those the episode is deleted, as it is when anything else goes wrong
(an exception or a cancellation): no live episode is left behind.

The trajectory's `extra` holds the session id, the tool format, per turn what the replica reported
(`served`: busy seconds, prompt and cached tokens) and `clock`: the session's wall seconds and how
many of them went to the environment (`env_s`: start, steps, delete) and to generation
(`generate_s`, queueing in the engine included).

The router is anything with `async generate(session_id, prompt_ids, params, *, min_version=None)
-> Generation` (the fleet's router); `SamplerRouter` makes one `Sampler` into one.

Not covered here: grouping, batching and saving sessions (the loop), retries across replicas
(the router).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

from patchgym.env.client import AsyncEnvClient, EnvError, StepResult
from patchgym.rl.rollout.toolformat import ToolFormat, get_format
from patchgym.rl.rollout.transcript import Transcript
from patchgym.rl.sampler.types import Generation, Sampler, SamplerError, SamplingParams
from patchgym.rl.trajectory import STATUS_CONTEXT_LIMIT, STATUS_SAMPLER_ERROR, STATUS_TURN_LIMIT, Trajectory


class Router(Protocol):
    async def generate(
        self, session_id: str, prompt_ids: list[int], params: SamplingParams, *, min_version: int | None = None
    ) -> Generation: ...


class SamplerRouter:
    """One sampler replica as a router (tests, evaluation, a one-replica fleet)."""

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler

    async def generate(
        self, session_id: str, prompt_ids: list[int], params: SamplingParams, *, min_version: int | None = None
    ) -> Generation:
        return await self.sampler.generate(prompt_ids, params, session_id=session_id, min_version=min_version)


@dataclass(frozen=True)
class SessionLimits:
    """How long a session may run, in turns and tokens.

    `max_tokens_per_turn`: each turn's `max_new_tokens` (None: the sampling params' own).
    `env`: per-episode limit overrides sent when the episode starts, checked by the server against
    its ceilings. None sends `{"max_turns": max_turns}`, so that the system prompt's "at most N
    turns" is the session's N; `{}` keeps the server's defaults."""

    max_turns: int = 16
    max_context_tokens: int = 8192
    max_tokens_per_turn: int | None = None
    env: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"SessionLimits.max_turns must be >= 1 (got {self.max_turns})")
        if self.max_context_tokens < 1:
            raise ValueError(f"SessionLimits.max_context_tokens must be >= 1 (got {self.max_context_tokens})")
        if self.max_tokens_per_turn is not None and self.max_tokens_per_turn < 1:
            raise ValueError(f"SessionLimits.max_tokens_per_turn must be >= 1 or None (got {self.max_tokens_per_turn})")


OnStep = Callable[[StepResult], Any]


async def run_session(
    env: AsyncEnvClient,
    router: Router,
    tokenizer: Any,
    task_id: str,
    params: SamplingParams,
    *,
    session_id: str | None = None,
    limits: SessionLimits | None = None,
    formatter: ToolFormat | str | None = None,
    replay: bool | None = None,
    prompt_index: int = 0,
    sample_index: int = 0,
    min_version: int | None = None,
    on_step: OnStep | None = None,
) -> Trajectory:
    """Run one episode of `task_id` to its end; the trajectory holds every id as sampled.

    `replay` keeps, per token, the support sampled from and log q over it (mask replay); None
    means `params.return_support`. `on_step` sees each StepResult (the expert plans from it).
    EnvError from starting the episode propagates (nothing was started); TemplateNotAppendOnly
    propagates after the episode is deleted."""
    limits = limits or SessionLimits()
    fmt = get_format(formatter)
    replay = params.return_support if replay is None else replay
    session_id = session_id or f"session-{uuid.uuid4().hex[:16]}"
    cap = limits.max_tokens_per_turn or params.max_new_tokens
    transcript = Transcript(tokenizer, fmt, keep_support=replay, keep_topk=params.top_logprobs > 0)

    env_limits = dict(limits.env) if limits.env is not None else {"max_turns": limits.max_turns}
    t_start = time.monotonic()
    clock = {"env_s": 0.0, "generate_s": 0.0}  # where the session's wall time went
    started = await env.start_episode(task_id, limits=env_limits or None, parser=fmt.parser)
    clock["env_s"] += time.monotonic() - t_start
    episode_id = started.episode_id
    episode_over = False
    status, reward, error = "", 0.0, None
    served: list[dict[str, Any]] = []  # per turn, what the replica reported of its work (cost, cache)
    try:
        transcript.start(started.messages, started.tools)
        for _ in range(limits.max_turns):
            left = limits.max_context_tokens - len(transcript)
            if left <= 0:
                status = STATUS_CONTEXT_LIMIT
                break
            turn_params = dataclasses.replace(params, max_new_tokens=min(cap, left), return_support=replay)
            t0 = time.monotonic()
            try:
                gen = await router.generate(session_id, list(transcript.token_ids), turn_params, min_version=min_version)
                _check_generation(gen, turn_params)
            except SamplerError as exc:
                status, error = STATUS_SAMPLER_ERROR, f"{type(exc).__name__}: {exc}"
                break
            finally:
                clock["generate_s"] += time.monotonic() - t0
            text = tokenizer.decode(gen.token_ids, skip_special_tokens=True)
            try:
                turn = transcript.add_turn(gen, text)
            except ValueError as exc:  # support or top-k missing: the sampler broke its contract
                status, error = STATUS_SAMPLER_ERROR, str(exc)
                break
            served.append({"busy_s": gen.busy_s, "prompt_tokens": gen.prompt_tokens, "cached_tokens": gen.cached_tokens})
            t0 = time.monotonic()
            result = await env.step(episode_id, text=text)
            clock["env_s"] += time.monotonic() - t0
            turn.env_status = result.status
            turn.format_error = result.format_errors_in_a_row > 0
            if on_step is not None:
                maybe = on_step(result)
                if asyncio.iscoroutine(maybe):
                    await maybe
            if result.done:
                episode_over = True
                status, reward, error = result.status, float(result.reward or 0.0), result.error
                break
            ids, full, new = transcript.reply_ids(result.messages)
            if len(transcript) + len(ids) >= limits.max_context_tokens:
                status = STATUS_CONTEXT_LIMIT  # the reply, and a turn after it, would not fit
                break
            transcript.add_reply(ids, full, new)
        else:
            status = STATUS_TURN_LIMIT
    finally:
        if not episode_over:
            t0 = time.monotonic()
            await _delete_quietly(env, episode_id)
            clock["env_s"] += time.monotonic() - t0
    clock["wall_s"] = time.monotonic() - t_start
    extra: dict[str, Any] = {"session_id": session_id, "tool_format": fmt.name, "served": served,
                             "clock": {k: round(v, 4) for k, v in clock.items()}}
    if error:
        extra["error"] = error
    return transcript.trajectory(
        task_id,
        prompt_index=prompt_index,
        sample_index=sample_index,
        status=status,
        reward=reward,
        episode_id=episode_id,
        extra=extra,
    )


class GenerationContractError(SamplerError):
    """A generation that breaks the sampler contract (too long, aborted, arrays that disagree)."""


def _check_generation(gen: Generation, params: SamplingParams) -> None:
    if gen.finish_reason == "abort":
        raise GenerationContractError(f"group {gen.group!r} aborted the request after {len(gen.token_ids)} token(s)")
    if not gen.token_ids:
        raise GenerationContractError(f"group {gen.group!r} returned no tokens (finish reason {gen.finish_reason!r})")
    if len(gen.token_ids) > params.max_new_tokens:
        raise GenerationContractError(
            f"group {gen.group!r} returned {len(gen.token_ids)} tokens for max_new_tokens={params.max_new_tokens}"
        )


async def _delete_quietly(env: AsyncEnvClient, episode_id: str) -> None:
    """Delete an episode the session ended (it may have ended on the server already)."""
    try:
        await asyncio.shield(env.delete_episode(episode_id))
    except EnvError as exc:
        if exc.status_code != 404:
            raise


async def run_sessions(
    env: AsyncEnvClient,
    router: Router,
    tokenizer: Any,
    task_ids: list[str],
    params: SamplingParams,
    *,
    concurrency: int = 4,
    **kwargs: Any,
) -> list[Trajectory]:
    """Run one session per task id (repeats allowed), at most `concurrency` at a time; the
    results in the order of `task_ids`, `sample_index` numbering each task's repeats."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1 (got {concurrency})")
    gate = asyncio.Semaphore(concurrency)
    seen: dict[str, int] = {}
    indices = []
    for task_id in task_ids:
        indices.append(seen.get(task_id, 0))
        seen[task_id] = indices[-1] + 1

    async def one(task_id: str, sample_index: int) -> Trajectory:
        async with gate:
            return await run_session(env, router, tokenizer, task_id, params, sample_index=sample_index, **kwargs)

    return list(await asyncio.gather(*(one(t, i) for t, i in zip(task_ids, indices))))

