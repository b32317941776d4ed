"""End to end over real HTTP: `patchgym serve --tasks bundled` in a child process on loopback, the
real SmolLM2-135M-Instruct model in the embedded sampler, the real tokenizer and chat template.
The model's sessions keep every sampled id with the sampler's log q, support and weight version,
the environment received each turn's decoded text, and the saved trajectories pass the check; a
scripted test double fixes the task over the same wire (reward 1)."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from patchgym.env.client import AsyncEnvClient
from patchgym.env.testing import ServerProcess, sandbox_unavailable_reason
from patchgym.rl.fleet.model import Group
from patchgym.rl.models import load_model, load_tokenizer
from patchgym.rl.rollout import (SamplerRouter, SessionLimits, check_trajectory, episode_problems, load_trajectories, run_session,
                                 run_sessions, save_trajectories)
from patchgym.rl.sampler.embedded import EmbeddedSampler
from patchgym.rl.sampler.types import SamplingParams
from tests.test_rollout_session import SUBMIT, ScriptedSampler, ids_of

skip_reason = sandbox_unavailable_reason("local")
pytestmark = pytest.mark.skipif(skip_reason is not None, reason=skip_reason or "")
TASK = "spancal-range-length-off-by-one"
TOKEN = "rollout-e2e-7f3a"


@pytest.fixture(scope="module")
def server():
    running = ServerProcess(["--tasks", "bundled", "--id", TASK, "--token", TOKEN])
    yield running
    running.stop()


def test_a_scripted_fix_over_http_earns_reward_1(server) -> None:
    from patchgym.tasks.loaders import load_tasks

    tokenizer = load_tokenizer()
    patch = next(t for t in load_tasks("bundled") if t.instance_id == TASK).patch
    old = next(l[1:] for l in patch.splitlines() if l.startswith("-") and not l.startswith("---"))
    new = next(l[1:] for l in patch.splitlines() if l.startswith("+") and not l.startswith("+++"))
    edit = {"name": "str_replace_editor", "arguments": {"command": "str_replace", "path": "/testbed/spancal/ranges.py",
                                                        "old_str": old, "new_str": new}}
    double = ScriptedSampler([ids_of(tokenizer, [edit]), ids_of(tokenizer, [SUBMIT])])

    async def body():
        async with AsyncEnvClient(server.url, token=TOKEN) as env:
            traj = await run_session(env, SamplerRouter(double), tokenizer, TASK, SamplingParams(return_support=True))
            return traj, await env.get_episode(traj.episode_id)

    traj, state = asyncio.run(body())
    assert (traj.status, traj.reward) == ("submitted", 1.0), state.verdict
    check_trajectory(traj, tokenizer)
    assert [m["content"] for m in state.transcript if m["role"] == "assistant"] == [t.text for t in traj.turns]
    assert episode_problems(traj, state) == []


@pytest.mark.slow  # 46-83 s here at load 14-22 (48 tokens of the real model): behind the marker
def test_model_sessions_over_http_keep_what_the_sampler_sampled(server, tmp_path: Path) -> None:
    tokenizer = load_tokenizer()
    sampler = EmbeddedSampler(load_model(), Group(name="cpu-bf16", accelerator="cpu", sessions_per_replica=2),
                              tokenizer=tokenizer, version=4)
    params = SamplingParams(temperature=0.5, top_p=0.95, max_new_tokens=12, return_support=True, seed=11)
    limits = SessionLimits(max_turns=2, max_context_tokens=4096)

    async def body():
        async with AsyncEnvClient(server.url, token=TOKEN) as env:
            trajs = await run_sessions(env, SamplerRouter(sampler), tokenizer, [TASK, TASK], params,
                                       concurrency=2, limits=limits)
            states = [await env.get_episode(t.episode_id) for t in trajs]
            fixed = await run_session(env, SamplerRouter(ScriptedSampler([ids_of(tokenizer, [SUBMIT])])), tokenizer,
                                      TASK, SamplingParams())
            return trajs, states, fixed, (await env.health()).live_episodes

    try:
        trajs, states, fixed, live = asyncio.run(body())
    finally:
        sampler.close()
    assert live == 0 and fixed.status == "submitted"  # the untouched repository submitted: reward 0
    path = tmp_path / "trajectories.jsonl"
    save_trajectories(path, trajs)
    for traj in load_trajectories(path):
        check_trajectory(traj, tokenizer)
        assert traj.status in ("turn_limit", "format_error", "submitted") and 1 <= len(traj.turns) <= 2
        for turn in traj.turns:
            span = slice(turn.offset, turn.offset + len(turn.sampled_ids))
            assert 1 <= len(turn.sampled_ids) <= 12 and turn.group == "cpu-bf16" and turn.weight_version == 4
            assert set(traj.weight_versions[span]) == {4}
            for token, logq, support, support_logq in zip(traj.token_ids[span], traj.logprobs[span],
                                                          traj.support_ids[span], traj.support_logprobs[span]):
                # log q of the drawn token is its entry in the support it was drawn from (top-p 0.95)
                assert logq <= 0 and token in support and math.isclose(logq, support_logq[support.index(token)], abs_tol=1e-5)
                assert math.isclose(sum(math.exp(x) for x in support_logq), 1.0, abs_tol=1e-3)
    assert trajs[0].extra["session_id"] != trajs[1].extra["session_id"]
    for traj, state in zip(trajs, states):  # the environment received exactly the decoded turns
        assert episode_problems(traj, state) == []
