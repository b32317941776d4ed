"""A bundled task served by the real `patchgym serve`: the gold fix made through the editor tool is
rewarded 1; the untouched repository submitted as is is not."""

from __future__ import annotations

import pytest

from patchgym.env.client import EnvClient
from patchgym.env.testing import ServerProcess, editor_calls_for_patch, sandbox_unavailable_reason

skip_reason = sandbox_unavailable_reason("local")
pytestmark = pytest.mark.skipif(skip_reason is not None, reason=skip_reason or "")


@pytest.fixture(scope="module")
def easy_task():
    from patchgym.tasks.loaders import load_tasks

    try:
        tasks = load_tasks("bundled")
    except Exception as exc:  # noqa: BLE001 - the suite is built on first use and may not be buildable here
        pytest.skip(f"the bundled suite cannot be loaded here: {exc}")
    easy = [t for t in tasks if t.difficulty == "easy" and t.patch]
    if not easy:
        pytest.skip("the bundled suite has no easy task with a gold patch")
    return easy[0]


def test_bundled_easy_task_fixed_with_the_editor_over_http(easy_task) -> None:
    server = ServerProcess(["--tasks", "bundled", "--id", easy_task.instance_id, "--token", "t0k"])
    try:
        with EnvClient(server.url, token="t0k") as client:
            started = client.start_episode(easy_task.instance_id)
            assert easy_task.patch not in str(started.messages)
            edits = editor_calls_for_patch(easy_task.patch)
            result = client.step(started.episode_id, tool_calls=edits)
            assert not result.done and not any(m["content"].startswith("Error") for m in result.messages), result
            result = client.step(started.episode_id, tool_calls=[{"name": "submit", "arguments": {}}])
            assert (result.status, result.reward) == ("submitted", 1.0), client.get_episode(started.episode_id).verdict

            untouched = client.start_episode(easy_task.instance_id)
            result = client.step(untouched.episode_id, tool_calls=[{"name": "submit", "arguments": {}}])
            assert (result.status, result.reward) == ("submitted", 0.0)
    finally:
        server.stop()
