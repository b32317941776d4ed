"""Agent sessions, token in token out, against the real environment (in process, real bubblewrap
sandboxes, the bundled tasks), the real SmolLM2 tokenizer and chat template, and a scripted test
double in place of a sampler: every id kept as returned, the environment's replies appended as
masked suffixes, each ending of a session, no live episode left behind, trajectories saved and checked.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from patchgym.env.client import AsyncEnvClient
from patchgym.env.testing import sandbox_unavailable_reason
from patchgym.env.tools import tool_schemas
from patchgym.rl.rollout import (
    SamplerRouter,
    SessionLimits,
    TemplateNotAppendOnly,
    TrajectoryCheckError,
    check_trajectory,
    episode_problems,
    get_format,
    load_trajectories,
    run_session,
    run_sessions,
    save_trajectories,
    trajectory_problems,
)
from patchgym.rl.sampler.types import Generation, SamplerUnavailable, SamplingParams
from patchgym.rl.trajectory import STATUS_CONTEXT_LIMIT, STATUS_SAMPLER_ERROR, STATUS_TURN_LIMIT

skip_reason = sandbox_unavailable_reason("local")
pytestmark = pytest.mark.skipif(skip_reason is not None, reason=skip_reason or "")
TASK = "semverlite-bump-major-keeps-minor"
EOS = 2
LOG_HEAD, LOG_TAIL = math.log(0.75), math.log(0.25)


class ScriptedSampler:
    """TEST DOUBLE, not a model: answers each request with the next fixed id list of its script
    (cut to max_new_tokens), or raises the next exception; records every request. Support: each
    id and one other, q = 0.75 / 0.25; the second half of each answer is "sampled" at version+1."""

    group = "test-double"
    replica = "r0"

    def __init__(self, script: list[Any], *, version: int = 7, finish: str | None = None) -> None:
        self.script = list(script)
        self.version = version
        self.finish = finish
        self.requests: list[tuple[list[int], SamplingParams, str | None]] = []

    async def generate(self, prompt_ids, params, *, session_id=None, min_version=None) -> Generation:
        self.requests.append((list(prompt_ids), params, session_id))
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        ids = list(item)[: params.max_new_tokens]
        finish = self.finish or ("stop" if len(ids) == len(item) and ids[-1] == EOS else "length")
        half = len(ids) // 2
        return Generation(
            token_ids=ids,
            logprobs=[LOG_HEAD] * len(ids),
            weight_version=self.version,
            group=self.group,
            replica=self.replica,
            finish_reason=finish,
            token_versions=[self.version] * half + [self.version + 1] * (len(ids) - half),
            support_ids=[[i, i + 1] for i in ids] if params.return_support else None,
            support_logprobs=[[LOG_HEAD, LOG_TAIL] for _ in ids] if params.return_support else None,
            topk_ids=[[i, i + 1][: params.top_logprobs] for i in ids] if params.top_logprobs else None,
            topk_logprobs=[[LOG_HEAD, LOG_TAIL][: params.top_logprobs] for _ in ids] if params.top_logprobs else None,
        )

    def health(self) -> Any:  # the Sampler protocol's other methods, unused here
        raise NotImplementedError

    async def update_weights(self, state_dict_or_path, version) -> None:
        raise NotImplementedError


@pytest.fixture(scope="module")
def gold_edit() -> dict[str, Any]:
    from patchgym.tasks.loaders import load_tasks

    task = next(t for t in load_tasks("bundled") if t.instance_id == TASK)
    removed = [l[1:] for l in task.patch.splitlines() if l.startswith("-") and not l.startswith("---")]
    added = [l[1:] for l in task.patch.splitlines() if l.startswith("+") and not l.startswith("+++")]
    assert len(removed) == len(added) == 1, task.patch
    return {"command": "str_replace", "path": "/testbed/semverlite/bump.py", "old_str": removed[0], "new_str": added[0]}


def ids_of(tokenizer, calls: list[dict] | str, *, eos: bool = True) -> list[int]:
    text = calls if isinstance(calls, str) else get_format().format_calls(calls)
    return tokenizer.encode(text, add_special_tokens=False) + ([EOS] if eos else [])


def run(coro_fn):
    async def main():
        async with AsyncEnvClient.in_process(tasks="bundled") as env:
            return await coro_fn(env)

    return asyncio.run(main())


BASH_LS = {"name": "bash", "arguments": {"command": "ls semverlite"}}
SUBMIT = {"name": "submit", "arguments": {}}


def test_multi_turn_episode_keeps_every_id_and_masks_the_environment(tokenizer, gold_edit) -> None:
    script = [
        ids_of(tokenizer, [BASH_LS]),
        ids_of(tokenizer, "Let me think about the", eos=False),  # cut short: no end-of-turn id
        ids_of(tokenizer, [{"name": "str_replace_editor", "arguments": gold_edit}]),
        ids_of(tokenizer, [SUBMIT]),
    ]
    sampler = ScriptedSampler(script)

    async def body(env):
        traj = await run_session(env, SamplerRouter(sampler), tokenizer, TASK,
                                 SamplingParams(temperature=0.5, max_new_tokens=128, return_support=True),
                                 session_id="s-1", prompt_index=3, sample_index=5)
        state = await env.get_episode(traj.episode_id)
        return traj, state, (await env.health()).live_episodes

    traj, state, live = run(body)
    assert (traj.status, traj.reward, traj.prompt_index, traj.sample_index) == ("submitted", 1.0, 3, 5)
    assert live == 0 and state.done
    # the episode was opened with the session's turn limit, so the prompt states the real one
    assert state.limits.max_turns == SessionLimits().max_turns and f"at most {state.limits.max_turns} turns" in state.transcript[0]["content"]
    check_trajectory(traj, tokenizer)
    assert [t.format_error for t in traj.turns] == [False, True, False, False] and traj.format_errors == 1
    assert [t.finish_reason for t in traj.turns] == ["stop", "length", "stop", "stop"]
    assert {t.group for t in traj.turns} == {"test-double"} and traj.extra["session_id"] == "s-1"

    # every id exactly as the double returned it, at its offset; each request's prompt extends the last
    for turn, expected, (prompt, params, session) in zip(traj.turns, script, sampler.requests):
        assert turn.sampled_ids == expected and traj.token_ids[turn.offset:turn.offset + len(expected)] == expected
        assert traj.token_ids[: turn.offset] == prompt and session == "s-1" and params.return_support
        assert traj.weight_versions[turn.offset:turn.offset + len(expected)] == [7] * (len(expected) // 2) + [8] * (len(expected) - len(expected) // 2)
        assert traj.logprobs[turn.offset] == LOG_HEAD and traj.support_ids[turn.offset] == [expected[0], expected[0] + 1]
    # the turn cut short is closed by the environment's suffix: <|im_end|>, then the newline
    cut = traj.turns[1]
    after = cut.offset + len(cut.sampled_ids)
    assert traj.token_ids[after] == EOS and traj.loss_mask[after] == 0
    assert tokenizer.decode(traj.token_ids[after:after + 4]).startswith("<|im_end|>\n<|im_start|>user")

    # what the environment received is each turn's text
    assistant = [m["content"] for m in state.transcript if m["role"] == "assistant"]
    assert assistant == [t.text for t in traj.turns] and episode_problems(traj, state) == []
    other = dataclasses.replace(traj, turns=traj.turns[:1] + [dataclasses.replace(traj.turns[1], text="x")] + traj.turns[2:])
    assert "they differ from turn 1" in episode_problems(other, state)[0]
    assert "reward" in " ".join(episode_problems(dataclasses.replace(traj, reward=0.0), state))
    assert len(traj.extra["served"]) == 4 and set(traj.extra["served"][0]) == {"busy_s", "prompt_tokens", "cached_tokens"}
    # and the ids are the template's rendering of the whole conversation (append-only, nothing re-tokenised)
    fmt = get_format()
    conversation = fmt.opening(state.transcript[:2], tool_schemas(state.limits.command_timeout_s)) + fmt.reply(
        state.transcript[2:])
    rendered = tokenizer.apply_chat_template(conversation[: _last_assistant(conversation) + 1], tokenize=False)
    assert rendered == tokenizer.decode(traj.token_ids) + "\n"


def _last_assistant(messages: list[dict]) -> int:
    return max(i for i, m in enumerate(messages) if m["role"] == "assistant")


def test_three_malformed_turns_end_with_format_error(tokenizer) -> None:
    sampler = ScriptedSampler([ids_of(tokenizer, "I will fix it."), ids_of(tokenizer, '{"name": 3}'),
                               ids_of(tokenizer, "<tool_call>{bad</tool_call>")])

    async def body(env):
        traj = await run_session(env, SamplerRouter(sampler), tokenizer, TASK, SamplingParams(temperature=0.5, top_logprobs=2))
        return traj, (await env.health()).live_episodes

    traj, live = run(body)
    assert (traj.status, traj.reward, traj.format_errors, live) == ("format_error", 0.0, 3, 0)
    assert traj.support_ids is None  # no replay asked
    # top-k asked: the sampler's per sampled token, `[id]` with log 0 for the environment's
    first = traj.turns[0]
    assert traj.topk_ids[first.offset] == [first.sampled_ids[0], first.sampled_ids[0] + 1]
    assert traj.topk_logprobs[first.offset] == [LOG_HEAD, LOG_TAIL]
    assert traj.topk_ids[0] == [traj.token_ids[0]] and traj.topk_logprobs[0] == [0.0]
    check_trajectory(traj, tokenizer)


def test_a_cancelled_session_deletes_its_episode(tokenizer) -> None:
    class Hang(ScriptedSampler):
        async def generate(self, prompt_ids, params, **kw):
            self.requests.append((list(prompt_ids), params, None))
            await asyncio.sleep(3600)

    hang = Hang([])

    async def body(env):
        task = asyncio.create_task(run_session(env, SamplerRouter(hang), tokenizer, TASK, SamplingParams()))
        while not hang.requests:
            await asyncio.sleep(0.05)
        live_while_running = (await env.health()).live_episodes
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return live_while_running, (await env.health()).live_episodes

    assert run(body) == (1, 0)


def test_turn_limit_and_context_limit_end_the_session_and_delete_the_episode(tokenizer) -> None:
    quiet = {"name": "bash", "arguments": {"command": "true"}}

    async def body(env):
        first = ScriptedSampler([ids_of(tokenizer, [quiet])] * 2)
        by_turns = await run_session(env, SamplerRouter(first), tokenizer, TASK, SamplingParams(max_new_tokens=64),
                                     limits=SessionLimits(max_turns=2))
        live_after_turns = (await env.health()).live_episodes
        # a budget that leaves 7 tokens for the second turn: its max_new_tokens is cut to 7, and the
        # reply after it does not fit
        second_turn = by_turns.turns[1].offset
        budget = second_turn + 7
        second = ScriptedSampler([ids_of(tokenizer, [quiet])] * 2)
        by_context = await run_session(env, SamplerRouter(second), tokenizer, TASK, SamplingParams(max_new_tokens=64),
                                       limits=SessionLimits(max_turns=5, max_context_tokens=budget))
        # a prompt longer than the whole budget: no turn at all
        none = await run_session(env, SamplerRouter(ScriptedSampler([])), tokenizer, TASK, SamplingParams(),
                                 limits=SessionLimits(max_context_tokens=100))
        return by_turns, live_after_turns, by_context, second, none, (await env.health()).live_episodes

    by_turns, live_after_turns, by_context, second, none, live = run(body)
    assert (by_turns.status, by_turns.reward, len(by_turns.turns), live_after_turns) == (STATUS_TURN_LIMIT, 0.0, 2, 0)
    assert [r[1].max_new_tokens for r in second.requests] == [64, 7]
    assert by_context.status == STATUS_CONTEXT_LIMIT and len(by_context) == by_context.turns[1].offset + 7
    assert by_context.turns[1].finish_reason == "length"
    assert none.status == STATUS_CONTEXT_LIMIT and none.turns == [] and len(none) == none.prompt_len > 100
    assert live == 0
    for traj in (by_turns, by_context, none):
        check_trajectory(traj, tokenizer)


def test_sampler_errors_end_the_session_and_delete_the_episode(tokenizer) -> None:
    async def body(env):
        down = ScriptedSampler([ids_of(tokenizer, [BASH_LS]), SamplerUnavailable("replica r0 is down")])
        a = await run_session(env, SamplerRouter(down), tokenizer, TASK, SamplingParams())
        aborted = ScriptedSampler([ids_of(tokenizer, [BASH_LS])], finish="abort")
        b = await run_session(env, SamplerRouter(aborted), tokenizer, TASK, SamplingParams())
        # replay asked, no support returned: the sampler broke its contract
        class NoSupport(ScriptedSampler):
            async def generate(self, prompt_ids, params, **kw):
                return await super().generate(prompt_ids, dataclasses.replace(params, return_support=False), **kw)
        c = await run_session(env, SamplerRouter(NoSupport([ids_of(tokenizer, [BASH_LS])])), tokenizer, TASK,
                              SamplingParams(), replay=True)
        return a, b, c, (await env.health()).live_episodes

    a, b, c, live = run(body)
    assert (a.status, len(a.turns), a.reward) == (STATUS_SAMPLER_ERROR, 1, 0.0)
    assert "replica r0 is down" in a.extra["error"]
    assert b.status == STATUS_SAMPLER_ERROR and "aborted" in b.extra["error"] and b.turns == []
    assert c.status == STATUS_SAMPLER_ERROR and "no support" in c.extra["error"]
    assert live == 0


class RewritingTemplate:
    """The real tokenizer with a chat template that is NOT append-only: earlier assistant turns are
    re-rendered as '(earlier turn)' (as templates that drop reasoning blocks do)."""

    TEMPLATE = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
        "{% if m['role'] == 'assistant' and not loop.last %}(earlier turn){% else %}{{ m['content'] }}{% endif %}"
        "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )

    def __init__(self, tokenizer) -> None:
        self._tok = tokenizer

    def apply_chat_template(self, messages, **kwargs):
        return self._tok.apply_chat_template(messages, chat_template=self.TEMPLATE, **kwargs)

    def __getattr__(self, name):
        return getattr(self._tok, name)


def test_a_template_that_is_not_append_only_is_refused(tokenizer) -> None:
    wrapped = RewritingTemplate(tokenizer)
    sampler = ScriptedSampler([ids_of(tokenizer, [BASH_LS])] * 3)

    async def body(env):
        with pytest.raises(TemplateNotAppendOnly, match="not append-only") as caught:
            await run_session(env, SamplerRouter(sampler), wrapped, TASK, SamplingParams())
        return caught.value, (await env.health()).live_episodes

    error, live = run(body)
    assert "(earlier turn)" in str(error) and live == 0


def test_sessions_run_concurrently_and_number_their_samples(tokenizer) -> None:
    class Echo(ScriptedSampler):  # the same answer to every request
        async def generate(self, prompt_ids, params, **kw):
            self.script = [ids_of(tokenizer, [SUBMIT])]
            return await super().generate(prompt_ids, params, **kw)

    async def body(env):
        return await run_sessions(env, SamplerRouter(Echo([])), tokenizer, [TASK, TASK, "textgrid-truncate-too-long"],
                                  SamplingParams(), concurrency=2)

    trajs = run(body)
    assert [(t.task_id, t.sample_index, t.status) for t in trajs] == [
        (TASK, 0, "submitted"), (TASK, 1, "submitted"), ("textgrid-truncate-too-long", 0, "submitted")]
    assert len({t.extra["session_id"] for t in trajs}) == 3


def test_trajectories_saved_as_jsonl_append_and_check(tokenizer, tmp_path: Path) -> None:
    sampler = ScriptedSampler([ids_of(tokenizer, [BASH_LS]), ids_of(tokenizer, [SUBMIT])])
    traj = run(lambda env: run_session(env, SamplerRouter(sampler), tokenizer, TASK, SamplingParams(return_support=True)))
    path = tmp_path / "runs" / "trajectories.jsonl"
    assert save_trajectories(path, [traj]) == 1 and save_trajectories(path, [traj, traj]) == 2
    loaded = load_trajectories(path)
    assert len(loaded) == 3 and all(t == traj for t in loaded)
    for t in loaded:
        check_trajectory(t, tokenizer)
    # a write cut short leaves a torn last line: skipped; a bad line before the end is an error
    with path.open("ab") as f:
        f.write(traj.to_json()[:100].encode())
    assert len(load_trajectories(path)) == 3
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    with pytest.raises(ValueError, match=r"trajectories.jsonl:2: not a trajectory"):
        load_trajectories(path)
    with pytest.raises(FileNotFoundError, match="no such trajectory file"):
        load_trajectories(tmp_path / "none.jsonl")

    # tampering is caught: a re-tokenised turn, an unmasked environment token, a text not from the ids
    turn = traj.turns[0]
    moved = dataclasses.replace(traj, token_ids=list(traj.token_ids))
    moved.token_ids[turn.offset] += 1
    assert "not at offset" in " ".join(trajectory_problems(moved, tokenizer))
    unmasked = dataclasses.replace(traj, loss_mask=list(traj.loss_mask))
    unmasked.loss_mask[0] = 1
    assert "environment token(s) have loss mask 1" in " ".join(trajectory_problems(unmasked, tokenizer))
    edited = dataclasses.replace(traj, turns=[dataclasses.replace(turn, text=turn.text + " ")] + traj.turns[1:])
    with pytest.raises(TrajectoryCheckError, match="text is not the decode"):
        check_trajectory(edited, tokenizer)
    resupported = dataclasses.replace(traj, support_ids=[list(s) for s in traj.support_ids])
    resupported.support_ids[1] = [5, 6]
    assert "support other than [their id]" in " ".join(trajectory_problems(resupported, tokenizer))
    json.loads(traj.to_json())  # plain JSON (no NaN)


def test_session_limits_are_checked() -> None:
    for kwargs, words in [({"max_turns": 0}, "max_turns"), ({"max_context_tokens": 0}, "max_context_tokens"),
                          ({"max_tokens_per_turn": 0}, "max_tokens_per_turn")]:
        with pytest.raises(ValueError, match=words):
            SessionLimits(**kwargs)


def test_the_list_format_reaches_the_environment_as_two_calls(tokenizer) -> None:
    fmt = get_format("smollm2-list")
    text = fmt.format_calls([BASH_LS, SUBMIT])
    sampler = ScriptedSampler([ids_of(tokenizer, text)])

    async def body(env):
        traj = await run_session(env, SamplerRouter(sampler), tokenizer, TASK, SamplingParams(), formatter=fmt)
        return traj, await env.get_episode(traj.episode_id)

    traj, state = run(body)
    assert (traj.status, traj.format_errors, len(traj.turns), state.tool_calls) == ("submitted", 0, 1, 2)
    assert traj.extra["tool_format"] == "smollm2-list" and "<tool_call>[" in tokenizer.decode(traj.token_ids[: traj.prompt_len])


def test_appending_a_reply_stays_cheap_and_append_only() -> None:
    from patchgym.rl.rollout.probe import suffix_cost

    cost = suffix_cost(turns=4)
    assert cost["tokens"] > 1000 and cost["median_suffix_ms"] > 0 and cost["full_reencode_ms"] > 0
