"""Episodes end to end (real sandbox, real grader): every status, its reward, and what the agent sees."""

from __future__ import annotations

import asyncio
import json

import pytest

from patchgym.env.episode import Episode, EpisodeFinished, EpisodeStatus
from patchgym.env.limits import EpisodeLimits
from patchgym.env.testing import (
    GOLD_PATCH,
    TEST_PATCH,
    prepare_toy_task,
    sandbox_unavailable_reason,
    toy_fix_calls,
    toy_wrong_fix_calls,
)
from patchgym.env.toolcalls import ToolCall

skip_reason = sandbox_unavailable_reason("local")
pytestmark = pytest.mark.skipif(skip_reason is not None, reason=skip_reason or "")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory):
    return prepare_toy_task(tmp_path_factory.mktemp("toy"))


@pytest.fixture(scope="module")
def factory():
    from patchgym.harness.sandbox.base import get_factory

    made = get_factory("local")
    yield made
    made.close_all()


async def real_grader(prepared, patch):
    from patchgym.harness.grader import agrade_patch

    return await agrade_patch(prepared, patch)


def calls(raw: list[dict]) -> list[ToolCall]:
    return [ToolCall(name=c["name"], arguments=c["arguments"]) for c in raw]


async def start(prepared, factory, ended: list | None = None, **limits) -> Episode:
    async def on_finish(episode: Episode) -> None:
        if ended is not None:
            ended.append(episode.episode_id)

    return await Episode.start("ep-test", prepared, factory, EpisodeLimits(**limits), grader=real_grader,
                               on_finish=on_finish)


def test_the_agent_never_sees_the_fix_or_the_grading_tests(prepared, factory) -> None:
    async def main() -> None:
        episode = await start(prepared, factory)
        try:
            shown = json.dumps({"messages": episode.messages, "tools": episode.tools})
            assert prepared.task.problem_statement in shown
            for secret in ["return a + b", "TestAdd", "test_add", "FAIL_TO_PASS", GOLD_PATCH[:40], TEST_PATCH[:40]]:
                assert secret not in shown
            assert episode.messages[0]["role"] == "system" and episode.messages[1]["role"] == "user"
        finally:
            await episode.close()

    asyncio.run(main())


def test_fix_and_submit_gets_reward_1_graded_in_a_fresh_sandbox(prepared, factory) -> None:
    async def main() -> None:
        ended: list[str] = []
        episode = await start(prepared, factory, ended)
        agent_sandbox = episode.sandbox
        look = await episode.step(tool_calls=[ToolCall("bash", {"command": "python -c 'import calc; print(calc.add(2, 3))'"})])
        assert look["messages"][0]["content"].startswith("-1")
        result = await episode.step(tool_calls=calls(toy_fix_calls()))
        assert result["done"] and result["status"] == "submitted" and result["reward"] == 1.0
        assert agent_sandbox.closed
        assert episode.verdict.status == "resolved"
        assert "+    return a + b" in episode.diff
        assert ended == ["ep-test"]
        with pytest.raises(EpisodeFinished):
            await episode.step(tool_calls=[ToolCall("bash", {"command": "ls"})])
        await episode.close()
        assert episode.status is EpisodeStatus.SUBMITTED and ended == ["ep-test"]  # ends once

    asyncio.run(main())


def test_wrong_fix_gets_reward_0(prepared, factory) -> None:
    async def main() -> None:
        episode = await start(prepared, factory)
        result = await episode.step(tool_calls=calls(toy_wrong_fix_calls()))
        assert result["status"] == "submitted" and result["reward"] == 0.0
        assert episode.verdict.status == "unresolved"

    asyncio.run(main())


def test_agent_edits_do_not_reach_the_grading_tests(prepared, factory) -> None:
    """Writing the hidden test file itself does not help: grading restores it from test_patch."""

    async def main() -> None:
        episode = await start(prepared, factory)
        fake = "import unittest\nclass TestAdd(unittest.TestCase):\n    def test_add(self):\n        pass\n"
        result = await episode.step(tool_calls=[
            ToolCall("str_replace_editor", {"command": "create", "path": "tests/test_add.py", "file_text": fake}),
            ToolCall("submit", {}),
        ])
        assert result["reward"] == 0.0

    asyncio.run(main())


def test_three_malformed_steps_in_a_row_end_with_format_error(prepared, factory) -> None:
    async def main() -> None:
        episode = await start(prepared, factory)
        first = await episode.step(text="I think the bug is in add.")
        assert not first["done"] and "Format error: no tool call found" in first["messages"][0]["content"]
        good = await episode.step(text='<tool_call>{"name": "bash", "arguments": {"command": "true"}}</tool_call>')
        assert good["format_errors_in_a_row"] == 0
        await episode.step(tool_calls=[ToolCall("nope", {})])
        second = await episode.step(tool_calls=[ToolCall("bash", {"cmd": "ls"})])
        assert "'cmd' is not an argument of bash" in second["messages"][0]["content"]
        assert second["format_errors_in_a_row"] == 2 and not second["done"]
        third = await episode.step(text='<tool_call>{"name": "bash", "arguments": {</tool_call>')
        assert third["done"] and third["status"] == "format_error" and third["reward"] == 0.0
        assert episode.sandbox.closed

    asyncio.run(main())


def test_turn_limit(prepared, factory) -> None:
    async def main() -> None:
        episode = await start(prepared, factory, max_turns=2)
        first = await episode.step(tool_calls=[ToolCall("bash", {"command": "true"})])
        assert not first["done"]
        second = await episode.step(tool_calls=[ToolCall("bash", {"command": "true"})])
        assert second["done"] and second["status"] == "turn_limit" and second["reward"] == 0.0

    asyncio.run(main())


def test_time_limit_cuts_a_long_command(prepared, factory) -> None:
    async def main() -> None:
        episode = await start(prepared, factory, wall_time_s=1.5)
        result = await episode.step(tool_calls=[ToolCall("bash", {"command": "sleep 20"})])
        assert result["done"] and result["status"] == "time_limit" and result["reward"] == 0.0
        assert episode.elapsed_s() < 10

    asyncio.run(main())


def test_tool_calls_per_turn_limit(prepared, factory) -> None:
    async def main() -> None:
        episode = await start(prepared, factory, max_tool_calls_per_turn=2)
        result = await episode.step(tool_calls=[ToolCall("bash", {"command": f"echo {i}"}) for i in range(3)])
        contents = [m["content"] for m in result["messages"]]
        assert contents[0].startswith("0") and contents[1].startswith("1")
        assert "at most 2 tool calls per turn" in contents[2]
        assert result["format_errors_in_a_row"] == 1
        await episode.close()

    asyncio.run(main())


def test_close_ends_with_closed_and_keeps_the_diff(prepared, factory) -> None:
    async def main() -> None:
        episode = await start(prepared, factory)
        await episode.step(tool_calls=calls(toy_fix_calls())[:1])
        await episode.close()
        assert episode.status is EpisodeStatus.CLOSED and episode.reward == 0.0
        assert episode.sandbox.closed and "return a + b" in (episode.diff or "")

    asyncio.run(main())


def test_close_during_a_running_command_kills_it(prepared, factory) -> None:
    async def main() -> None:
        episode = await start(prepared, factory)
        stepping = asyncio.create_task(episode.step(tool_calls=[ToolCall("bash", {"command": "sleep 60"})]))
        await asyncio.sleep(1.0)
        await episode.close()
        result = await asyncio.wait_for(stepping, timeout=20)
        assert result["done"] and result["status"] == "closed"

    asyncio.run(main())


def test_calls_after_submit_are_not_run(prepared, factory) -> None:
    async def main() -> None:
        episode = await start(prepared, factory)
        result = await episode.step(tool_calls=[ToolCall("submit", {}), ToolCall("bash", {"command": "touch x"})])
        assert "came after submit" in result["messages"][1]["content"]
        assert result["status"] == "submitted" and result["reward"] == 0.0
        assert episode.verdict.status == "empty_patch"

    asyncio.run(main())
